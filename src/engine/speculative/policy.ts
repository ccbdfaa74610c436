// Adaptive number of draft tokens. Speculation pays when the verify of k+1 tokens costs
// little more than a decode step and drafts are accepted; at large batch sizes or low
// acceptance it is a net loss. The policy measures, per batch-size bucket, the throughput
// (tokens emitted per ms of step time) achieved with each k and picks the best, probing a
// neighbouring k now and then. It never changes outputs (speculation is lossless, greedy
// and seeded sampling alike). Its choices are a pure function of the observations it is
// given (no randomness, no clock of its own): the engine feeds it wall-clock step times,
// so which k a run uses varies with machine load, while the tokens it emits do not.

const BUCKETS = [1, 2, 4, 8, 16, 32, 64, Infinity];
const ALPHA = 0.2; // EMA weight of a new measurement
const PROBE_EVERY = 24; // steps between probes of a neighbouring k

function bucketOf(batch: number): number {
  return BUCKETS.findIndex((b) => batch <= b);
}

export class AdaptiveK {
  /** rate[bucket][k] = EMA of tokens per ms, NaN until measured. */
  private readonly rate: Float64Array[];
  private readonly steps: Int32Array;
  private readonly choice: Int32Array;

  constructor(readonly kMax: number, readonly adaptive: boolean) {
    this.rate = BUCKETS.map(() => new Float64Array(kMax + 1).fill(NaN));
    this.steps = new Int32Array(BUCKETS.length);
    this.choice = new Int32Array(BUCKETS.length).fill(kMax);
  }

  /** k to draft for a step whose decode batch has `batch` requests. Exploration climbs
   * from k = 1 (the head's strongest position) and 0, and tries k+1 only once k beat
   * k−1, so expensive large k are measured only when they can pay; then periodic probes
   * of the best k's neighbours follow changes in load. */
  choose(batch: number): number {
    if (!this.adaptive || this.kMax === 0) return this.kMax;
    const b = bucketOf(batch);
    const rates = this.rate[b]!;
    const n = ++this.steps[b]!;
    if (Number.isNaN(rates[1]!)) return (this.choice[b] = 1);
    if (Number.isNaN(rates[0]!)) return (this.choice[b] = 0);
    let best = 0;
    for (let k = 1; k <= this.kMax; k++) if (rates[k]! > rates[best]!) best = k;
    const next = best + 1;
    if (next <= this.kMax && Number.isNaN(rates[next]!)) return (this.choice[b] = next);
    if (n % PROBE_EVERY === 0) return (this.choice[b] = Math.min(this.kMax, best + 1));
    if (n % PROBE_EVERY === PROBE_EVERY / 2) return (this.choice[b] = Math.max(0, best - 1));
    return (this.choice[b] = best);
  }

  /** A decode/verify step with `batch` rows drafted with `k` produced `tokens` in `ms`. */
  observe(batch: number, k: number, tokens: number, ms: number): void {
    if (!this.adaptive || ms <= 0 || k < 0 || k > this.kMax) return;
    const rates = this.rate[bucketOf(batch)]!;
    const r = tokens / ms;
    rates[k] = Number.isNaN(rates[k]!) ? r : (1 - ALPHA) * rates[k]! + ALPHA * r;
  }
}
