// The label check of hostname strings, as a plug-in: the core matcher runs it beside a
// string's regexes when the string's schema node asks for it (StringNode.labels), but it does
// not know what it checks. The IDNA 2008 A-label check (idna/) registers itself here, together
// with the `hostname` format that asks for it (registerIdnaHostnames); without it, `hostname`
// admits LDH labels only and no node asks for a check.
//
// A check's state is an immutable string (or null once the current label is beyond checking),
// so matcher states stay values that forks and the mask walk share freely.

/** '' at a label's start; null once the label cannot need the check. */
export type LabelState = string | null;

/** The state at a label's start. */
export const LABEL_START: LabelState = '';

export interface LabelCheck {
  /** The longest label in characters (the most room a label's ending may still need). */
  readonly maxLabel: number;
  /** The state after code point `cp` (false: no valid hostname continues this way). */
  step(lab: LabelState, cp: number): LabelState | false;
  /** May the hostname end here, as far as the check goes? */
  accepts(lab: LabelState): boolean;
  /** Can the current label still be finished within `spare` more characters? */
  fits(lab: LabelState, spare: number): boolean;
}

let registered: LabelCheck | null = null;

/** Install the label check (one per process; registering the same check again is a no-op). */
export function registerLabelCheck(check: LabelCheck): void {
  if (registered && registered !== check) throw new Error('a different hostname label check is already registered');
  registered = check;
}

/** Is a label check installed? */
export const hasLabelCheck = (): boolean => registered !== null;

function check(): LabelCheck {
  if (!registered) throw new Error('a grammar asks for the hostname label check, but none is registered (constrain/idna: registerIdnaHostnames)');
  return registered;
}

export const stepLabel = (lab: LabelState, cp: number): LabelState | false => check().step(lab, cp);
export const labelAccepts = (lab: LabelState): boolean => check().accepts(lab);
export const labelFits = (lab: LabelState, spare: number): boolean => check().fits(lab, spare);
export const maxLabel = (): number => check().maxLabel;

/** The label check's part of a matcher state key (its text holds only hostname characters;
 * '' for strings without the check). */
export const labelKey = (lab: LabelState | undefined): string => (lab === undefined ? '' : lab === null ? 'h~' : `h${lab}`);
