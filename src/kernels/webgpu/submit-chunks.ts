// How a step's dispatches are split into submits (encoder.ts). While the host records a
// step, each complete chunk is encoded into its own command buffer and submitted, so the
// GPU runs chunk i while the host records and encodes chunk i + 1: a step then costs about
// max(host, GPU) plus one chunk, not host + GPU. The queue keeps every dependency (submits
// run in order; a queue.writeBuffer lands after the submits before it), so the bits are
// those of one submit per step.
// Policy: the first submit carries `first` dispatches (small, so the GPU starts early),
// every later one `every` (0: the rest of the step in one); the last submit carries what
// remains. 0 for both: one submit per step.

export interface SubmitChunks {
  /** Dispatches of a step's first submit (0: `every`). */
  readonly first: number;
  /** Dispatches of each later submit (0: the rest of the step in one). */
  readonly every: number;
}

/** One submit per step. */
export const SINGLE_SUBMIT: SubmitChunks = { first: 0, every: 0 };

/** The default on a GPU (docs/kernels.md "Host and GPU time per step"): the first chunk of 8
 * dispatches starts the GPU after ~8 dispatches' host time; later chunks of 32 keep the
 * per-submit cost (a command buffer, the parameter upload) small against their dispatches. */
export const GPU_SUBMIT_CHUNKS: SubmitChunks = { first: 8, every: 32 };

/** The default for an adapter: chunked on a GPU; on a CPU adapter (lavapipe) one submit,
 * where the "GPU" is threads on the host's own cores and overlap buys no time (measured:
 * docs/kernels.md). */
export function defaultSubmitChunks(cpuEmulation: boolean): SubmitChunks {
  return cpuEmulation ? SINGLE_SUBMIT : GPU_SUBMIT_CHUNKS;
}

/** Whether a policy ever splits a step. */
export function isChunked(p: SubmitChunks): boolean {
  return p.first > 0 || p.every > 0;
}

/** Dispatches the submit after `submitted` earlier submits of the step carries at most
 * (Infinity: the rest of the step). */
export function chunkLimit(p: SubmitChunks, submitted: number): number {
  const n = submitted === 0 && p.first > 0 ? p.first : p.every;
  return n > 0 ? n : Infinity;
}

/** Parse a setting: "0" (one submit), "N" (N dispatches a submit), "F,N" (the first F, then N). */
export function parseSubmitChunks(raw: string): SubmitChunks | null {
  const m = /^\s*(\d+)\s*(?:,\s*(\d+)\s*)?$/.exec(raw);
  if (!m) return null;
  const a = Number(m[1]);
  const b = m[2] === undefined ? a : Number(m[2]);
  return m[2] === undefined ? { first: a, every: a } : { first: a, every: b };
}
