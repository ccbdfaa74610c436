// Read-back pacing on CPU adapters (lavapipe, SwiftShader; device.ts isCpuEmulation).
// While a mapAsync (or onSubmittedWorkDone) is pending, Dawn's Node binding ticks the device
// on every turn of the event loop: a busy-poll of the main thread. On a GPU that costs only
// a host core; on a CPU adapter it takes a core from the threads that run the shaders. On the
// 2-core VM a tiny-think decode spent 3.6 of its 8.9 CPU-seconds polling (24 steps).
//
// So on a CPU adapter the encoder sleeps (a timer: the event loop is idle, nothing polls)
// through most of the time a step of the same shape takes, then maps (earlier submits of a
// chunked step are never waited on). The results do not depend on it: the same
// buffers are mapped after the same submit, only later.
//
// A step's time runs from its start: its submit, or, when an earlier paced submit was still
// pending then (overlapped decode: step N + 1 submitted before N's read-back), the moment that
// one was seen done, as the queue runs submits in order. Paced waits are therefore taken one
// after another: a later one sleeps only once the earlier one has mapped, so two sleeps never
// overlap and a step's time never counts the work queued before it.
//
// The sleep of a shape is a controller's output (`learn`), per submit shape, from `start`:
// - a shape's first step is not slept on; the next sleeps FRACTION of its time;
// - a step that dispatches a pipeline for the first time teaches nothing: llvmpipe compiles a
//   pipeline at its first dispatch, on the queue, so that step's time is mostly the compile's
//   (seconds for a GPU's unrolled kernels on a cold shader cache). Learnt as a first step, a
//   30 s compile made the next steps of a 100 ms shape sleep 24 s, then 20, 17, 15, 7, …:
//   ~90 s asleep (a test file spent 180 s of wall time on 74 CPU-seconds). Nor is it
//   polled through: Dawn's busy-poll doubled a compile's CPU (a 4.7 s compile: 9.4 CPU-s
//   polled, 4.8 slept through). The step is probed instead (`probe`, encoder.ts: a map of one read-back
//   given PROBE_WINDOW_MS, aborted if still pending), sleeping PROBE_SHARE of the time so
//   far between probes: ≤ ~10 % past the work's end, ~0.2 s of main-thread CPU for a 5 s compile;
// - a wait after the sleep longer than OVERSLEPT_MS means the work outlasted the sleep: the
//   next sleep is GROW of the whole measured time (sleep + wait), at most twice this sleep, so
//   one slow step (a preemption: 1.8 s among 100 ms steps) costs at most one sleep's oversleep;
// - a wait at most OVERSLEPT_MS after a timer that fired on time means the work ended during
//   the sleep: the next sleep is SHRINK of this one, and half of it from the HALVE_AFTER + 1-th
//   oversleep in a row (the shape got faster: a 10× drop is back within ~7 submits);
// - the same after a late timer (it fired past LATE × the sleep asked: the main thread was busy
//   recording the next step) tested nothing and teaches nothing;
// - sleeps under MIN_SLEEP_MS are not taken (the step is measured as unslept).
// Why sleep so close to the whole time, and shrink slowly: on lavapipe the poll slows the
// shader threads it shares the cores with, 2–4× (tiny-think decode steps ended within 98 ms
// slept through; after a 50 ms sleep one took 229 ms, 177 of them polled), so a millisecond
// polled costs more than one overslept. Why no median or mean of past times: those are the
// polled (inflated) times. The old rule (sleep 0.8 of the last time, halve on an oversleep)
// swung between 60 and 390 ms, and followed one 1.8 s step with 2.6 s of oversleeping.

/** The first sleep of a shape: this share of its first time. */
export const FRACTION = 0.8;
/** After a sleep the work outlasted: this share of the whole measured time. */
export const GROW = 0.95;
/** After a sleep the work ended within: this share of it ... */
export const SHRINK = 0.85;
/** ... and half of it once this many sleeps in a row before it overslept too. */
export const HALVE_AFTER = 3;
/** A timer that fired past this multiple of the sleep asked was late (the host busy). */
export const LATE = 1.25;
/** A wait after the sleep up to this (ms) counts as "done during the sleep". */
export const OVERSLEPT_MS = 1;
/** Sleeps below this (ms) are not worth a timer. */
export const MIN_SLEEP_MS = 2;
/** Between probes of a compiling step: this share of its time so far ... */
export const PROBE_SHARE = 0.1;
/** ... and at least this (ms). */
export const PROBE_MIN_MS = 5;
/** How long a probe's map may stay pending (ms) before it is aborted. */
export const PROBE_WINDOW_MS = 1;
/** Shapes remembered (a step's dispatch count and workgroup scale); past it, forget all. */
const MAX_SHAPES = 512;

/** One paced wait, in ms from the step's start: `asleep` until mapping began (the timer, and
 * any time the step had run before its wait began), `waited` mapping; `slept` the sleep asked
 * (0: none was). */
export interface PacedTimes {
  readonly slept: number;
  readonly asleep: number;
  readonly waited: number;
}

/** What the pacer knows of one shape: the next sleep (undefined: none yet), and how many
 * sleeps in a row the work ended within. */
export interface ShapeTimes {
  readonly sleep: number | undefined;
  readonly oversleeps: number;
}

export const NO_TIMES: ShapeTimes = { sleep: undefined, oversleeps: 0 };

/** How long to sleep for a shape (0: not at all). */
export function sleepOf({ sleep }: ShapeTimes): number {
  return sleep === undefined || sleep < MIN_SLEEP_MS ? 0 : sleep;
}

/** A shape's times after one paced wait. */
export function learn(times: ShapeTimes, { slept, asleep, waited }: PacedTimes): ShapeTimes {
  const whole = asleep + waited;
  if (slept === 0) return { sleep: FRACTION * whole, oversleeps: 0 };
  if (waited > OVERSLEPT_MS) return { sleep: GROW * Math.min(whole, 2 * slept), oversleeps: 0 };
  if (asleep > LATE * slept) return times; // a late timer: nothing tested
  return { sleep: (times.oversleeps >= HALVE_AFTER ? 0.5 : SHRINK) * slept, oversleeps: times.oversleeps + 1 };
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

const ignore = (): void => {};

/** A step holding a pipeline's first dispatch (ReadbackPacer.firstDispatch): `probe` (null
 * when the step has no read-back to probe) resolves true once the step's work is done, false
 * while it runs, leaving nothing pending (nothing polls) either way. */
export interface CompilingStep {
  readonly probe: (() => Promise<boolean>) | null;
}

export class ReadbackPacer {
  private readonly times = new Map<string, ShapeTimes>();
  /** The last paced wait (settled or not): the next one begins after it. */
  private tail: Promise<void> = Promise.resolve();
  /** When the last paced wait saw its work done (`now` ms). */
  private lastDone = -Infinity;
  /** Pipelines dispatched at least once on this device (firstDispatch). */
  private readonly dispatched = new WeakSet<object>();
  /** Sleeps taken, and their total (ms): what the pacer did, for benches and tests. */
  sleeps = 0;
  sleptMs = 0;
  /** Probes of compiling steps. */
  probes = 0;

  /** `sleep` and `now` (ms): a timer and the clock (tests pass a simulated pair). */
  constructor(
    private readonly sleep: (ms: number) => Promise<void> = (ms) => new Promise((r) => setTimeout(r, ms)),
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** Whether this is `pipeline`'s first dispatch on the device (it compiles there). */
  firstDispatch(pipeline: object): boolean {
    if (this.dispatched.has(pipeline)) return false;
    this.dispatched.add(pipeline);
    return true;
  }

  /** Awaits `mapped()` (the read-backs' mapAsync of the submit just made) after sleeping
   * through most of the expected GPU time of a submit of this shape, once every earlier
   * paced wait has resolved; learns from how long it took. A `compiling` step is probed
   * until done instead, and teaches nothing. */
  wait(shape: string, mapped: () => Promise<unknown>, compiling: CompilingStep | null = null): Promise<void> {
    const submitted = this.now();
    const mine = this.tail.then(() => compiling ? this.probed(submitted, mapped, compiling) : this.paced(shape, submitted, mapped));
    this.tail = mine.then(ignore, ignore);
    return mine;
  }

  /** A compiling step: sleep, probe, until its work is done; then map. */
  private async probed(submitted: number, mapped: () => Promise<unknown>, { probe }: CompilingStep): Promise<void> {
    const start = Math.max(submitted, this.lastDone);
    if (probe) {
      for (;;) {
        const t0 = this.now();
        await this.sleep(Math.max(PROBE_MIN_MS, PROBE_SHARE * (t0 - start)));
        this.sleeps++;
        this.sleptMs += this.now() - t0;
        this.probes++;
        if (await probe()) break;
      }
    }
    await mapped();
    this.lastDone = this.now();
  }

  private async paced(shape: string, submitted: number, mapped: () => Promise<unknown>): Promise<void> {
    const start = Math.max(submitted, this.lastDone); // the queue runs submits in order
    const times = this.times.get(shape) ?? NO_TIMES;
    const planned = sleepOf(times);
    const sleep = planned - (this.now() - start);
    if (sleep > 0) {
      const t0 = this.now();
      await this.sleep(sleep);
      this.sleeps++;
      this.sleptMs += this.now() - t0;
    }
    const t1 = this.now();
    await mapped();
    const t2 = this.now();
    this.lastDone = t2;
    if (this.times.size >= MAX_SHAPES && !this.times.has(shape)) this.times.clear();
    this.times.set(shape, learn(times, { slept: planned, asleep: t1 - start, waited: t2 - t1 }));
  }
}
