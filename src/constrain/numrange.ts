// Numeric ranges (minimum / maximum / exclusiveMinimum / exclusiveMaximum) and multipleOf
// (integer, or a decimal such as 0.01 taken exactly: 0.07 is a multiple of 0.01), enforced on a number's text as it is generated: after each byte, some
// completion of the prefix must still land in the range (exact decimal arithmetic over the
// values the remaining characters can spell), and the number may end only inside it.
// Ranged numbers are written without an exponent. Bounds are taken at their shortest decimal
// form (1.1 means 1.1, not the double nearest to it); the end check also compares the parsed
// double with the bound's double, as validators do.
import { MAX_DIGITS, type NumRange } from './nodes.js';

/** An exact decimal m · 10^−scale. */
interface Dec { readonly m: bigint; readonly scale: number }

export type { NumRange };

export const NO_RANGE: NumRange = { lo: null, loEx: false, hi: null, hiEx: false, mult: 1n };

/** The shortest decimal form of a double as an exact decimal. */
function decOf(x: number): Dec {
  const m = /^(-?)(\d+)(?:\.(\d+))?(?:e([+-]\d+))?$/.exec(String(x));
  if (!m) throw new Error(`not a finite number: ${x}`);
  const frac = m[3] ?? '';
  let scale = frac.length - Number(m[4] ?? 0);
  let mant = BigInt(m[2]! + frac);
  if (scale < 0) {
    mant *= 10n ** BigInt(-scale);
    scale = 0;
  }
  return { m: m[1] ? -mant : mant, scale };
}

/** m · 10^−scale rescaled to `to` ≥ scale. */
const at = (d: Dec, to: number): bigint => d.m * 10n ** BigInt(to - d.scale);

/** Smallest multiple of `step` that is ≥ x (bigints). */
function ceilTo(x: bigint, step: bigint): bigint {
  const r = ((x % step) + step) % step;
  return r === 0n ? x : x + step - r;
}

/** Is there a value v = k·step (k integer, in units of 10^−scale) with a ≤ v ≤ b inside the range? */
function gridMeets(a: bigint, b: bigint, scale: number, step: bigint, r: NumRange): boolean {
  let lo = a;
  let hi = b;
  if (r.lo !== null) {
    // v · 10^−scale ≥ lo  ⇔  v ≥ ceil(l / f), l and f at the finer of the two scales
    const d = decOf(r.lo);
    const sc = Math.max(scale, d.scale);
    const l = at(d, sc);
    const f = 10n ** BigInt(sc - scale);
    let need = l / f + (l > 0n && l % f !== 0n ? 1n : 0n);
    if (r.loEx && need * f === l) need += 1n;
    if (need > lo) lo = need;
  }
  if (r.hi !== null) {
    const d = decOf(r.hi);
    const sc = Math.max(scale, d.scale);
    const h = at(d, sc);
    const f = 10n ** BigInt(sc - scale);
    let need = h / f - (h < 0n && h % f !== 0n ? 1n : 0n);
    if (r.hiEx && need * f === h) need -= 1n;
    if (need < hi) hi = need;
  }
  return lo <= hi && ceilTo(lo, step) <= hi;
}

/** The values a prefix can still become, as grids of magnitudes [a, b] (in units of 10^−scale). */
function completions(body: string, integer: boolean, intDigits: number, room: number): { a: bigint; b: bigint; scale: number }[] {
  const out: { a: bigint; b: bigint; scale: number }[] = [];
  const dot = body.indexOf('.');
  const int = dot < 0 ? body : body.slice(0, dot);
  if (dot >= 0) { // fraction digits only
    const frac = body.slice(dot + 1);
    const scale = frac.length + room;
    if (scale === 0 || (frac.length === 0 && room === 0)) return out;
    const base = BigInt(int + frac) * 10n ** BigInt(room);
    out.push({ a: base, b: base + 10n ** BigInt(room) - 1n, scale });
    return out;
  }
  const span = (lo: bigint, hi: bigint, left: number): void => {
    // integers lo..hi, or with `left` characters for ".digits"
    const scale = !integer && left >= 2 ? left - 1 : 0;
    const f = 10n ** BigInt(scale);
    out.push({ a: lo * f, b: (hi + 1n) * f - 1n, scale });
  };
  if (int === '') {
    for (let len = 1; len <= Math.min(intDigits, room); len++) {
      span(len === 1 ? 0n : 10n ** BigInt(len - 1), 10n ** BigInt(len) - 1n, room - len);
    }
  } else if (int === '0') span(0n, 0n, room);
  else {
    const v = BigInt(int);
    for (let more = 0; more <= Math.min(intDigits - int.length, room); more++) {
      const f = 10n ** BigInt(more);
      span(v * f, (v + 1n) * f - 1n, room - more);
    }
  }
  return out;
}

/** Can the number text `txt` (a prefix of a plain decimal: -?digits(.digits)?) still be
 * completed to a value in the range, within the character budget? */
export function rangeFeasible(txt: string, r: NumRange, integer: boolean, intDigits: number): boolean {
  const neg = txt.startsWith('-');
  const body = neg ? txt.slice(1) : txt;
  const room = MAX_DIGITS - txt.length;
  for (const c of completions(body, integer, intDigits, room)) {
    const stepUnits = stepAt(r, c.scale);
    if (neg ? gridMeets(-c.b, -c.a, c.scale, stepUnits, r) : gridMeets(c.a, c.b, c.scale, stepUnits, r)) return true;
  }
  if (!neg && body === '' && room > 1) return rangeFeasible('-', r, integer, intDigits); // a sign may still come
  return false;
}

/** Does the complete number `txt` satisfy the range (exactly, and as a double)? */
export function rangeHolds(txt: string, r: NumRange): boolean {
  const x = Number(txt);
  if (r.lo !== null && (r.loEx ? !(x > r.lo) : !(x >= r.lo))) return false;
  if (r.hi !== null && (r.hiEx ? !(x < r.hi) : !(x <= r.hi))) return false;
  const d = decOf0(txt);
  if (r.lo !== null) {
    const l = decOf(r.lo);
    const sc = Math.max(d.scale, l.scale);
    const c = at(d, sc) - at(l, sc);
    if (r.loEx ? c <= 0n : c < 0n) return false;
  }
  if (r.hi !== null) {
    const h = decOf(r.hi);
    const sc = Math.max(d.scale, h.scale);
    const c = at(d, sc) - at(h, sc);
    if (r.hiEx ? c >= 0n : c > 0n) return false;
  }
  if (r.step) {
    const sc = Math.max(d.scale, r.step.scale);
    if (at(d, sc) % (r.step.m * 10n ** BigInt(sc - r.step.scale)) !== 0n) return false;
  }
  if (r.mult !== 1n) {
    if (d.scale > 0 && at(d, d.scale) % 10n ** BigInt(d.scale) !== 0n) return false;
    const int = d.m / 10n ** BigInt(d.scale);
    if (int % r.mult !== 0n) return false;
  }
  return true;
}

/** A plain decimal's text as an exact decimal. */
function decOf0(txt: string): Dec {
  const neg = txt.startsWith('-');
  const body = neg ? txt.slice(1) : txt;
  const [int, frac = ''] = body.split('.');
  const m = BigInt((int ?? '0') + frac);
  return { m: neg ? -m : m, scale: frac.length };
}

/** Intersection of two ranges (the tighter bound on each side; multipleOf by lcm). */
export function intersectRanges(a: NumRange, b: NumRange): NumRange {
  const pickLo = (): [number | null, boolean] => {
    if (a.lo === null) return [b.lo, b.loEx];
    if (b.lo === null) return [a.lo, a.loEx];
    if (a.lo !== b.lo) return a.lo > b.lo ? [a.lo, a.loEx] : [b.lo, b.loEx];
    return [a.lo, a.loEx || b.loEx];
  };
  const pickHi = (): [number | null, boolean] => {
    if (a.hi === null) return [b.hi, b.hiEx];
    if (b.hi === null) return [a.hi, a.hiEx];
    if (a.hi !== b.hi) return a.hi < b.hi ? [a.hi, a.hiEx] : [b.hi, b.hiEx];
    return [a.hi, a.hiEx || b.hiEx];
  };
  const [lo, loEx] = pickLo();
  const [hi, hiEx] = pickHi();
  return { lo, loEx, hi, hiEx, ...lcmSteps(a, b) };
}

export const isNoRange = (r: NumRange): boolean => r.lo === null && r.hi === null && r.mult === 1n && r.step === undefined;

const gcd = (x: bigint, y: bigint): bigint => (y === 0n ? x : gcd(y, x % y));

/** The multiple (in units of 10^−scale) that a value written with `scale` fraction digits
 * must be, for the range's multipleOf to hold. */
function stepAt(r: NumRange, scale: number): bigint {
  if (!r.step) return r.mult === 1n ? 1n : r.mult * 10n ** BigInt(scale);
  const { m, scale: s } = r.step;
  return scale >= s ? m * 10n ** BigInt(scale - s) : m / gcd(m, 10n ** BigInt(s - scale));
}

/** multipleOf `x` as an exact decimal step (its shortest decimal form), or null when it has
 * more than `maxScale` fraction digits. An integer gives scale 0. */
export function decimalStep(x: number, maxScale = 12): { m: bigint; scale: number } | null {
  const d = decOf(x);
  return d.scale > maxScale ? null : reduce(d);
}

function reduce(d: Dec): Dec {
  let { m, scale } = d;
  while (scale > 0 && m % 10n === 0n) [m, scale] = [m / 10n, scale - 1];
  return { m, scale };
}

/** The multipleOf both ranges require (the least common multiple of their steps). */
function lcmSteps(a: NumRange, b: NumRange): Pick<NumRange, 'mult' | 'step'> {
  const none = (r: NumRange): boolean => r.mult === 1n && !r.step;
  if (none(a)) return b.step ? { mult: 1n, step: b.step } : { mult: b.mult };
  if (none(b)) return a.step ? { mult: 1n, step: a.step } : { mult: a.mult };
  const x: Dec = a.step ?? { m: a.mult, scale: 0 };
  const y: Dec = b.step ?? { m: b.mult, scale: 0 };
  const sc = Math.max(x.scale, y.scale);
  const xm = at(x, sc);
  const ym = at(y, sc);
  const l = reduce({ m: (xm * ym) / gcd(xm, ym), scale: sc });
  // an integer lcm goes in `mult`, but 1 (two decimal steps meeting at the integers) stays a step: mult 1n means none
  return l.scale === 0 && l.m !== 1n ? { mult: l.m } : { mult: 1n, step: l };
}
