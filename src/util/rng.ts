// A small, fast, seedable pseudo-random generator: xoshiro128** (Blackman & Vigna) with
// its 128-bit state filled from the seed by splitmix64.
//
// Invariants:
// - The sequence of nextU32() values depends only on the seed (reduced to its low 64 bits,
//   two's complement for negative seeds): integer arithmetic only, so it is identical on
//   every platform and Node version.
// - next() is built from two nextU32() draws with exact arithmetic, so it is as portable.
// - normal() uses Math.log and Math.sqrt (Marsaglia's polar method). sqrt is correctly
//   rounded by IEEE 754; V8's Math.log is a software port of fdlibm, so the values are the
//   same on every platform V8 runs on.
// - The state is never all zero (xoshiro's one absorbing state).

const U64 = (1n << 64n) - 1n;
const TWO_POW_26 = 67108864;
const TWO_POW_53 = 9007199254740992;

/** One splitmix64 step: returns [new state, output], both as u64 bigints. */
function splitmix64(state: bigint): [bigint, bigint] {
  const s = (state + 0x9e3779b97f4a7c15n) & U64;
  let z = s;
  z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & U64;
  z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & U64;
  return [s, z ^ (z >> 31n)];
}

export class Rng {
  private s0: number;
  private s1: number;
  private s2: number;
  private s3: number;
  /** Second value of the last polar-method pair, or NaN when none is pending. */
  private spare = NaN;

  /** `seed`: any integer (number or bigint); only its low 64 bits are used. Throws a
   * RangeError for non-integer numbers. Equal seeds give equal sequences. */
  constructor(seed: number | bigint) {
    if (typeof seed === 'number' && !Number.isInteger(seed)) throw new RangeError(`Rng seed must be an integer (got ${seed})`);
    let st = BigInt.asUintN(64, BigInt(seed));
    let a: bigint;
    let b: bigint;
    [st, a] = splitmix64(st);
    [st, b] = splitmix64(st);
    this.s0 = Number(a & 0xffffffffn) | 0;
    this.s1 = Number(a >> 32n) | 0;
    this.s2 = Number(b & 0xffffffffn) | 0;
    this.s3 = Number(b >> 32n) | 0;
    if ((this.s0 | this.s1 | this.s2 | this.s3) === 0) this.s0 = 1;
  }

  /** A generator in this one's state (its sequence from here is this one's, which it leaves
   * as it is): draws can be looked ahead at, then this one advanced by the number used. */
  fork(): Rng {
    const r = new Rng(0);
    [r.s0, r.s1, r.s2, r.s3, r.spare] = [this.s0, this.s1, this.s2, this.s3, this.spare];
    return r;
  }

  /** Uniform integer in [0, 2^32). */
  nextU32(): number {
    const s1 = this.s1;
    const x = Math.imul(s1, 5);
    const result = Math.imul((x << 7) | (x >>> 25), 9) >>> 0;
    const t = s1 << 9;
    this.s2 ^= this.s0;
    this.s3 ^= s1;
    this.s1 ^= this.s2;
    this.s0 ^= this.s3;
    this.s2 ^= t;
    this.s3 = (this.s3 << 11) | (this.s3 >>> 21);
    return result;
  }

  /** Uniform double in [0, 1) with 53 random bits (uses two nextU32() draws). */
  next(): number {
    const hi = this.nextU32() >>> 5; // 27 bits
    const lo = this.nextU32() >>> 6; // 26 bits
    return (hi * TWO_POW_26 + lo) / TWO_POW_53;
  }

  /** Standard normal N(0, 1) (Marsaglia's polar method; values come in pairs, the second
   * of a pair is returned by the following call). */
  normal(): number {
    if (!Number.isNaN(this.spare)) {
      const v = this.spare;
      this.spare = NaN;
      return v;
    }
    for (;;) {
      const u = 2 * this.next() - 1;
      const v = 2 * this.next() - 1;
      const s = u * u + v * v;
      if (s > 0 && s < 1) {
        const f = Math.sqrt((-2 * Math.log(s)) / s);
        this.spare = v * f;
        return u * f;
      }
    }
  }
}
