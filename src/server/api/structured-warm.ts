// The warm-up at server start: what the first structured request would otherwise build on
// the event loop — the sorted vocabulary (~1 s on a 248K vocabulary), the JSON free-text
// token classes (of the whole vocabulary and of the quote-opening tokens' suffixes), and the
// automata of every `format` and the IDNA virama table — built in the background, a few
// milliseconds at a time between other event-loop work, once the server is listening. A
// request that needs one of them before it is done finishes that build at once.
import type { ServerContext } from '../context.js';
import { lazyJsonTextClass } from '../../constrain/free-text.js';
import { FORMATS } from '../../constrain/formats.js';
import { registerIdnaHostnames, warmIdnaTables } from '../../constrain/idna/index.js';
import { compileRegex } from '../../constrain/regex.js';
import { lazyQuoteSplit } from '../../constrain/quote-split.js';
import { lazyVocabFor } from './structured.js';
import { advanceInBackground, Lazy, type Steps } from '../../constrain/steps.js';

/** Milliseconds of warm-up work per event-loop turn. */
const SLICE_MS = 5;

export interface WarmUp {
  /** Resolves when everything is built, or soon after stop(). */
  readonly done: Promise<void>;
  stop(): void;
}

export function warmStructured(ctx: Pick<ServerContext, 'engine' | 'texts'>): WarmUp {
  let stopped = false;
  const isStopped = (): boolean => stopped;
  const done = (async () => {
    const vocab = lazyVocabFor(ctx);
    await advanceInBackground(vocab, SLICE_MS, isStopped);
    if (stopped) return;
    await advanceInBackground(lazyJsonTextClass(vocab.get()), SLICE_MS, isStopped);
    if (stopped) return;
    const split = lazyQuoteSplit(vocab.get());
    await advanceInBackground(split, SLICE_MS, isStopped);
    if (stopped) return;
    await advanceInBackground(lazyJsonTextClass(split.get().suffixes), SLICE_MS, isStopped);
    if (stopped) return;
    await advanceInBackground(new Lazy(formatSteps), SLICE_MS, isStopped);
  })();
  return { done, stop: () => void (stopped = true) };
}

/** Each format's automata (one pattern per step: a pattern is built in one go), then the
 * viramas hostname labels with a joiner ask for (one step, ~35 ms). */
function* formatSteps(): Steps<void> {
  registerIdnaHostnames(); // the server's hostname format (idempotent)
  for (const rule of Object.values(FORMATS)) {
    for (const p of [...rule.patterns, ...(rule.labels?.untracked ?? [])]) {
      compileRegex(p);
      yield;
    }
  }
  warmIdnaTables();
}
