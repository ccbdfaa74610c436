// Prefix cache for hybrid models (docs/ARCHITECTURE.md "Prefix cache"): a radix tree over token ids whose
// nodes own KV pages (ref-counted, shared with requests) and optional recurrent-state
// snapshots. The Gated DeltaNet state cannot be rebuilt from KV, so a match is usable
// only up to the deepest snapshot.
//
// Layout: edges are whole pages (their token count is a multiple of the page size) and
// each node owns one page id per page of its edge. A snapshot at a page-aligned position
// sits on the node ending there; a snapshot at an unaligned position p is a *tail*: the
// (< pageSize) tokens after the aligned node, a reference to the partial KV page and
// the state (the tail shares the request's page holding those rows: rows at and after the
// tail's end are never read through it, and rows before it are never rewritten, so the
// MTP head's KV rows written there after the insert are seen by later hits). A snapshot
// also keeps the target's post-norm hidden at p−1 (the MTP head's
// input for position p−1, whose MTP KV depends on the token after the prefix).
// Namespaces: prompt positions are computed in the chunked Gated DeltaNet form, generated
// ones by the recurrence, which rounds differently — and not only the state: the KV rows
// of later layers too. Snapshots (with the KV pages under them) computed wholly in the
// chunked form live in the main tree (namespace 0) and serve any request whose prompt
// reaches them; one made after a prompt of length P (decode, verify) lives in the tree of
// namespace P and serves only a request with the same split (a recompute after preemption).
// A tree never mixes KV of different splits.
// Invariants: every page/slot is owned exactly once by the tree (node pages, tail pages,
// snapshot slots) on top of request references; node locks = requests using the path.
import { assert } from '../util/errors.js';
import type { KvPool } from './kv-pool.js';
import type { StatePool } from './state-pool.js';
import type { PoolTensor } from './pool-storage.js';

export interface Snapshot {
  readonly slot: number;
  readonly hidden: Float32Array; // [H] target hidden at position p−1
  /** Positions [0, chunkedTo) were computed in the chunked Gated DeltaNet form, the rest
   * (up to the snapshot's position) by the recurrence. The two round differently, so a
   * snapshot is only bit-exact for a request that computes the same split. */
  readonly chunkedTo: number;
}


interface Tail {
  readonly tokens: readonly number[]; // 1..pageSize−1 tokens after the node
  readonly page: number; // the partial page (shared with the request that made it): rows [0, tokens.length) are this prefix
  readonly snap: Snapshot;
  lastUse: number;
  lock: number;
}

interface Node {
  readonly parent: Node | null;
  tokens: number[]; // edge label (multiple of the page size)
  pages: number[]; // one per page of the edge
  depth: number; // position at the end of the edge
  readonly children: Map<string, Node>; // keyed by the first page of the child's edge
  snap: Snapshot | null;
  readonly tails: Tail[];
  lastUse: number;
  lock: number;
}

/** A usable prefix: positions [0, length) with their KV and the state at `length`. */
export interface PrefixMatch {
  readonly length: number;
  /** Shared pages covering [0, floor(length / pageSize) · pageSize), in order. */
  readonly pages: readonly number[];
  /** Page holding rows of the partial last page (tail match; shared, copy before
   * writing), 0 when aligned. */
  readonly tailPage: number;
  readonly snap: Snapshot;
  /** Opaque lock handle; pass to unlock() when the request finishes. */
  readonly handle: object;
}

export interface RadixStats {
  readonly lookups: number;
  readonly hits: number;
  readonly hitTokens: number;
  readonly evictions: number;
  readonly nodes: number;
  readonly snapshots: number;
}

const newRoot = (): Node => ({ parent: null, tokens: [], pages: [], depth: 0, children: new Map(), snap: null, tails: [], lastUse: 0, lock: 0 });

/** The namespace of a snapshot at position p: 0 when computed wholly chunked. */
const namespaceOf = (snap: Snapshot, p: number): number => (snap.chunkedTo >= p ? 0 : snap.chunkedTo);

export class RadixCache {
  /** Tree roots by namespace (see the file head); 0 always exists. */
  private readonly roots = new Map<number, Node>([[0, newRoot()]]);
  private clock = 0;
  private lookups = 0;
  private hits = 0;
  private hitTokens = 0;
  private evictions = 0;
  private readonly ps: number;

  constructor(private readonly kv: KvPool<PoolTensor>, private readonly state: StatePool<PoolTensor>) {
    this.ps = kv.pageSize;
  }

  private key(tokens: readonly number[], at: number): string {
    return tokens.slice(at, at + this.ps).join(',');
  }

  /** Deepest snapshot at a position ≤ maxLen that prefixes `tokens` and computes like a
   * request whose prompt is `tokens[0, promptLength)`: chunked snapshots up to the prompt's
   * end, and past it those made after a prompt of the same length. */
  match(tokens: readonly number[], maxLen: number, promptLength = tokens.length): PrefixMatch | null {
    this.lookups++;
    const now = ++this.clock;
    let best = this.deepest(this.roots.get(0)!, tokens, Math.min(maxLen, promptLength), now);
    const own = this.roots.get(promptLength);
    if (own && promptLength > 0) {
      const past = this.deepest(own, tokens, maxLen, now);
      if (past && past.length > promptLength && (!best || past.length > best.length)) best = past;
    }
    if (!best) return null;
    this.hits++;
    this.hitTokens += best.length;
    const pages: number[] = [];
    for (let n: Node | null = best.node; n; n = n.parent) pages.unshift(...n.pages);
    const handle = { node: best.node, tail: best.tail };
    this.setLock(handle, +1);
    if (best.tail) best.tail.lastUse = now;
    return { length: best.length, pages, tailPage: best.tail?.page ?? 0, snap: best.tail?.snap ?? best.node.snap!, handle };
  }

  /** Deepest snapshot ≤ maxLen along `tokens` in the tree under `root`. */
  private deepest(root: Node, tokens: readonly number[], maxLen: number, now: number): { node: Node; tail: Tail | null; length: number } | null {
    let node = root;
    let best: { node: Node; tail: Tail | null; length: number } | null = null;
    for (;;) {
      node.lastUse = now;
      if (node.snap && node.depth > 0 && node.depth <= maxLen) best = { node, tail: null, length: node.depth };
      for (const t of node.tails) {
        const end = node.depth + t.tokens.length;
        if (end <= maxLen && (!best || end > best.length) && t.tokens.every((x, i) => tokens[node.depth + i] === x)) {
          best = { node, tail: t, length: end };
        }
      }
      const child = node.children.get(this.key(tokens, node.depth));
      if (!child || child.depth > tokens.length || !child.tokens.every((x, i) => tokens[node.depth + i] === x)) break;
      node = child;
    }
    return best;
  }

  unlock(handle: object): void {
    this.setLock(handle as { node: Node; tail: Tail | null }, -1);
  }

  private setLock(h: { node: Node; tail: Tail | null }, delta: number): void {
    if (h.tail) h.tail.lock += delta;
    for (let n: Node | null = h.node; n; n = n.parent) {
      n.lock += delta;
      assert(n.lock >= 0, 'radix lock count below zero');
    }
  }

  /** Record a snapshot of a request at position p = prefix.length: `pages` is the
   * request's page table (covering [0, p)), `snap.slot` a slot whose ownership passes to
   * the tree (freed here when an equal snapshot exists). Returns whether it was kept. */
  insert(prefix: readonly number[], pages: readonly number[], snap: Snapshot): boolean {
    const p = prefix.length;
    const aligned = Math.floor(p / this.ps) * this.ps;
    const tailTokens = prefix.slice(aligned, p);
    const ns = namespaceOf(snap, p);
    if (!this.roots.has(ns)) this.roots.set(ns, newRoot());
    const node = this.walkCreate(this.roots.get(ns)!, prefix, aligned, pages);
    const now = ++this.clock;
    node.lastUse = now;
    if (p === aligned) {
      if (node.snap || node.parent === null) {
        this.state.free(snap.slot);
        return false;
      }
      node.snap = snap;
      return true;
    }
    const same = node.tails.find((t) => t.tokens.length === tailTokens.length && t.tokens.every((x, i) => x === tailTokens[i]));
    if (same) {
      same.lastUse = now;
      this.state.free(snap.slot);
      return false;
    }
    const page = pages[aligned / this.ps]!;
    this.kv.retain([page]);
    node.tails.push({ tokens: tailTokens, page, snap, lastUse: now, lock: 0 });
    return true;
  }

  /** Node ending at `end` (a page multiple) along `prefix`, creating or splitting nodes;
   * new nodes retain the request's pages. */
  private walkCreate(root: Node, prefix: readonly number[], end: number, pages: readonly number[]): Node {
    let node = root;
    while (node.depth < end) {
      const k = this.key(prefix, node.depth);
      let child = node.children.get(k);
      if (!child) {
        const edgePages = pages.slice(node.depth / this.ps, end / this.ps);
        this.kv.retain(edgePages);
        child = {
          parent: node, tokens: prefix.slice(node.depth, end), pages: edgePages, depth: end, children: new Map(),
          snap: null, tails: [], lastUse: this.clock, lock: 0,
        };
        node.children.set(k, child);
        return child;
      }
      // matching whole pages of the child's edge
      let m = 0;
      const maxPages = Math.min(child.pages.length, (end - node.depth) / this.ps);
      while (m < maxPages && this.samePage(child.tokens, m * this.ps, prefix, node.depth + m * this.ps)) m++;
      if (m < child.pages.length) child = this.split(child, m);
      node = child;
    }
    return node;
  }

  private samePage(a: readonly number[], ai: number, b: readonly number[], bi: number): boolean {
    for (let i = 0; i < this.ps; i++) if (a[ai + i] !== b[bi + i]) return false;
    return true;
  }

  /** Split `child` after its first m pages (m ≥ 1); returns the new upper node. */
  private split(child: Node, m: number): Node {
    const parent = child.parent!;
    const cut = m * this.ps;
    const upper: Node = {
      parent, tokens: child.tokens.slice(0, cut), pages: child.pages.slice(0, m), depth: child.depth - child.tokens.length + cut,
      children: new Map(), snap: null, tails: [], lastUse: child.lastUse, lock: child.lock,
    };
    parent.children.set(this.key(upper.tokens, 0), upper);
    child.tokens = child.tokens.slice(cut);
    child.pages = child.pages.slice(m);
    (child as { parent: Node }).parent = upper;
    upper.children.set(this.key(child.tokens, 0), child);
    return upper;
  }

  /** Evict LRU unlocked leaves and tails until `need` pages are free (or nothing is
   * left to evict). Returns whether enough pages are free. */
  evictPages(need: number): boolean {
    while (this.kv.freePages < need) if (!this.evictOne(false)) return false;
    return true;
  }

  /** Drop LRU unlocked snapshots until `need` state slots are free. */
  evictSlots(need: number): boolean {
    while (this.state.freeSlots < need) if (!this.evictOne(true)) return false;
    return true;
  }

  /** Evict the least recently used unlocked item: a tail (page + slot), or a leaf node
   * (pages + snapshot); with `snapshotsOnly`, a node's snapshot may go while its KV stays
   * (tombstone). */
  private evictOne(snapshotsOnly: boolean): boolean {
    let victim: { node: Node; tail: Tail | null } | null = null;
    let age = Infinity;
    const visit = (n: Node): void => {
      for (const t of n.tails) if (t.lock === 0 && t.lastUse < age) [victim, age] = [{ node: n, tail: t }, t.lastUse];
      const leaf = n.children.size === 0 && n.tails.length === 0 && n.parent !== null;
      if (n.lock === 0 && n.lastUse < age && (leaf || (snapshotsOnly && n.snap))) [victim, age] = [{ node: n, tail: null }, n.lastUse];
      for (const c of n.children.values()) visit(c);
    };
    for (const r of this.roots.values()) visit(r);
    if (!victim) return false;
    this.evictions++;
    const { node, tail } = victim as { node: Node; tail: Tail | null };
    if (tail) {
      node.tails.splice(node.tails.indexOf(tail), 1);
      this.kv.release([tail.page]);
      this.state.free(tail.snap.slot);
    } else {
      if (node.snap) this.state.free(node.snap.slot);
      node.snap = null;
    }
    this.pruneUseless(node);
    return true;
  }

  /** Remove tombstone leaves (no snapshot, children or tails) upward from `n`. */
  private pruneUseless(n: Node): void {
    let cur: Node | null = n;
    while (cur && cur.parent !== null && cur.lock === 0 && !cur.snap && cur.children.size === 0 && cur.tails.length === 0) {
      const parent: Node = cur.parent!;
      parent.children.delete(this.key(cur.tokens, 0));
      this.kv.release(cur.pages);
      cur = parent;
    }
  }

  /** Every snapshot with the tokens and pages of its path ([0, p): whole pages, then the
   * tail's page for an unaligned p), least recently used first (for persistence). */
  list(): { tokens: number[]; pages: number[]; snap: Snapshot }[] {
    const out: { tokens: number[]; pages: number[]; snap: Snapshot; lastUse: number }[] = [];
    const visit = (n: Node, tokens: number[], pages: number[]): void => {
      if (n.snap) out.push({ tokens, pages, snap: n.snap, lastUse: n.lastUse });
      for (const t of n.tails) out.push({ tokens: [...tokens, ...t.tokens], pages: [...pages, t.page], snap: t.snap, lastUse: t.lastUse });
      for (const c of n.children.values()) visit(c, [...tokens, ...c.tokens], [...pages, ...c.pages]);
    };
    for (const r of this.roots.values()) visit(r, [], []);
    return out.sort((a, b) => a.lastUse - b.lastUse).map(({ tokens, pages, snap }) => ({ tokens, pages, snap }));
  }

  /** Every page reference and slot the tree owns. */
  owners(): { pages: number[]; slots: number[] } {
    const pages: number[] = [];
    const slots: number[] = [];
    const visit = (n: Node): void => {
      pages.push(...n.pages);
      if (n.snap) slots.push(n.snap.slot);
      for (const t of n.tails) {
        pages.push(t.page);
        slots.push(t.snap.slot);
      }
      for (const c of n.children.values()) visit(c);
    };
    for (const r of this.roots.values()) visit(r);
    return { pages, slots };
  }

  /** Tree shape and lock counts: `locks` are the handles held by live requests. */
  checkIntegrity(locks: readonly object[]): void {
    const expected = new Map<object, number>();
    for (const h of locks) {
      const { node, tail } = h as { node: Node; tail: Tail | null };
      if (tail) expected.set(tail, (expected.get(tail) ?? 0) + 1);
      for (let n: Node | null = node; n; n = n.parent) expected.set(n, (expected.get(n) ?? 0) + 1);
    }
    const visit = (n: Node): void => {
      assert(n.lock === (expected.get(n) ?? 0), `radix node at depth ${n.depth}: lock ${n.lock}, ${expected.get(n) ?? 0} users`);
      assert(n.tokens.length === n.pages.length * this.ps, `radix node at depth ${n.depth}: edge is not whole pages`);
      for (const t of n.tails) assert(t.lock === (expected.get(t) ?? 0), 'radix tail lock count disagrees with users');
      for (const c of n.children.values()) {
        assert(c.parent === n && c.depth === n.depth + c.tokens.length, 'radix child depth/parent inconsistent');
        visit(c);
      }
    };
    for (const r of this.roots.values()) visit(r);
  }

  stats(): RadixStats {
    let nodes = 0;
    let snapshots = 0;
    const visit = (n: Node): void => {
      nodes++;
      snapshots += (n.snap ? 1 : 0) + n.tails.length;
      for (const c of n.children.values()) visit(c);
    };
    for (const r of this.roots.values()) visit(r);
    return { lookups: this.lookups, hits: this.hits, hitTokens: this.hitTokens, evictions: this.evictions, nodes: nodes - this.roots.size, snapshots };
  }
}
