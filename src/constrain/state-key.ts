// State keys: a string naming what a matcher stack accepts from here on. The mask cache
// (mask.ts) reuses a mask for every state with the same key, and step() merges stacks with
// equal keys, so the invariant is strict: two stacks with the same key must accept exactly
// the same byte sequences of up to KEY_CAP bytes (a token is never longer). Each frame's
// part below names every field its feed function reads, or a value that decides the same
// comparisons (a count capped where no token can tell larger values apart). Exact keys (cap
// Infinity) name what a stack accepts whatever follows: step() merges stacks by them, so a merge
// never narrows the language. Keys are compared within one process only: interned texts get
// ids that are never reused.
import type { Frame, Stack, State } from './frames.js';
import { DONE } from './frames.js';
import { labelKey, maxLabel } from './labels.js';
import type { Regex } from './regex.js';

/** No token is longer than this many bytes (the token trie leaves out longer tokens): counts
 * of characters or items still allowed above it are equal for the mask. A mask cache may
 * pass its vocabulary's own longest token instead (`cap`): the same argument holds. */
export const KEY_CAP = 1024;

let lastTextId = 0;
const textIds = new Map<string, number>();
/** A short id for a text. The map is bounded, but an id is never handed out twice: a text
 * evicted and seen again gets a fresh id, so keys built before stay unambiguous. */
function textKey(t: string): number {
  let id = textIds.get(t);
  if (id === undefined) {
    if (textIds.size > 100_000) textIds.clear();
    textIds.set(t, (id = ++lastTextId));
  }
  return id;
}

/** Regexes by their compiled object's id (the DFA state numbers belong to that object). */
const regexKey = (res: readonly Regex[], rs: readonly number[]): string =>
  res.length === 0 ? '' : `r${res.map((r, i) => `${r.id}:${rs[i]}`).join(',')}`;

/** The room (characters still allowed) above which a string or free text frame behaves the
 * same for any token: the checks compare the room with the characters a token adds (at most
 * KEY_CAP) plus what the regexes still need (at most their NFA size) plus what a hostname
 * label still needs (at most the label check's maxLabel). */
export function roomCap(res: readonly Regex[], hostname: boolean, cap = KEY_CAP): number {
  let need = 0;
  for (const r of res) need = Math.max(need, r.needBound);
  return cap + 1 + need + (hostname ? maxLabel() : 0);
}

type Str = Extract<Frame, { t: 'str' }>;
type Until = Extract<Frame, { t: 'until' }>;
type Arr = Extract<Frame, { t: 'arr' }>;
type Key = Extract<Frame, { t: 'key' }>;

function strKey(f: Str, cap: number): string {
  // the code point bits in progress matter to the regexes, the label check and \u escapes
  // (surrogates); plain text reads only u
  const cp = f.ph >= 3 || f.res.length > 0 || f.lab !== undefined ? f.cp : 0;
  const room = Math.min(f.max - f.n, roomCap(f.res, f.lab !== undefined, cap));
  return `s${f.ph},${f.u},${cp},${Math.max(0, f.min - f.n)},${room}${regexKey(f.res, f.rs)}${labelKey(f.lab)}`;
}

function untilKey(f: Until, cap: number): string {
  // feedUntil reads cp and the label only with regexes present
  const cp = f.res.length > 0 ? f.cp : 0;
  const room = Math.min(f.max - f.n, roomCap(f.res, f.lab !== undefined, cap));
  return `u${textKey(f.end)},${f.m},${f.u},${cp},${Math.max(0, f.min - f.n)},${room}${regexKey(f.res, f.rs)}${labelKey(f.lab)}`;
}

/** Arrays: in the prefix the index itself; past it every index sees the same item schema,
 * and what differs is whether it is the first (`[` then `]` only when n = 0), how many items
 * minItems still asks for, and how many maxItems still allows (one token holds at most
 * KEY_CAP / 2 items). Unique arrays: also which literals are written already (`used`). */
function arrKey(f: Arr, cap: number): string {
  const a = f.s;
  const used = a.unique ? `,u${f.used.toString(36)}` : '';
  if (cap === Infinity) return `a${a.id},${f.ph},${f.n}${used}`;
  const at = f.n < a.prefix.length ? `p${f.n}` : `${f.n === 0 ? 'z' : 'm'}${Math.min(Math.max(0, a.min - f.n), cap)}`;
  return `a${a.id},${f.ph},${at},${Math.min(a.max - f.n, cap)}${used}`;
}

/** Object keys: txt and n are functions of raw (the key's bytes as written). Once no named
 * or written name starts with the text, the text itself no longer matters (feedKey and
 * valueFor compare it with those names only): what is left is its length, for the room
 * and minLength of propertyNames, and the regex states. */
function keyKey(f: Key, cap: number): string {
  const head = `k${f.o.id},${f.ph},${f.u},${f.cp},${f.count},${textKey(f.seen.join('\u0000'))}`;
  const named = f.o.props.some((p) => p.name.startsWith(f.txt)) || f.seen.some((s) => s.startsWith(f.txt));
  if (named || cap === Infinity) return `${head},${textKey(f.raw)},${f.rs.join(',')}`;
  return `${head},*${Math.min(f.o.keys.max - f.n, cap)},${Math.max(0, f.o.keys.min - f.n)},${f.rs.join(',')}`;
}

function frameKey(f: Frame, cap: number): string {
  switch (f.t) {
    case 'val': return `v${f.s.id}`;
    case 'lit': return `l${textKey(f.text)},${f.i}`;
    case 'str': return strKey(f, cap);
    case 'num': return `n${f.s.id},${f.ph},${f.n},${f.d}${f.s.range ? `,${f.txt}` : ''}`;
    case 'obj': return `o${f.o.id},${f.xml ? 1 : 0},${f.ph},${f.i},${f.count},${textKey(f.seen.join('\u0000'))}`;
    case 'key': return keyKey(f, cap);
    case 'arr': return arrKey(f, cap);
    case 'until': return untilKey(f, cap);
    case 'ws': return `w${f.left}`;
    case 'think': return `t${f.m}`;
  }
}

/** A key identifying what a stack accepts from here on: as far as tokens of up to `cap`
 * bytes go (the mask cache), or with cap Infinity, in full (merging stacks). */
export function stackKey(st: Stack | null, cap = KEY_CAP): string {
  let k = '';
  for (let s = st; s !== null; s = s.next) {
    if (s === DONE) return `${k}$`;
    k += frameKey(s.f, cap);
    k += '|';
  }
  return k;
}

/** The key of a whole state (its stacks' keys, order-independent). */
export function stateKey(state: State, cap = KEY_CAP): string {
  return state.length === 1 ? stackKey(state[0]!, cap) : state.map((s) => stackKey(s, cap)).sort().join('#');
}
