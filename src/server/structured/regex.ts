// ECMAScript regular expressions (JSON Schema `pattern`, `patternProperties`, and the
// formats) → an NFA over Unicode code points → a DFA built lazily, state by state, as the
// matcher meets characters. A pattern matches anywhere in the string unless anchored (^ $),
// as JSON Schema says. Supported: alternation, groups (capturing, non-capturing, named),
// greedy and lazy quantifiers (* + ? {n} {n,} {n,m}), classes ([…], [^…], ranges, \d \w \s
// and their negations), `.`, escapes (\n \t \xHH \uHHHH \u{…} \cX \0, identity escapes).
// Unicode property escapes (\p{…}) take their code points from the engine's tables.
// Lookaround, backreferences and word boundaries cannot be expressed by an automaton (or not
// by this one): a RegexError naming them.
//
// DFA states are sets of *live* NFA states (from which the end can still be reached), so the
// empty set — state −1 — means no continuation can match: the matcher prunes it at once.

import { spendCompile } from './compile-budget.js';

export class RegexError extends Error {}

/** Sorted, disjoint, inclusive code point ranges. */
type Ranges = readonly (readonly [number, number])[];

const MAX_CP = 0x10ffff;
const ALL: Ranges = [[0, MAX_CP]];
const DIGIT: Ranges = [[0x30, 0x39]];
const WORD: Ranges = [[0x30, 0x39], [0x41, 0x5a], [0x5f, 0x5f], [0x61, 0x7a]];
const SPACE: Ranges = [[0x09, 0x0d], [0x20, 0x20], [0xa0, 0xa0], [0x1680, 0x1680], [0x2000, 0x200a], [0x2028, 0x2029], [0x202f, 0x202f],
  [0x205f, 0x205f], [0x3000, 0x3000], [0xfeff, 0xfeff]];
const DOT: Ranges = [[0, 0x09], [0x0b, 0x0c], [0x0e, 0x2027], [0x202a, MAX_CP]];
/** NFA size cap: counted repetition copies its operand. */
const MAX_NFA = 20_000;

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

const inRanges = (rs: Ranges, cp: number): boolean => {
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

type Node =
  | { readonly t: 'chr'; readonly r: Ranges }
  | { readonly t: 'seq'; readonly xs: readonly Node[] }
  | { readonly t: 'alt'; readonly xs: readonly Node[] }
  | { readonly t: 'rep'; readonly x: Node; readonly min: number; readonly max: number }
  | { readonly t: 'bol' }
  | { readonly t: 'eol' };

/** Recursive-descent parser over the pattern's code points. */
class Parser {
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

interface NState {
  readonly eps: number[];
  readonly bol: number[];
  readonly eol: number[];
  readonly edges: { readonly r: Ranges; readonly to: number }[];
}

/** A compiled pattern: step(state, codePoint) over lazily built DFA states (0 = start). */
let nextRegexId = 1;

export class Regex {
  /** Unique per compiled pattern (keys of caches over DFA states). */
  readonly id = nextRegexId++;
  private readonly nfa: NState[] = [];
  private final = 0;
  private live: boolean[] = [];
  private readonly sets: number[][] = [];
  private readonly index = new Map<string, number>();
  /** Code point classes: the NFA's range bounds cut the code space into intervals whose code
   * points every edge treats alike (class c = [cuts[c−1], cuts[c]−1]); transitions are kept
   * per class, so a step over a code point never met before is one table lookup. */
  private cuts = new Int32Array(0);
  private readonly asciiClass = new Uint16Array(128);
  /** trans[s][c]: the DFA state after class c from state s (−1 dead, −2 not built yet). */
  private readonly trans: Int32Array[] = [];
  private readonly accepting: boolean[] = [];
  private readonly universal: boolean[] = [];
  private readonly remaining: number[] = [];

  constructor(readonly source: string) {
    const ast = new Parser(source).parse();
    const start = this.state();
    this.add(start, ALL, start); // unanchored: anything may come before the match
    const body = this.state();
    this.nfa[start]!.eps.push(body);
    const end = this.build(ast, body);
    this.final = this.state();
    this.nfa[end]!.eps.push(this.final);
    this.add(this.final, ALL, this.final); // … and after it
    this.computeLive();
    this.computeClasses();
    this.intern(this.closure([start], true), true);
  }

  private computeClasses(): void {
    const bounds = new Set<number>();
    for (const q of this.nfa) for (const e of q.edges) for (const [lo, hi] of e.r) {
      if (lo > 0) bounds.add(lo);
      if (hi < MAX_CP) bounds.add(hi + 1);
    }
    this.cuts = Int32Array.from([...bounds].sort((a, b) => a - b));
    for (let cp = 0; cp < 128; cp++) this.asciiClass[cp] = this.searchClass(cp);
  }

  /** The number of cuts ≤ cp. */
  private searchClass(cp: number): number {
    const cuts = this.cuts;
    let lo = 0;
    let hi = cuts.length;
    while (lo < hi) {
      const m = (lo + hi) >> 1;
      if (cuts[m]! <= cp) lo = m + 1;
      else hi = m;
    }
    return lo;
  }

  private classOf(cp: number): number {
    return cp < 128 ? this.asciiClass[cp]! : this.searchClass(cp);
  }

  /** The DFA state after code point `cp` (−1: no continuation can match). */
  step(s: number, cp: number): number {
    if (s < 0) return -1;
    const c = this.classOf(cp);
    const t = this.trans[s]!;
    const to = t[c]!;
    return to !== -2 ? to : this.build1(s, c, t);
  }

  /** The transition of state s on class c, built from the NFA (any code point of the class
   * stands for all of them). */
  private build1(s: number, c: number, t: Int32Array): number {
    const rep = c === 0 ? 0 : this.cuts[c - 1]!;
    const next: number[] = [];
    for (const q of this.sets[s]!) for (const e of this.nfa[q]!.edges) if (inRanges(e.r, rep)) next.push(e.to);
    const set = this.closure(next, false);
    const to = set.length === 0 ? -1 : this.intern(set, false);
    t[c] = to;
    return to;
  }

  /** DFA states built so far (tests and benchmarks). */
  get dfaStates(): number {
    return this.sets.length;
  }

  /** Can some code point in [lo, hi] follow from state `s` (a character still being written)? */
  canStep(s: number, lo: number, hi: number): boolean {
    if (s < 0) return false;
    for (const q of this.sets[s]!) {
      for (const e of this.nfa[q]!.edges) {
        if (!this.live[e.to]) continue;
        for (const [a, b] of e.r) if (a <= hi && b >= lo) return true;
      }
    }
    return false;
  }

  /** The fewest characters still needed to match from state `s` (0 when it accepts). */
  minRemaining(s: number): number {
    if (s < 0) return Infinity;
    let d = this.remaining[s]!;
    if (d < 0) {
      d = this.shortestToEnd(this.sets[s]!);
      this.remaining[s] = d;
    }
    return d;
  }

  /** 0-1 breadth-first search: ε and end-of-input edges cost nothing, characters one. */
  private shortestToEnd(set: readonly number[]): number {
    const dist = new Map<number, number>();
    const deque: number[] = [];
    for (const q of set) {
      dist.set(q, 0);
      deque.push(q);
    }
    let head = 0;
    const layer: number[] = [];
    let level = 0;
    for (;;) {
      while (head < deque.length) {
        const q = deque[head++]!;
        if (q === this.final) return level;
        for (const t of [...this.nfa[q]!.eps, ...this.nfa[q]!.eol]) {
          if (!dist.has(t)) {
            dist.set(t, level);
            deque.push(t);
          }
        }
        for (const e of this.nfa[q]!.edges) if (this.live[e.to] && !dist.has(e.to)) layer.push(e.to);
      }
      if (layer.length === 0) return Infinity;
      level++;
      for (const t of layer.splice(0)) {
        if (!dist.has(t)) {
          dist.set(t, level);
          deque.push(t);
        }
      }
    }
  }

  /** Does the text so far match (the string may end here)? */
  accepts(s: number): boolean {
    return s >= 0 && this.accepting[s]!;
  }

  /** Does every continuation match (the constraint is satisfied for good)? */
  isUniversal(s: number): boolean {
    return s >= 0 && this.universal[s]!;
  }

  /** Whole-string test (for property names known at compile time). */
  test(text: string): boolean {
    let s = 0;
    for (const ch of text) s = this.step(s, ch.codePointAt(0)!);
    return this.accepts(s);
  }

  private state(): number {
    spendCompile();
    if (this.nfa.length >= MAX_NFA) throw new RegexError(`pattern ${JSON.stringify(this.source)} is too large (counted repetition)`);
    this.nfa.push({ eps: [], bol: [], eol: [], edges: [] });
    return this.nfa.length - 1;
  }

  private add(from: number, r: Ranges, to: number): void {
    if (r.length > 0) this.nfa[from]!.edges.push({ r, to });
  }

  /** Thompson construction: the NFA fragment for `n` from state `from`; returns its end. */
  private build(n: Node, from: number): number {
    switch (n.t) {
      case 'chr': {
        const to = this.state();
        this.add(from, n.r, to);
        return to;
      }
      case 'bol':
      case 'eol': {
        const to = this.state();
        this.nfa[from]![n.t].push(to);
        return to;
      }
      case 'seq':
        return n.xs.reduce((at, x) => this.build(x, at), from);
      case 'alt': {
        const end = this.state();
        for (const x of n.xs) {
          const s = this.state();
          this.nfa[from]!.eps.push(s);
          this.nfa[this.build(x, s)]!.eps.push(end);
        }
        return end;
      }
      case 'rep': {
        let at = from;
        for (let k = 0; k < n.min; k++) at = this.build(n.x, at);
        if (n.max === Infinity) {
          const loop = this.state();
          this.nfa[at]!.eps.push(loop);
          this.nfa[this.build(n.x, loop)]!.eps.push(loop);
          return loop;
        }
        const end = this.state();
        for (let k = n.min; k < n.max; k++) {
          this.nfa[at]!.eps.push(end);
          at = this.build(n.x, at);
        }
        this.nfa[at]!.eps.push(end);
        return end;
      }
    }
  }

  /** live[q]: the end is reachable from q (start-of-input edges excluded: they only apply
   * in the start state's closure, which has followed them already). */
  private computeLive(): void {
    // backwards from the end over ε, end-of-input and character edges
    const back: number[][] = this.nfa.map(() => []);
    this.nfa.forEach((q, i) => {
      for (const t of q.eps) back[t]!.push(i);
      for (const t of q.eol) back[t]!.push(i);
      for (const e of q.edges) back[e.to]!.push(i);
    });
    const live = new Array<boolean>(this.nfa.length).fill(false);
    const todo = [this.final];
    live[this.final] = true;
    while (todo.length > 0) {
      for (const p of back[todo.pop()!]!) {
        if (!live[p]) {
          live[p] = true;
          todo.push(p);
        }
      }
    }
    this.live = live;
  }

  /** Live states reachable by ε edges (and ^ at the start), sorted. */
  private closure(seed: readonly number[], atStart: boolean): number[] {
    const seen = new Set<number>();
    const todo = [...seed];
    while (todo.length > 0) {
      const q = todo.pop()!;
      if (seen.has(q)) continue;
      seen.add(q);
      todo.push(...this.nfa[q]!.eps);
      if (atStart) todo.push(...this.nfa[q]!.bol);
    }
    return [...seen].filter((q) => this.live[q]).sort((a, b) => a - b);
  }

  private acceptsSet(set: readonly number[], atStart: boolean): boolean {
    const seen = new Set<number>();
    const todo = [...set];
    while (todo.length > 0) {
      const q = todo.pop()!;
      if (q === this.final) return true;
      if (seen.has(q)) continue;
      seen.add(q);
      todo.push(...this.nfa[q]!.eps, ...this.nfa[q]!.eol);
      if (atStart) todo.push(...this.nfa[q]!.bol);
    }
    return false;
  }

  private intern(set: number[], atStart: boolean): number {
    const key = `${atStart ? 's' : ''}${set.join(',')}`;
    let id = this.index.get(key);
    if (id !== undefined) return id;
    id = this.sets.length;
    this.index.set(key, id);
    this.sets.push(set);
    this.trans.push(new Int32Array(this.cuts.length + 1).fill(-2));
    this.remaining.push(-1); // not computed yet (kept dense: filled in state order)
    this.accepting.push(this.acceptsSet(set, atStart));
    this.universal.push(set.includes(this.final));
    return id;
  }
}

const regexCache = new Map<string, Regex>();

/** The compiled pattern (cached by source: DFAs fill in as they are used, shared by requests). */
export function compileRegex(source: string): Regex {
  let r = regexCache.get(source);
  if (!r) {
    r = new Regex(source);
    if (regexCache.size >= 512) regexCache.delete(regexCache.keys().next().value!);
    regexCache.set(source, r);
  }
  return r;
}
