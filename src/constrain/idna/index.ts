// The optional IDNA 2008 module: `format: hostname` admitting A-labels (xn--…) whose Punycode
// spells a valid IDNA 2008 label, checked beside the hostname regex as the string is written
// (host-labels.ts). The core never imports this folder: a caller that wants the check (the
// server, on the event loop and in its prepare workers) registers it before compiling.
import { HOSTNAME_LDH, HOSTNAME_MAX_LENGTH, HOSTNAME_WITH_A_LABELS, registerFormat } from '../formats.js';
import { type LabelCheck, registerLabelCheck } from '../labels.js';
import { labelAccepts, labelFits, stepLabel } from './host-labels.js';
import { MAX_LABEL } from './idna.js';
import { isVirama } from './idna-tables.js';

const IDNA_LABELS: LabelCheck = { maxLabel: MAX_LABEL, step: stepLabel, accepts: labelAccepts, fits: labelFits };

let done = false;

/** Register the A-label check and the `hostname` format that uses it (idempotent). */
export function registerIdnaHostnames(): void {
  if (done) return;
  registerLabelCheck(IDNA_LABELS);
  registerFormat('hostname', { patterns: [HOSTNAME_WITH_A_LABELS], maxLength: HOSTNAME_MAX_LENGTH, labels: { untracked: [HOSTNAME_LDH] } });
  done = true;
}

/** Build the tables the check reads on first use (the server's warm-up calls it). */
export function warmIdnaTables(): void {
  isVirama(0);
}
