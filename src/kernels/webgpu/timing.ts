// Where a step's timestamp queries go (encoder.ts). 'step': query 0 where the first compute
// pass begins, query 1 where the last one ends, so the difference spans every pass and the
// copies between them with the step's passes unchanged. 'dispatch': a pass per dispatch,
// queries 2i and 2i + 1 around dispatch i.

export type EncoderTiming = 'none' | 'step' | 'dispatch';

/** Timestamp queries a submit of `dispatches` dispatches needs. */
export function timingQueries(mode: EncoderTiming, dispatches: number): number {
  if (dispatches === 0 || mode === 'none') return 0;
  return mode === 'step' ? 2 : 2 * dispatches;
}

export interface PassWrites { beginningOfPassWriteIndex?: number; endOfPassWriteIndex?: number }

/** For each op (true: a dispatch, false: a copy, which ends the open pass), the timestamp
 * writes of the pass that op begins (undefined where it begins none, or none is timed).
 * Invariant for 'step': the first pass gets the beginning write and the last pass the end
 * write (one pass may get both). */
export function passTimestamps(mode: EncoderTiming, isDispatch: readonly boolean[]): (PassWrites | undefined)[] {
  const out: (PassWrites | undefined)[] = isDispatch.map(() => undefined);
  if (mode === 'dispatch') {
    let q = 0;
    for (const [i, d] of isDispatch.entries()) if (d) out[i] = { beginningOfPassWriteIndex: 2 * q, endOfPassWriteIndex: 2 * q++ + 1 };
    return out;
  }
  if (mode === 'none') return out;
  const starts = isDispatch.flatMap((d, i) => (d && !isDispatch[i - 1] ? [i] : [])); // a copy ends a pass
  const first = starts[0];
  const last = starts[starts.length - 1];
  if (first === undefined || last === undefined) return out;
  out[first] = { beginningOfPassWriteIndex: 0 };
  out[last] = { ...out[last], endOfPassWriteIndex: 1 };
  return out;
}

/** One submit's timestamps (ns, as resolved) and, in 'dispatch' mode, its dispatches' labels. */
export interface SubmitTimestamps { readonly ts: BigInt64Array; readonly labels: readonly string[] }

/** A step's GPU times from its submits' timestamps, in submit order. 'step': `spanNs` from
 * the first submit's first pass beginning to the last submit's last pass ending (idle gaps
 * between submits included: a GPU waiting for the host), `busyNs` the sum of each submit's
 * own span (the gaps left out); one submit: both the same. 'dispatch': each dispatch's
 * pass, by label, and their sum as both. */
export function stepGpuTimes(mode: EncoderTiming, submits: readonly SubmitTimestamps[]):
  { readonly spanNs: number; readonly busyNs: number; readonly dispatches: readonly { label: string; ns: number }[] } {
  if (mode === 'dispatch') {
    const dispatches = submits.flatMap((s) => s.labels.map((label, i) => ({ label, ns: Number(s.ts[2 * i + 1]! - s.ts[2 * i]!) })));
    const sum = dispatches.reduce((a, d) => a + d.ns, 0);
    return { spanNs: sum, busyNs: sum, dispatches };
  }
  if (mode === 'none' || submits.length === 0) return { spanNs: 0, busyNs: 0, dispatches: [] };
  const busyNs = submits.reduce((a, s) => a + Number(s.ts[1]! - s.ts[0]!), 0);
  const spanNs = Number(submits[submits.length - 1]!.ts[1]! - submits[0]!.ts[0]!);
  return { spanNs, busyNs, dispatches: [] };
}
