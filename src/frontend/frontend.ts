// The prompt frontend of one served model: what the server and the CLI use to turn text,
// chat messages and tools into the token ids and split points the engine takes. It holds
// the tokenizer and the few model facts prompts are checked against; the engine builds one
// at load and exposes it as `engine.info.frontend`.
import type { TextTokenizer } from '../tokenizer/tokenizer.js';
import type { ToolFormat } from './tool-types.js';
import { type PreparedPrompt, type PromptInput, promptOf, type PromptTarget } from './prompt.js';
import { type PrepareContext, type PrepareJob, type PrepareResult, runPrepareJob } from './prepare-jobs.js';
import type { PreparedImage } from '../vision/pipeline.js';
import { DeltaserveError } from '../util/errors.js';
import type { PrepareWorkerData } from './prepare-worker.js';
import { toolFormatFor } from './tool-prompt.js';
import { expandPrompt, type FrontendVision, type ImageLimits, imageTokenOf, prepareImages } from './images.js';

/** The model facts a prompt depends on. */
export interface FrontendFacts {
  readonly vocabSize: number;
  readonly maxContext: number;
  /** config.json's model_type (the tool-call format of templates silent about tools). */
  readonly modelType: string;
  /** The vision side (null or absent: a text-only model, which refuses images). */
  readonly vision?: FrontendVision | null;
}

export class PromptFrontend implements PromptTarget, PrepareContext {
  readonly vocabSize: number;
  readonly maxContext: number;
  readonly modelType: string;
  readonly vision: FrontendVision | null;

  constructor(readonly tokenizer: TextTokenizer, facts: FrontendFacts) {
    this.vision = facts.vision ?? null;
    this.vocabSize = facts.vocabSize;
    this.maxContext = facts.maxContext;
    this.modelType = facts.modelType;
  }

  /** The tokenizer's chat template (undefined: the model has none). */
  get chatTemplate(): string | undefined {
    return this.tokenizer.chatTemplate ?? undefined;
  }

  /** How the served model writes tool calls. */
  get toolFormat(): ToolFormat {
    return toolFormatFor(this.tokenizer.chatTemplate, this.modelType);
  }

  /** Ids and split points of a text, chat or ids prompt (on the calling thread). */
  prompt(req: PromptInput): PreparedPrompt {
    return promptOf(this, req);
  }

  /** `req` with its prompt as ids and split points (what Engine.generate takes): the text
   * or chat fields are replaced, the other fields kept. */
  withPromptIds<R extends PromptInput>(req: R): Omit<R, keyof PromptInput> & { readonly promptIds: number[]; readonly messageBoundaries: number[] } {
    const { ids, boundaries } = this.prompt(req);
    if ((req.images?.inputs.length ?? 0) > 0) throw new DeltaserveError('bad_request', 'a request with images needs the async path (frontend.withPrompt)');
    const { prompt: _p, messages: _m, promptIds: _i, messageBoundaries: _b, think: _t, chatTemplateKwargs: _k, images: _im, ...rest } = req;
    return { ...rest, promptIds: ids, messageBoundaries: boundaries };
  }

  /** prompt(), images included: each image decoded and preprocessed (limits), its pad
   * expanded to its token count, the split points moved accordingly. */
  async preparePrompt(req: PromptInput, limits?: ImageLimits): Promise<PreparedPrompt> {
    const inputs = req.images?.inputs ?? [];
    if (inputs.length === 0) return this.prompt(req);
    const images = await prepareImages(this.vision, inputs, limits);
    const { ids, boundaries } = this.prompt(req);
    const expanded = expandPrompt(ids, boundaries, images, imageTokenOf(this.vision, inputs), this.vision!.cfg.spatialMergeSize);
    return { ...expanded, images };
  }

  /** withPromptIds, images included (what Engine.generate takes for a request with images). */
  async withPrompt<R extends PromptInput>(req: R, limits?: ImageLimits): Promise<Omit<R, keyof PromptInput> & {
    readonly promptIds: number[]; readonly messageBoundaries: number[]; readonly visionImages?: readonly PreparedImage[];
  }> {
    const { ids, boundaries, images } = await this.preparePrompt(req, limits);
    const { prompt: _p, messages: _m, promptIds: _i, messageBoundaries: _b, think: _t, chatTemplateKwargs: _k, images: _im, ...rest } = req;
    return { ...rest, promptIds: ids, messageBoundaries: boundaries, ...(images && images.length > 0 ? { visionImages: images } : {}) };
  }

  /** Run a prepare job on the calling thread (the prepare pool runs the same function). */
  run(job: PrepareJob): PrepareResult {
    return runPrepareJob(this, job);
  }

  /** What a prepare worker needs to build this frontend's twin (null: the tokenizer was
   * not loaded from a source a worker can read). */
  workerData(): PrepareWorkerData | null {
    const source = this.tokenizer.source;
    return source === undefined ? null : { source, vocabSize: this.vocabSize, maxContext: this.maxContext };
  }
}
