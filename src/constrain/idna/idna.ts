// IDNA 2008 label validity (RFC 5890–5892), for `format: hostname` A-labels (xn--…):
// - derivedProperty: RFC 5892 §3 from the engine's Unicode properties (general categories,
//   Default_Ignorable_Code_Point, White_Space, Noncharacter_Code_Point, NFKC and case
//   folding), the exceptions table, the ignorable blocks and old Hangul jamo;
// - uLabelValid: RFC 5891 §5.4 — NFC, no "--" in positions 3–4, no leading or trailing
//   hyphen, no leading combining mark, every code point PVALID or CONTEXTJ/CONTEXTO with its
//   RFC 5892 Appendix A rule satisfied. The Bidi rule (RFC 5893) is not checked (the
//   JSON-Schema-Test-Suite does not ask for it: its valid "xn--ngba1o" starts with a digit);
// - aLabelValid: "xn--" (any case), ≤ 63 characters, Punycode that decodes, a non-ASCII
//   U-label, and the round trip: encoding the U-label gives the label's Punycode exactly. So
//   the Punycode is lowercase, as the encoder writes it (RFC 5890 §2.3.2.1: an A-label is the
//   prefix and "a valid output of the Punycode algorithm"; an uppercase basic code point
//   would be DISALLOWED in the U-label anyway).
// - aLabelWitness: for a label being written, a valid A-label that starts with it (so a
//   constrained generation that only writes viable prefixes is never stuck).
import { EXCEPTIONS, isVirama, joiningType } from './idna-tables.js';
import { decodeState, digitChar, punycodeDecode, punycodeEncode } from './punycode.js';

export type DerivedProperty = 'PVALID' | 'CONTEXTJ' | 'CONTEXTO' | 'DISALLOWED' | 'UNASSIGNED';

export const MAX_LABEL = 63;

const UNASSIGNED_RE = /^\p{Cn}$/u;
const NONCHARACTER_RE = /^\p{Noncharacter_Code_Point}$/u;
const IGNORABLE_RE = /^[\p{Default_Ignorable_Code_Point}\p{White_Space}\p{Noncharacter_Code_Point}]$/u;
const LETTER_DIGIT_RE = /^[\p{Ll}\p{Lu}\p{Lo}\p{Nd}\p{Lm}\p{Mn}\p{Mc}]$/u;
const COMBINING_MARK_RE = /^\p{M}$/u;

/** Full case folding: lowercase of uppercase matches CaseFolding.txt's C+F mappings except
 * for dotless i (folds to itself) and Cherokee (folds to the uppercase letters). */
function caseFold(s: string): string {
  let out = '';
  for (const ch of s) {
    const c = ch.codePointAt(0)!;
    if (c === 0x131 || (c >= 0x13a0 && c <= 0x13f5)) out += ch;
    else if (c >= 0x13f8 && c <= 0x13fd) out += String.fromCodePoint(c - 8);
    else if (c >= 0xab70 && c <= 0xabbf) out += String.fromCodePoint(c - 0xab70 + 0x13a0);
    else out += ch.toUpperCase().toLowerCase();
  }
  return s === out ? s : out;
}

const IGNORABLE_BLOCKS: readonly (readonly [number, number])[] = [[0x20d0, 0x20ff], [0x1d100, 0x1d1ff], [0x1d200, 0x1d24f]];
const OLD_HANGUL_JAMO: readonly (readonly [number, number])[] = [[0x1100, 0x11ff], [0xa960, 0xa97c], [0xd7b0, 0xd7c6], [0xd7cb, 0xd7fb]];
const inAny = (cp: number, ranges: readonly (readonly [number, number])[]): boolean => ranges.some(([a, b]) => cp >= a && cp <= b);

function computeProperty(cp: number): DerivedProperty {
  const exc = EXCEPTIONS.get(cp);
  if (exc) return exc;
  const s = String.fromCodePoint(cp);
  if (UNASSIGNED_RE.test(s) && !NONCHARACTER_RE.test(s)) return 'UNASSIGNED';
  if ((cp >= 0x61 && cp <= 0x7a) || (cp >= 0x30 && cp <= 0x39) || cp === 0x2d) return 'PVALID';
  if (cp === 0x200c || cp === 0x200d) return 'CONTEXTJ';
  if (cp >= 0xd800 && cp <= 0xdfff) return 'DISALLOWED';
  if (caseFold(s.normalize('NFKC')).normalize('NFKC') !== s) return 'DISALLOWED'; // Unstable
  if (IGNORABLE_RE.test(s) || inAny(cp, IGNORABLE_BLOCKS) || inAny(cp, OLD_HANGUL_JAMO)) return 'DISALLOWED';
  return LETTER_DIGIT_RE.test(s) ? 'PVALID' : 'DISALLOWED';
}

/** Computed once per code point (0: not yet). */
const PROPERTY_CODES: readonly DerivedProperty[] = ['PVALID', 'PVALID', 'CONTEXTJ', 'CONTEXTO', 'DISALLOWED', 'UNASSIGNED'];
const propertyCache = new Uint8Array(0x110000);

export function derivedProperty(cp: number): DerivedProperty {
  let code = propertyCache[cp]!;
  if (code === 0) propertyCache[cp] = code = PROPERTY_CODES.indexOf(computeProperty(cp), 1);
  return PROPERTY_CODES[code]!;
}

const scriptRes = new Map<string, RegExp>();
function isScript(cp: number | undefined, ...scripts: string[]): boolean {
  if (cp === undefined) return false;
  return scripts.some((sc) => {
    let re = scriptRes.get(sc);
    if (!re) scriptRes.set(sc, (re = new RegExp(`^\\p{Script=${sc}}$`, 'u')));
    return re.test(String.fromCodePoint(cp));
  });
}

/** RFC 5892 A.1: (Joining_Type:{L,D})(Joining_Type:T)* ZWNJ (Joining_Type:T)*(Joining_Type:{R,D}). */
function zwnjJoins(label: readonly number[], at: number): boolean {
  let i = at - 1;
  while (i >= 0 && joiningType(label[i]!) === 'T') i--;
  const before = i >= 0 ? joiningType(label[i]!) : 'U';
  if (before !== 'L' && before !== 'D') return false;
  let j = at + 1;
  while (j < label.length && joiningType(label[j]!) === 'T') j++;
  const after = j < label.length ? joiningType(label[j]!) : 'U';
  return after === 'R' || after === 'D';
}

/** RFC 5892 Appendix A: the rule of the contextual code point at `at`. */
function contextHolds(label: readonly number[], at: number): boolean {
  const cp = label[at]!;
  const before = label[at - 1];
  const after = label[at + 1];
  switch (cp) {
    case 0x200c:
      return (before !== undefined && isVirama(before)) || zwnjJoins(label, at);
    case 0x200d:
      return before !== undefined && isVirama(before);
    case 0x00b7:
      return before === 0x6c && after === 0x6c;
    case 0x0375:
      return isScript(after, 'Greek');
    case 0x05f3:
    case 0x05f4:
      return isScript(before, 'Hebrew');
    case 0x30fb:
      return label.some((c) => c !== 0x30fb && isScript(c, 'Hiragana', 'Katakana', 'Han'));
    default:
      if (cp >= 0x0660 && cp <= 0x0669) return !label.some((c) => c >= 0x06f0 && c <= 0x06f9);
      if (cp >= 0x06f0 && cp <= 0x06f9) return !label.some((c) => c >= 0x0660 && c <= 0x0669);
      return false;
  }
}

/** RFC 5891 §5.4 for a U-label's code points (Bidi not checked, see above). */
export function uLabelValid(label: readonly number[]): boolean {
  if (label.length === 0) return false;
  const text = String.fromCodePoint(...label);
  if (text.normalize('NFC') !== text) return false;
  if (label[2] === 0x2d && label[3] === 0x2d) return false;
  if (label[0] === 0x2d || label[label.length - 1] === 0x2d) return false;
  if (COMBINING_MARK_RE.test(String.fromCodePoint(label[0]!))) return false;
  for (let i = 0; i < label.length; i++) {
    const p = derivedProperty(label[i]!);
    if (p === 'PVALID') continue;
    if ((p === 'CONTEXTJ' || p === 'CONTEXTO') && contextHolds(label, i)) continue;
    return false;
  }
  return true;
}

/** Punycode as the encoder writes it: lowercase letters, digits, hyphens. */
const PUNYCODE_TEXT = /^[a-z0-9-]*$/;

/** Does the label start with the ACE prefix "xn--" (any case)? */
export const hasAcePrefix = (label: string): boolean => label.length >= 4 && label.slice(0, 4).toLowerCase() === 'xn--';

/** Is `label` (one label, "xn--" included) a valid A-label? */
export function aLabelValid(label: string): boolean {
  if (!hasAcePrefix(label) || label.length > MAX_LABEL) return false;
  const puny = label.slice(4);
  if (!PUNYCODE_TEXT.test(puny)) return false;
  const u = punycodeDecode(puny);
  if (!u || u.every((c) => c < 0x80) || !uLabelValid(u)) return false;
  return punycodeEncode(u) === puny;
}

/** Candidate code points a witness adds: a Latin letter, a Han ideograph (it also satisfies
 * KATAKANA MIDDLE DOT), a Hangul syllable and a supplementary ideograph — each PVALID with no
 * context, so a witness needs them only to make the label non-ASCII or ≥ the current n. */
const FILLERS = [0xe0, 0x4e00, 0xac00, 0x20000];

/** Valid A-labels that start with `prefix` (a label being written, "xn--" included), the
 * shortest when `shortest`, else the first found; null when the search finds none. Candidates:
 * the prefix itself; the prefix as basic code points with a filler at the end or the start
 * (its Punycode is the prefix, '-', digits); the prefix's own decoding ended by one more digit
 * below the threshold; and that decoding with one filler delta at the end or the start, whose
 * encoding must continue the digits already written.
 * Sound (every witness is checked by aLabelValid) and closed under extension: the next
 * character of a witness leads to a prefix whose candidates include that same witness, so
 * following witnesses never meets a dead end and the shortest one never grows. Not complete:
 * a prefix may be refused near the 63-character limit although a longer search would find an
 * ending. */
export function aLabelWitness(prefix: string, shortest = false): string | null {
  if (!hasAcePrefix(prefix) || prefix.length > MAX_LABEL) return null;
  const puny = prefix.slice(4);
  if (!PUNYCODE_TEXT.test(puny)) return null;
  if (shortest && aLabelValid(prefix)) return prefix;
  const st = decodeState(puny, true);
  /** The prefix ended by one more digit (only when it ends inside a delta): the shortest. */
  const byDigit = (): string | null => {
    if (!st?.partial) return null;
    for (let v = 0; v < st.nextThreshold; v++) {
      // the code point digit v would insert: skip the certainly invalid ones unvalidated
      const cp = st.n + Math.floor((st.i + v * st.w) / (st.out.length + 1));
      if (cp > 0x10ffff) break;
      const p = derivedProperty(cp);
      if (p !== 'DISALLOWED' && p !== 'UNASSIGNED' && aLabelValid(prefix + digitChar(v))) return prefix + digitChar(v);
    }
    return null;
  };
  if (shortest) {
    const d = byDigit();
    if (d !== null) return d;
  }
  // encodings with one filler: the prefix as basic code points, or its decoding plus a delta
  const basic = [...puny].map((c) => c.codePointAt(0)!);
  const encodings = FILLERS.flatMap((f) => [punycodeEncode([...basic, f]), punycodeEncode([f, ...basic])]);
  if (st) encodings.push(...fillerEncodings(puny.slice(0, st.start), st.out));
  const labels = encodings.filter((w): w is string => w !== null && 4 + w.length <= MAX_LABEL && w.startsWith(puny)).map((w) => prefix + w.slice(puny.length));
  if (shortest) labels.sort((x, y) => x.length - y.length);
  for (const l of labels) if (aLabelValid(l)) return l;
  if (shortest || !st) return null;
  return st.partial ? byDigit() : aLabelValid(prefix) ? prefix : null;
}

/** The encodings of a decoded prefix (Punycode `text`, at a delta boundary, decoding to
 * `out`) with one filler delta at its end or start: shared by every prefix that continues
 * `text` inside its next delta (bounded memo). */
const fillerMemo = new Map<string, readonly string[]>();
function fillerEncodings(text: string, out: readonly number[]): readonly string[] {
  let ws = fillerMemo.get(text);
  if (ws) return ws;
  const top = Math.max(0x80, ...out);
  const found: string[] = [];
  for (const f of FILLERS) {
    if (f < top) continue;
    for (const u of [[...out, f], [f, ...out]]) {
      const w = punycodeEncode(u);
      if (w !== null && w.startsWith(text)) found.push(w);
    }
  }
  if (fillerMemo.size >= 16_384) fillerMemo.clear();
  fillerMemo.set(text, (ws = found));
  return ws;
}
