// The label check of `format: hostname` strings, run beside the hostname regex (which admits
// A-labels by their syntax: "xn--" then letters, digits and hyphens). Its state is the
// current label's text while that label may be or is an A-label ('' at a label start), and
// null once the label cannot be one — an immutable string, cheap to copy and compare, so
// matcher states stay values (MTP drafts and the mask walk fork them freely).
//
// No dead end: a character may extend an A-label only when some valid A-label still starts
// with the text (aLabelWitness finds one, or the fast rule below proves one exists), and the
// label may close ('.' or the string's end) only when it is a valid A-label. So a constrained
// generation that follows the mask always has a way to finish the label; the room it needs is
// the witness's length (labelNeed), counted with the regexes' own.
import { LABEL_START, type LabelState } from '../labels.js';
import { aLabelValid, aLabelWitness, MAX_LABEL } from './idna.js';

const DOT = 0x2e;
const ACE = 'xn--';
/** Viability and need by label text (bounded: cleared when full). */
const viableMemo = new Map<string, boolean>();
const needMemo = new Map<string, number>();
const MEMO_CAP = 65_536;

function memo<T>(m: Map<string, T>, key: string, make: () => T): T {
  let v = m.get(key);
  if (v === undefined) {
    if (m.size >= MEMO_CAP) m.clear();
    m.set(key, (v = make()));
  }
  return v;
}

/** Lowercase Punycode made of basic code points only, with room for "-" and three digits:
 * that text plus U+00E0 at its end (or its start, when it begins with '-') encodes as the
 * text, '-' and at most three digits (delta ≤ 96·56 + 55 < 1 + 35·(1 + 35·26)), and is a
 * valid U-label unless "--" sits at positions 3–4 or a leading '-' meets a trailing one. */
const QUICK_NEED = 4;
function quickViable(puny: string): boolean {
  if (!/^[a-z0-9-]*$/.test(puny) || 4 + puny.length + 4 > MAX_LABEL) return false;
  if (puny[2] === '-' && puny[3] === '-') return false;
  return !(puny.startsWith('-') && (puny.endsWith('-') || puny[1] === '-'));
}

/** Can a valid A-label still start with `text` (one label, "xn--" included)? */
export function aLabelViable(text: string): boolean {
  if (text.length > MAX_LABEL) return false;
  if (quickViable(text.slice(4))) return true;
  return memo(viableMemo, text, () => aLabelWitness(text) !== null);
}

/** The state after code point `cp` (false: no valid hostname continues this way). A label
 * state of 4 or more characters is an A-label being written ("xn--" and what follows). */
export function stepLabel(lab: LabelState, cp: number): LabelState | false {
  if (cp === DOT) return lab !== null && lab.length >= 4 && !aLabelValid(lab) ? false : LABEL_START;
  if (lab === null) return null;
  if (lab.length < 4) {
    // still a prefix of "xn--" (x and n in any case)? Most labels leave here at once.
    const i = lab.length;
    const ok = i < 2 ? (cp | 0x20) === ACE.charCodeAt(i) : cp === 0x2d;
    return ok ? lab + String.fromCharCode(cp) : null;
  }
  const text = lab + String.fromCodePoint(cp);
  return aLabelViable(text) ? text : false;
}

/** May the hostname end here, as far as the label check goes? */
export const labelAccepts = (lab: LabelState): boolean => lab === null || lab.length < 4 || aLabelValid(lab);

/** An upper bound on the characters the current A-label still needs (the shortest witness's
 * length; 0 outside an A-label or when it is complete). Following that witness, the next
 * prefix needs one character fewer: a room check with it never strands the label. */
export function labelNeed(lab: LabelState): number {
  if (lab === null || lab.length < 4) return 0;
  return memo(needMemo, lab, () => {
    const w = aLabelWitness(lab, true);
    return w === null ? MAX_LABEL : w.length - lab.length;
  });
}

/** labelNeed without computing it when `spare` characters are certainly enough. */
export function labelFits(lab: LabelState, spare: number): boolean {
  if (lab === null || lab.length < 4 || MAX_LABEL - lab.length <= spare) return true;
  // the fast rule's witness needs '-' and at most three digits
  if (spare >= QUICK_NEED && quickViable(lab.slice(4))) return true;
  return labelNeed(lab) <= spare;
}
