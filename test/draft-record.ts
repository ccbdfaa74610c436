// What an engine's MTP drafting did, for tests comparing the kernels' draft picks with the
// host's (the hostDrafts hook, switched per run): every proposal's ids (the draftOverride hook, returning them
// unchanged) and every read-back call (counted by wrapping the engine's kernels' readBack:
// calls, bytes, the longest range), per run of sequential requests.
import type { Engine } from '../src/engine/engine.js';
import type { GenerateRequest } from '../src/engine/request-builder.js';
import type { EngineTestHooks, HookRequest } from '../src/engine/test-hooks.js';
import type { PenaltyPicksCall, ReadRange, Tensor } from '../src/kernels/types.js';

export interface DraftRun {
  /** Output ids per request. */
  readonly out: number[][];
  /** Per proposal, in order: [committed length, ...drafts]. */
  readonly drafts: number[][];
  readonly rounds: number;
  readonly reads: number;
  readonly bytes: number;
  /** The longest range any read-back carried (elements). */
  readonly longest: number;
}

/** The recorder's hooks (pass them to the engine) and run(e, reqs, hostDrafts): the
 * requests one after another, their drafts picked on the host when hostDrafts, with what
 * drafting did meanwhile. */
export function draftRecorder(): {
  hooks: Required<Pick<EngineTestHooks, 'draftOverride' | 'hostDrafts'>>;
  run: (e: Engine, reqs: readonly GenerateRequest[], hostDrafts: boolean) => Promise<DraftRun>;
} {
  let log: number[][] = [];
  let onHost = false;
  const hooks = {
    draftOverride: (req: HookRequest, drafts: number[]): number[] => { log.push([req.tokens.length, ...drafts]); return drafts; },
    hostDrafts: () => onHost,
  };
  const run = async (e: Engine, reqs: readonly GenerateRequest[], hostDrafts: boolean): Promise<DraftRun> => {
    const k = e.model.kernels;
    const readBack = k.readBack;
    let [reads, bytes, longest] = [0, 0, 0];
    k.readBack = (ranges: readonly ReadRange<Tensor>[]) => {
      reads++;
      for (const r of ranges) { bytes += 4 * r.length; longest = Math.max(longest, r.length); }
      return readBack.call(k, ranges);
    };
    log = [];
    onHost = hostDrafts;
    const r0 = e.stats().spec.rounds;
    try {
      const out: number[][] = [];
      for (const r of reqs) out.push([...(await e.complete(r)).outputIds]);
      return { out, drafts: log, rounds: e.stats().spec.rounds - r0, reads, bytes, longest };
    } finally {
      k.readBack = readBack;
    }
  };
  return { hooks, run };
}

/** Make every pass's first pick of row `row` wrong (id 1 + the call's n mod 7, written after the
 * kernels' pick, in order with the step's work), so the replay disagrees on nearly every pass. */
export function corruptFirstPicks(e: Engine, row: number): () => void {
  const k = e.model.kernels;
  const orig = k.penaltyPicks;
  k.penaltyPicks = (idsT: Tensor, x: Tensor, vals: Tensor, call: PenaltyPicksCall) => {
    orig.call(k, idsT, x, vals, call);
    if (call.steps === 0 && row < call.m) k.write(idsT, call.steps * call.idsStride + row, [1 + (call.n % 7)]);
  };
  return () => { k.penaltyPicks = orig; };
}
