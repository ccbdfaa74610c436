// Read-back pacing on CPU adapters (lavapipe, SwiftShader; device.ts isCpuEmulation).
// While a mapAsync (or onSubmittedWorkDone) is pending, Dawn's Node binding ticks the device
// on every turn of the event loop: a busy-poll of the main thread. On a GPU that costs only
// a host core; on a CPU adapter it takes a core from the threads that run the shaders. On the
// 2-core VM a tiny-think decode spent 3.6 of its 8.9 CPU-seconds polling (24 steps).
//
// So on a CPU adapter the encoder sleeps (a timer: the event loop is idle, nothing polls)
// for FRACTION of the time a step of the same shape last took from its last submit to its
// read-backs mapped, then maps (earlier submits of a chunked step are never waited on). The results do
// not depend on it: the same buffers are mapped after the same submit, only later.
// Invariants of the estimate (`nextEstimate`), per submit shape:
// - a wait after the sleep longer than OVERSLEPT_MS means the work outlasted the sleep: the
//   estimate becomes the whole measured time (sleep + wait), an upper bound of the GPU time;
// - a wait at most OVERSLEPT_MS means the work may have ended during the sleep (how long
//   before is unknown): the estimate halves the time slept, so the next sleep is
//   FRACTION / 2 of it, and a shape whose time dropped 10× is back within ~4 submits;
// - no estimate yet (a shape seen first), or one under MIN_SLEEP_MS: no sleep, the plain wait.

/** The share of the expected time slept before mapping: the rest is polled. */
export const FRACTION = 0.8;
/** A wait after the sleep up to this (ms) counts as "done during the sleep". */
export const OVERSLEPT_MS = 1;
/** Expected times below this (ms) are not worth a timer. */
export const MIN_SLEEP_MS = 2;
/** Shapes remembered (a step's dispatch count and workgroup scale); past it, forget all. */
const MAX_SHAPES = 512;

/** The estimate after one paced submit: `slept` ms asleep, then `waited` ms mapping. */
export function nextEstimate(slept: number, waited: number): number {
  return waited > OVERSLEPT_MS ? slept + waited : slept / 2;
}

/** How long to sleep for a submit whose estimate is `estimate` (undefined: none yet). */
export function sleepFor(estimate: number | undefined): number {
  return estimate === undefined || estimate < MIN_SLEEP_MS ? 0 : FRACTION * estimate;
}

/**
 * A step's shape: its dispatch count, in buckets of about 19 % its total workgroups (decode
 * steps of one batch share a shape; prefills of different lengths do not), and its submits
 * (submit-chunks.ts: the wait after a step's last submit is the GPU work still queued, which
 * chunking changes).
 */
export function submitShape(dispatches: number, workgroups: number, submits = 1): string {
  return `${dispatches}:${Math.round(4 * Math.log2(1 + workgroups))}${submits > 1 ? `:${submits}` : ''}`;
}

export class ReadbackPacer {
  private readonly estimates = new Map<string, number>();
  /** Sleeps taken, and their total (ms): what the pacer did, for benches and tests. */
  sleeps = 0;
  sleptMs = 0;

  /** `sleep` and `now` (ms): a timer and the clock (tests pass a simulated pair). */
  constructor(
    private readonly sleep: (ms: number) => Promise<void> = (ms) => new Promise((r) => setTimeout(r, ms)),
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** Awaits `mapped()` (the read-backs' mapAsync) after sleeping through most of the
   * expected GPU time of a submit of this shape; learns from how long it took. */
  async wait(shape: string, mapped: () => Promise<unknown>): Promise<void> {
    const slept = sleepFor(this.estimates.get(shape));
    const t0 = this.now();
    if (slept > 0) {
      await this.sleep(slept);
      this.sleeps++;
    }
    const t1 = this.now();
    await mapped();
    const t2 = this.now();
    const asleep = t1 - t0;
    this.sleptMs += asleep;
    if (this.estimates.size >= MAX_SHAPES && !this.estimates.has(shape)) this.estimates.clear();
    this.estimates.set(shape, slept > 0 ? nextEstimate(asleep, t2 - t1) : t2 - t0);
  }
}
