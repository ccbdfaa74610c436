// RFC 3492 Punycode (Bootstring with base 36), written from the RFC's algorithm: decoding the
// part of an A-label after "xn--" into code points, and encoding code points back. Decoding
// is case-insensitive in its digits; basic code points keep their case (the caller decides).
// Every arithmetic step is checked against MAX_INT (2^31 − 1) as §6.4 asks, and a decoded
// code point must lie in [0, 0x10FFFF] and not be a surrogate or a basic code point.

const BASE = 36;
const TMIN = 1;
const TMAX = 26;
const SKEW = 38;
const DAMP = 700;
const INITIAL_BIAS = 72;
const INITIAL_N = 0x80;
const MAX_INT = 0x7fffffff;

/** §6.1: the bias after a delta (`first`: the first delta, `points`: code points so far). */
function adapt(delta0: number, points: number, first: boolean): number {
  let delta = first ? Math.floor(delta0 / DAMP) : delta0 >> 1;
  delta += Math.floor(delta / points);
  let k = 0;
  while (delta > ((BASE - TMIN) * TMAX) >> 1) {
    delta = Math.floor(delta / (BASE - TMIN));
    k += BASE;
  }
  return k + Math.floor(((BASE - TMIN + 1) * delta) / (delta + SKEW));
}

/** The digit value of a character (a–z / A–Z = 0–25, 0–9 = 26–35), −1 for any other. */
export function digitValue(c: number): number {
  if (c >= 0x61 && c <= 0x7a) return c - 0x61;
  if (c >= 0x41 && c <= 0x5a) return c - 0x41;
  if (c >= 0x30 && c <= 0x39) return c - 0x30 + 26;
  return -1;
}

const DIGITS = 'abcdefghijklmnopqrstuvwxyz0123456789';
const digitChar = (d: number): string => DIGITS[d]!;

/** The threshold of digit position k under `bias`. */
export const threshold = (k: number, bias: number): number => (k <= bias ? TMIN : k >= bias + TMAX ? TMAX : k - bias);

/** Where a decode stopped: the code points so far and, when the text ends inside a delta
 * (`partial`, begun at text index `start`), the threshold its next digit is compared with (a
 * digit below it ends the delta), the digit weight `w`, and `i`, n as the delta stands: a final
 * digit v inserts code point n + ⌊(i + v·w) / (out.length + 1)⌋. */
export interface DecodeState {
  readonly out: readonly number[];
  readonly partial: boolean;
  readonly start: number;
  readonly nextThreshold: number;
  readonly i: number;
  readonly w: number;
  readonly n: number;
}

/** Decode `text` (the A-label without "xn--"): the basic code points are those before the
 * last '-', the rest are deltas. null: not Punycode (a non-basic code point before the
 * delimiter, a character that is no digit, an overflow, a code point out of range). The text
 * may end inside a delta only when `allowPartial`. */
export function decodeState(text: string, allowPartial: boolean): DecodeState | null {
  const d = text.lastIndexOf('-');
  const out: number[] = [];
  for (let j = 0; j < Math.max(d, 0); j++) {
    const c = text.charCodeAt(j);
    if (c >= 0x80) return null;
    out.push(c);
  }
  let n = INITIAL_N;
  let i = 0;
  let bias = INITIAL_BIAS;
  let at = d > 0 ? d + 1 : 0;
  while (at < text.length) {
    const oldi = i;
    const start = at;
    let w = 1;
    for (let k = BASE; ; k += BASE) {
      if (at >= text.length) return allowPartial ? { out, partial: true, start, nextThreshold: threshold(k, bias), i, w, n } : null;
      const digit = digitValue(text.charCodeAt(at++));
      if (digit < 0) return null;
      if (digit > Math.floor((MAX_INT - i) / w)) return null;
      i += digit * w;
      const t = threshold(k, bias);
      if (digit < t) break;
      if (w > Math.floor(MAX_INT / (BASE - t))) return null;
      w *= BASE - t;
    }
    bias = adapt(i - oldi, out.length + 1, oldi === 0);
    if (Math.floor(i / (out.length + 1)) > MAX_INT - n) return null;
    n += Math.floor(i / (out.length + 1));
    i %= out.length + 1;
    if (n > 0x10ffff || (n >= 0xd800 && n <= 0xdfff)) return null;
    out.splice(i, 0, n);
    i++;
  }
  return { out, partial: false, start: text.length, nextThreshold: 0, i, w: 1, n };
}

/** The code points `text` spells, or null (see decodeState). */
export function punycodeDecode(text: string): number[] | null {
  const s = decodeState(text, false);
  return s ? [...s.out] : null;
}

/** Encode code points as Punycode, lowercase (§6.3). null on overflow. */
export function punycodeEncode(input: readonly number[]): string | null {
  let out = '';
  for (let j = 0; j < input.length; j++) if (input[j]! < 0x80) out += String.fromCharCode(input[j]!);
  const b = out.length;
  let h = b;
  if (b > 0) out += '-';
  let n = INITIAL_N;
  let delta = 0;
  let bias = INITIAL_BIAS;
  while (h < input.length) {
    let m = 0x110000;
    for (let j = 0; j < input.length; j++) if (input[j]! >= n && input[j]! < m) m = input[j]!;
    if (m - n > Math.floor((MAX_INT - delta) / (h + 1))) return null;
    delta += (m - n) * (h + 1);
    n = m;
    for (let j = 0; j < input.length; j++) {
      const c = input[j]!;
      if (c < n && ++delta > MAX_INT) return null;
      if (c !== n) continue;
      let q = delta;
      for (let k = BASE; ; k += BASE) {
        const t = threshold(k, bias);
        if (q < t) break;
        out += DIGITS[t + ((q - t) % (BASE - t))]!;
        q = Math.floor((q - t) / (BASE - t));
      }
      out += DIGITS[q]!;
      bias = adapt(delta, h + 1, h === b);
      delta = 0;
      h++;
    }
    delta++;
    n++;
  }
  return out;
}

export { digitChar };
