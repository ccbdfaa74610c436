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
import { ALL, inRanges, MAX_CP, type Node, Parser, type Ranges, RegexError } from './regex-parse.js';

export { RegexError };

/** NFA size cap: counted repetition copies its operand. */
const MAX_NFA = 20_000;

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

  /** An upper bound on minRemaining of any live state: a shortest path to the end visits
   * each NFA state at most once (state keys cap the room left above it, see state-key.ts). */
  get needBound(): number {
    return this.nfa.length;
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

  /** States of the NFA (the compile units its construction spent). */
  get nfaStates(): number {
    return this.nfa.length;
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
    r = new Regex(source); // spends a compile unit per NFA state as it builds
    if (regexCache.size >= 512) regexCache.delete(regexCache.keys().next().value!);
    regexCache.set(source, r);
  } else spendCompile(r.nfaStates); // a hit costs what a miss would: units stay deterministic
  return r;
}
