// Transparent huge pages (Linux): whether the weights in wasm memory sit on 2 MB pages.
// V8 maps wasm memory itself and never asks for huge pages (no madvise), so with the common
// default "madvise" every 4 KB of weights costs a TLB miss; in a VM each miss is a
// two-level page walk. Measured on an Intel Xeon VM (2 vCPUs, AVX-512): one thread
// streams 11.3 GB/s on 4 KB pages and 15.8 GB/s on 2 MB pages, and decode runs 6–17%
// faster with "always". Only the operator can change the setting (it is system-wide), so
// deltaserve reports it and says how; it never writes it.
import { readFileSync } from 'node:fs';

export const THP_SETTING_FILE = '/sys/kernel/mm/transparent_hugepage/enabled';

export interface HugePageStatus {
  /** The kernel's THP mode ("always", "madvise", "never"), null off Linux or unreadable. */
  readonly thp: string | null;
  /** This process's anonymous memory on huge pages (MB), null where /proc is absent. */
  readonly anonHugeMb: number | null;
}

/** "always [madvise] never" → "madvise": the bracketed word, null if there is none. */
export function parseThpSetting(text: string): string | null {
  const m = /\[([a-z+]+)\]/.exec(text);
  return m?.[1] ?? null;
}

/** The AnonHugePages line of /proc/self/smaps_rollup ("AnonHugePages:  868352 kB") in MB. */
export function parseAnonHugeMb(smapsRollup: string): number | null {
  const m = /^AnonHugePages:\s+(\d+)\s+kB$/m.exec(smapsRollup);
  return m?.[1] === undefined ? null : Number(m[1]) / 1024;
}

function readOrNull(file: string): string | null {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return null;
  }
}

export function hugePageStatus(): HugePageStatus {
  if (process.platform !== 'linux') return { thp: null, anonHugeMb: null };
  const setting = readOrNull(THP_SETTING_FILE);
  const rollup = readOrNull('/proc/self/smaps_rollup');
  return { thp: setting === null ? null : parseThpSetting(setting), anonHugeMb: rollup === null ? null : parseAnonHugeMb(rollup) };
}

/** Below this many bytes of weights the page size does not matter to a user (the built-in
 * tiny model: 16 MB), so no hint. */
export const HINT_MIN_WEIGHT_BYTES = 256 * 2 ** 20;

/** One line for the operator when the CPU kernels' weights (weightBytes of them) cannot get
 * huge pages, else null. */
export function hugePageHint(status: HugePageStatus, kernelsName: string, weightBytes: number): string | null {
  if (kernelsName === 'webgpu' || status.thp === null || status.thp === 'always') return null;
  if (weightBytes < HINT_MIN_WEIGHT_BYTES) return null;
  return `transparent huge pages are "${status.thp}", so the weights sit on 4 KB pages; decode ran 6–17% faster ` +
    `with "always" on an Intel Xeon VM (as root: echo always > ${THP_SETTING_FILE}; docs/operations.md "Huge pages")`;
}
