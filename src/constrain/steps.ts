// Builds split into steps: a generator yields between slices of its work, so the same build
// runs to completion at once (a request needs it now) or a slice at a time between other
// event-loop work (the warm-up at start, so /health and running streams never wait for it).
export type Steps<T> = Generator<void, T, void>;

/** Run steps to the end at once. */
export function finish<T>(g: Steps<T>): T {
  for (;;) {
    const r = g.next();
    if (r.done) return r.value;
  }
}

/** A value built by steps, once: `get` finishes the build at once, `advance` does one step. */
export class Lazy<T> {
  private gen: Steps<T> | null;
  private value: T | undefined;

  constructor(make: () => Steps<T>) {
    this.gen = make();
  }

  get(): T {
    while (!this.advance());
    return this.value!;
  }

  /** One step; true once the value is built. */
  advance(): boolean {
    if (this.gen === null) return true;
    const r = this.gen.next();
    if (!r.done) return false;
    this.value = r.value;
    this.gen = null;
    return true;
  }
}

/** Advance `lazy` in slices of about `sliceMs` between other event-loop work; resolves once it
 * is built (or at once when `stopped()` turns true: the build then finishes on demand). */
export function advanceInBackground(lazy: Lazy<unknown>, sliceMs: number, stopped: () => boolean): Promise<void> {
  return new Promise((resolve) => {
    const slice = (): void => {
      if (stopped()) return resolve();
      const t0 = performance.now();
      while (performance.now() - t0 < sliceMs) if (lazy.advance()) return resolve();
      setImmediate(slice).unref();
    };
    setImmediate(slice).unref();
  });
}

/** Work units (comparisons, tokens) between two yields. */
export const STEP_UNITS = 4096;

/** Sort `xs` in place (stable merge sort, bottom-up), yielding every STEP_UNITS elements moved.
 * Input already in order costs one pass. */
export function* sortSteps<T>(xs: T[], cmp: (a: T, b: T) => number): Steps<T[]> {
  const n = xs.length;
  let sorted = true;
  for (let i = 1; i < n && sorted; i++) {
    sorted = cmp(xs[i - 1]!, xs[i]!) <= 0;
    if (i % STEP_UNITS === 0) yield;
  }
  if (sorted) return xs;
  // copies, not new Array(n): a large preallocated array has slow dictionary elements
  let src = xs.slice();
  let dst = xs.slice();
  let work = 0;
  for (let width = 1; width < n; width *= 2) {
    for (let lo = 0; lo < n; lo += 2 * width) {
      const mid = Math.min(lo + width, n);
      const hi = Math.min(lo + 2 * width, n);
      let i = lo;
      let j = mid;
      for (let k = lo; k < hi; k++) {
        dst[k] = i < mid && (j >= hi || cmp(src[i]!, src[j]!) <= 0) ? src[i++]! : src[j++]!;
        if (++work % STEP_UNITS === 0) yield;
      }
    }
    [src, dst] = [dst, src];
  }
  for (let i = 0; i < n; i++) xs[i] = src[i]!;
  return xs;
}
