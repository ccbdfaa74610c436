// The parsing half of regex.ts: ECMAScript pattern syntax → a syntax tree (Node) over
// code point ranges, and the range helpers it needs. regex.ts builds the automata from it.

export class RegexError extends Error {}

/** Sorted, disjoint, inclusive code point ranges. */
export type Ranges = readonly (readonly [number, number])[];

export const MAX_CP = 0x10ffff;
export const ALL: Ranges = [[0, MAX_CP]];
const DIGIT: Ranges = [[0x30, 0x39]];
const WORD: Ranges = [[0x30, 0x39], [0x41, 0x5a], [0x5f, 0x5f], [0x61, 0x7a]];
const SPACE: Ranges = [[0x09, 0x0d], [0x20, 0x20], [0xa0, 0xa0], [0x1680, 0x1680], [0x2000, 0x200a], [0x2028, 0x2029], [0x202f, 0x202f],
  [0x205f, 0x205f], [0x3000, 0x3000], [0xfeff, 0xfeff]];
const DOT: Ranges = [[0, 0x09], [0x0b, 0x0c], [0x0e, 0x2027], [0x202a, MAX_CP]];

function normalize(rs: (readonly [number, number])[]): Ranges {
  const s = [...rs].sort((a, b) => a[0] - b[0]);
  const out: [number, number][] = [];
  for (const [lo, hi] of s) {
    const last = out[out.length - 1];
    if (last && lo <= last[1] + 1) last[1] = Math.max(last[1], hi);
    else out.push([lo, hi]);
  }
  return out;
}

function complement(rs: Ranges): Ranges {
  const out: [number, number][] = [];
  let at = 0;
  for (const [lo, hi] of rs) {
    if (lo > at) out.push([at, lo - 1]);
    at = hi + 1;
  }
  if (at <= MAX_CP) out.push([at, MAX_CP]);
  return out;
}

export const inRanges = (rs: Ranges, cp: number): boolean => {
  let lo = 0;
  let hi = rs.length - 1;
  while (lo <= hi) {
    const m = (lo + hi) >> 1;
    const r = rs[m]!;
    if (cp < r[0]) hi = m - 1;
    else if (cp > r[1]) lo = m + 1;
    else return true;
  }
  return false;
};

/** A Unicode property's code points, from the JavaScript engine's own tables (one scan of
 * the code space per property, cached). Null for a name the engine does not know. */
const propertyCache = new Map<string, Ranges | null>();
function propertyRanges(name: string): Ranges | null {
  if (propertyCache.has(name)) return propertyCache.get(name)!;
  let re: RegExp;
  try {
    re = new RegExp(`^\\p{${name}}$`, 'u');
  } catch {
    propertyCache.set(name, null);
    return null;
  }
  const out: [number, number][] = [];
  for (let cp = 0; cp <= MAX_CP; cp++) {
    if (cp === 0xd800) cp = 0xe000; // surrogates are not characters of a UTF-8 string
    if (!re.test(String.fromCodePoint(cp))) continue;
    const last = out[out.length - 1];
    if (last && last[1] === cp - 1) last[1] = cp;
    else out.push([cp, cp]);
  }
  propertyCache.set(name, out);
  return out;
}

export type Node =
  | { readonly t: 'chr'; readonly r: Ranges }
  | { readonly t: 'seq'; readonly xs: readonly Node[] }
  | { readonly t: 'alt'; readonly xs: readonly Node[] }
  | { readonly t: 'rep'; readonly x: Node; readonly min: number; readonly max: number }
  | { readonly t: 'bol' }
  | { readonly t: 'eol' };

/** Recursive-descent parser over the pattern's code points. */
export class Parser {
  private readonly cps: number[];
  private i = 0;
  constructor(private readonly src: string) {
    this.cps = [...src].map((c) => c.codePointAt(0)!);
  }

  parse(): Node {
    const n = this.alt();
    if (this.i < this.cps.length) this.fail(`unbalanced ")" at ${this.i}`);
    return n;
  }

  private fail(why: string): never {
    throw new RegexError(`pattern ${JSON.stringify(this.src)}: ${why}`);
  }

  private peek(k = 0): number | undefined {
    return this.cps[this.i + k];
  }

  private eat(c: string): boolean {
    if (this.peek() === c.codePointAt(0)) {
      this.i++;
      return true;
    }
    return false;
  }

  private alt(): Node {
    const xs = [this.seq()];
    while (this.eat('|')) xs.push(this.seq());
    return xs.length === 1 ? xs[0]! : { t: 'alt', xs };
  }

  private seq(): Node {
    const xs: Node[] = [];
    for (let c = this.peek(); c !== undefined && c !== 0x7c && c !== 0x29; c = this.peek()) xs.push(this.quantified());
    return xs.length === 1 ? xs[0]! : { t: 'seq', xs };
  }

  private quantified(): Node {
    const x = this.atom();
    for (;;) {
      const q = this.quantifier();
      if (!q) return x;
      if (x.t === 'bol' || x.t === 'eol') this.fail('a quantifier cannot follow an anchor');
      this.eat('?'); // lazy: same language
      return { t: 'rep', x, min: q[0], max: q[1] };
    }
  }

  private quantifier(): [number, number] | null {
    if (this.eat('*')) return [0, Infinity];
    if (this.eat('+')) return [1, Infinity];
    if (this.eat('?')) return [0, 1];
    if (this.peek() !== 0x7b) return null;
    const m = /^\{(\d+)(,(\d*))?\}/.exec(String.fromCodePoint(...this.cps.slice(this.i, this.i + 24)));
    if (!m) return null; // a literal "{" (Annex B)
    this.i += m[0].length;
    const min = Number(m[1]);
    const max = m[2] === undefined ? min : m[3] === '' ? Infinity : Number(m[3]);
    if (max < min) this.fail(`quantifier ${m[0]} is out of order`);
    return [min, max];
  }

  private atom(): Node {
    const c = this.cps[this.i++]!;
    switch (c) {
      case 0x5e: return { t: 'bol' };
      case 0x24: return { t: 'eol' };
      case 0x2e: return { t: 'chr', r: DOT };
      case 0x5b: return { t: 'chr', r: this.cls() };
      case 0x28: return this.group();
      case 0x5c: return this.escape();
      case 0x2a: case 0x2b: case 0x3f: return this.fail(`nothing to repeat at ${this.i - 1}`);
      default: return { t: 'chr', r: [[c, c]] };
    }
  }

  private group(): Node {
    if (this.eat('?')) {
      if (this.eat(':')) { /* non-capturing */ } else if (this.peek() === 0x3c && this.peek(1) !== 0x3d && this.peek(1) !== 0x21) {
        while (this.i < this.cps.length && this.cps[this.i] !== 0x3e) this.i++;
        this.i++;
      } else this.fail('lookahead and lookbehind assertions are not supported');
    }
    const x = this.alt();
    if (!this.eat(')')) this.fail('missing ")"');
    return x;
  }

  private escape(): Node {
    const c = this.cps[this.i];
    if (c === undefined) this.fail('a trailing backslash');
    const ch = String.fromCodePoint(c);
    if (ch === 'b' || ch === 'B') this.fail('word boundary assertions (\\b, \\B) are not supported');
    if (/[1-9]/.test(ch) || ch === 'k') this.fail('backreferences are not supported');
    const set = this.classEscape();
    if (set) return { t: 'chr', r: set };
    const cp = this.charEscape();
    return { t: 'chr', r: [[cp, cp]] };
  }

  /** \d \D \w \W \s \S \p{…} \P{…} at the cursor (consumed), or null. */
  private classEscape(): Ranges | null {
    const table: Record<string, Ranges> = { d: DIGIT, w: WORD, s: SPACE };
    const ch = String.fromCodePoint(this.cps[this.i]!);
    if (ch === 'p' || ch === 'P') {
      const m = /^\{([A-Za-z_=]+)\}/.exec(String.fromCodePoint(...this.cps.slice(this.i + 1, this.i + 64)));
      if (!m) this.fail('a bad \\p{…} escape');
      this.i += 1 + m[0].length;
      const r = propertyRanges(m[1]!);
      if (!r) this.fail(`unknown Unicode property \\p{${m[1]}}`);
      return ch === 'p' ? r : complement(r);
    }
    const base = table[ch.toLowerCase()];
    if (!base) return null;
    this.i++;
    return ch === ch.toLowerCase() ? base : complement(base);
  }

  /** A single-character escape after the backslash (consumed). */
  private charEscape(): number {
    const c = String.fromCodePoint(this.cps[this.i++]!);
    const simple: Record<string, number> = { n: 10, r: 13, t: 9, f: 12, v: 11, 0: 0 };
    if (c in simple && !(c === '0' && this.peek() !== undefined && this.peek()! >= 0x30 && this.peek()! <= 0x39)) return simple[c]!;
    if (c === 'c') {
      const l = this.cps[this.i++];
      if (l === undefined || !/[A-Za-z]/.test(String.fromCodePoint(l))) this.fail('\\c must be followed by a letter');
      return l % 32;
    }
    if (c === 'x') return this.hex(2);
    if (c === 'u') {
      if (this.eat('{')) {
        let v = 0;
        let n = 0;
        while (this.peek() !== undefined && this.peek() !== 0x7d) { v = v * 16 + this.hexDigit(); n++; }
        if (!this.eat('}') || n === 0 || v > MAX_CP) this.fail('a bad \\u{…} escape');
        return v;
      }
      const hi = this.hex(4);
      if (hi >= 0xd800 && hi <= 0xdbff && this.peek() === 0x5c && this.peek(1) === 0x75) {
        const save = this.i;
        this.i += 2;
        const lo = this.hex(4);
        if (lo >= 0xdc00 && lo <= 0xdfff) return 0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00);
        this.i = save;
      }
      return hi;
    }
    return c.codePointAt(0)!; // identity escape
  }

  private hexDigit(): number {
    const c = this.cps[this.i++];
    const v = c === undefined ? NaN : parseInt(String.fromCodePoint(c), 16);
    if (Number.isNaN(v)) this.fail('a bad hex escape');
    return v;
  }

  private hex(n: number): number {
    let v = 0;
    for (let k = 0; k < n; k++) v = v * 16 + this.hexDigit();
    return v;
  }

  /** A class body after "[" (consumes the closing "]"). */
  private cls(): Ranges {
    const neg = this.eat('^');
    const parts: (readonly [number, number])[] = [];
    while (!this.eat(']')) {
      if (this.i >= this.cps.length) this.fail('missing "]"');
      const a = this.classAtom();
      if (typeof a !== 'number') {
        parts.push(...a);
        continue;
      }
      if (this.peek() === 0x2d && this.peek(1) !== undefined && this.peek(1) !== 0x5d) {
        this.i++;
        const b = this.classAtom();
        if (typeof b !== 'number') this.fail('a class escape cannot end a range');
        if (b < a) this.fail('a character range is out of order');
        parts.push([a, b]);
      } else parts.push([a, a]);
    }
    const r = normalize(parts);
    return neg ? complement(r) : r;
  }

  private classAtom(): number | Ranges {
    const c = this.cps[this.i++]!;
    if (c !== 0x5c) return c;
    if (this.peek() === 0x62) { this.i++; return 8; } // [\b] = backspace
    if (this.peek() === 0x2d) { this.i++; return 0x2d; }
    const ch = String.fromCodePoint(this.peek() ?? 0);
    return this.classEscape() ?? this.charEscape();
  }
}
