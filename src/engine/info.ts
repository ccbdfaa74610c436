// What the server and the CLI see of a loaded engine: model facts, limits and the prompt
// frontend — never the model itself (its weights, layers and kernels stay the engine's).
import { PromptFrontend } from '../frontend/frontend.js';
import type { FrontendVision } from '../frontend/images.js';
import type { AnyKernels } from '../kernels/types.js';
import type { ModelConfig } from '../model/config.js';
import type { AnyModel, StateLayout } from '../model/model.js';
import { probePromptAsync, type PromptProbe } from '../model/probe.js';
import type { TextTokenizer } from '../tokenizer/tokenizer.js';

export interface EngineInfo {
  /** The model directory or .gguf file the engine loaded (a hub name resolved). */
  readonly modelDir: string;
  readonly config: ModelConfig;
  /** Layer kinds and recurrent-state sizes. */
  readonly layout: StateLayout;
  /** The kernel backend (its name, threads and adapter for reports). */
  readonly kernels: AnyKernels;
  /** The weight tensors, for byte counts only. */
  readonly weights: object;
  /** Longest prompt + output, in tokens. */
  readonly maxContext: number;
  /** Ids the sampler may produce (padded vocabulary rows excluded). */
  readonly sampleVocab: number;
  /** MTP draft tokens per verify round at most (0 = speculation off). */
  readonly specTokens: number;
  /** Chat templates, tokenization, tools and split points for this model. */
  readonly frontend: PromptFrontend;
  readonly tokenizer: TextTokenizer;
  /** The prompt's last-position logits (and the MTP head's), outside the scheduler: a
   * debugging probe (`generate --dump-logits`). */
  probePrompt(promptIds: readonly number[], firstToken?: number): Promise<PromptProbe>;
}

/** The info view of an engine's model; `specTokens` is read when asked (it is fixed at load). */
export function engineInfo(model: AnyModel, tokenizer: TextTokenizer, limits: { maxContext: number; sampleVocab: number },
  specTokens: () => number, vision: FrontendVision | null = null): EngineInfo {
  const frontend = new PromptFrontend(tokenizer, { vocabSize: model.config.vocabSize, maxContext: limits.maxContext, modelType: model.config.modelType, vision });
  return {
    modelDir: model.dir, config: model.config, layout: model.layout, kernels: model.kernels, weights: model.weights,
    maxContext: limits.maxContext, sampleVocab: limits.sampleVocab, frontend, tokenizer,
    get specTokens() {
      return specTokens();
    },
    probePrompt: (ids, first) => probePromptAsync(model, ids, first),
  };
}
