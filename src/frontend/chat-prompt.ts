// The prompt of a chat turn, shared by every chat-style API: the chat template over the
// messages, with tools either handed to the template (templates that render them) or written
// into the messages (templates that do not; see tool-prompt.ts) — both in the prepare pool
// (prepare-jobs.ts) when the host has one.
import type { ChatMessage } from './chat-template.js';
import { promptOpensThinking, THINK_CLOSE, THINK_OPEN } from '../tokenizer/reasoning.js';
import { type ChatTools, prepare, type PrepareHost } from './prepare-jobs.js';
import type { PromptFrontend } from './frontend.js';
import type { ThinkStart } from '../constrain/think.js';
import type { PreparedImage } from '../vision/pipeline.js';
import { expandPrompt, type ImageLimits, imageTokenOf, prepareImages } from './images.js';
import type { PromptImages } from './prompt.js';

/** Where the prompt leaves the model (defined with the reasoning masks that read it). */
export type { ThinkStart };

export interface ChatPrompt {
  readonly ids: number[];
  /** The generation prompt opened a reasoning block (`<think>\n`). */
  readonly thinking: boolean;
  /** Where each message ends: prefix-cache snapshot points the next turn will share. */
  readonly boundaries: number[];
  /** Where the prompt leaves the reasoning block (see server/thinking.ts). */
  readonly thinkStart: ThinkStart;
  /** The turn's images, one per pad run of `ids` (empty: none). */
  readonly images: readonly PreparedImage[];
}

/** Prompt tokens decoded to see how the prompt leaves the reasoning block. */
const THINK_TAIL_TOKENS = 8;

export { promptOpensThinking };

/** `open` when the prompt ends inside a reasoning block, `closed` when it ends right after
 * one (a template's thinking-off form), `none` otherwise. */
export function thinkStartOf(decodeTail: string): ThinkStart {
  const t = decodeTail.trimEnd();
  return t.endsWith(THINK_OPEN) ? 'open' : t.endsWith(THINK_CLOSE) ? 'closed' : 'none';
}

/** Render and tokenize a chat turn (in the host's prepare pool when it has one: `signal`
 * abandons the work when the client goes away). Errors are the frontend's
 * DeltaserveErrors; the empty-prompt and context-length checks are the caller's. */
export async function chatPrompt(host: PrepareHost & { readonly engine: { readonly info: { readonly frontend: PromptFrontend } } },
  messages: readonly ChatMessage[], think: boolean, kwargs: Record<string, unknown>, tools: ChatTools,
  signal?: AbortSignal, images?: PromptImages, limits?: ImageLimits): Promise<ChatPrompt> {
  const frontend = host.engine.info.frontend;
  const given = images && images.inputs.length > 0 ? images : null;
  // images are decoded first: a bad one is refused before any template work
  const decoded = given ? await prepareImages(frontend.vision, given.inputs, limits) : [];
  const sentinel = given ? { imageSentinel: given.sentinel } : {};
  const rendered = await prepare(host, { op: 'chat', messages, think, kwargs, tools, ...sentinel }, signal);
  const { ids, boundaries } = given
    ? expandPrompt(rendered.ids, rendered.boundaries, decoded, imageTokenOf(frontend.vision, given.inputs), frontend.vision!.cfg.spatialMergeSize)
    : rendered;
  const tail = frontend.tokenizer.decode(ids.slice(-THINK_TAIL_TOKENS));
  return { ids, boundaries, thinking: promptOpensThinking(tail), thinkStart: thinkStartOf(tail), images: decoded };
}
