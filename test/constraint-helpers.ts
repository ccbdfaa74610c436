// Test helpers over the constraint interface (src/constrain/constraint.ts).
import type { Constraint, Matcher } from '../src/constrain/constraint.js';

/** A constraint given by whole-history functions (tests only: each mask reads the history). */
export function historyConstraint(allowed: (generated: readonly number[]) => Uint32Array | null,
  endError: (generated: readonly number[]) => string | null = () => null): Constraint {
  return { start: () => new HistoryMatcher(allowed, endError, []) };
}

class HistoryMatcher implements Matcher {
  constructor(private readonly allowed: (g: readonly number[]) => Uint32Array | null,
    private readonly why: (g: readonly number[]) => string | null, private readonly ids: number[]) {}
  get length(): number {
    return this.ids.length;
  }
  mask(): Uint32Array | null {
    return this.allowed(this.ids);
  }
  advance(id: number): void {
    this.ids.push(id);
  }
  fork(): HistoryMatcher {
    return new HistoryMatcher(this.allowed, this.why, [...this.ids]);
  }
  endError(): string | null {
    return this.why(this.ids);
  }
}

/** A fresh matcher of `c` advanced by `ids`. */
export function matcherAfter(c: Constraint, ids: readonly number[]): Matcher {
  const m = c.start();
  for (const id of ids) m.advance(id);
  return m;
}

/** `c`'s mask after `ids`. */
export const maskAfter = (c: Constraint, ids: readonly number[]): Uint32Array | null => matcherAfter(c, ids).mask();

/** `inner` with `only` as its mask from the `after`-th generated id on (endError kept). */
export function maskFrom(inner: Constraint, after: number, only: Uint32Array): Constraint {
  const wrap = (m: Matcher): Matcher => ({
    get length() {
      return m.length;
    },
    mask: () => (m.length >= after ? only : m.mask()),
    advance: (id) => m.advance(id),
    fork: () => wrap(m.fork()),
    endError: () => m.endError(),
  });
  return { start: () => wrap(inner.start()) };
}

/** Any id until `switchId` is taken, then `then` for good; it says so (Matcher.maskRun: a run
 * that `switchId` ends, then one with no end), as an open reasoning block does with `</think>`. */
export function switchesTo(switchId: number, then: Uint32Array): Constraint {
  const before = { mask: null, until: [switchId] };
  const after = { mask: then, until: [] };
  const matcher = (n: number, switched: boolean): Matcher => ({
    get length() { return n; },
    mask: () => (switched ? then : null),
    advance(id: number) { n++; switched ||= id === switchId; },
    fork: () => matcher(n, switched),
    endError: () => null,
    maskRun: () => (switched ? after : before),
  });
  return { start: () => matcher(0, false) };
}
