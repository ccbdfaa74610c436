// Small typed helpers over node:util parseArgs values, with errors naming the flag.
import { DeltaserveError } from '../util/errors.js';

export type ArgValues = Record<string, string | boolean | (string | boolean)[] | undefined>;

function bad(flag: string, why: string): never {
  throw new DeltaserveError('bad_request', `--${flag} ${why}`);
}

export function str(v: ArgValues, flag: string): string | undefined {
  const x = v[flag];
  return typeof x === 'string' ? x : undefined;
}

export function num(v: ArgValues, flag: string): number | undefined {
  const s = str(v, flag);
  if (s === undefined) return undefined;
  const n = Number(s);
  if (s.trim() === '' || !Number.isFinite(n)) bad(flag, `expects a number (got "${s}")`);
  return n;
}

export function int(v: ArgValues, flag: string, min = 0): number | undefined {
  const n = num(v, flag);
  if (n === undefined) return undefined;
  if (!Number.isInteger(n) || n < min) bad(flag, `expects an integer ≥ ${min} (got ${n})`);
  return n;
}

export function intList(v: ArgValues, flag: string): number[] | undefined {
  const s = str(v, flag);
  if (s === undefined) return undefined;
  return s.split(',').map((part) => {
    const n = Number(part.trim());
    if (!Number.isInteger(n) || n < 0) bad(flag, `expects comma-separated token ids (bad entry "${part}")`);
    return n;
  });
}

export function json(v: ArgValues, flag: string): unknown {
  const s = str(v, flag);
  if (s === undefined) return undefined;
  try {
    return JSON.parse(s);
  } catch (e) {
    return bad(flag, `expects JSON (${(e as Error).message})`);
  }
}
