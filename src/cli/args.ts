// Small typed helpers over node:util parseArgs values, with errors naming the flag.
import { readFileSync } from 'node:fs';
import { paramProblem, REQUEST_PARAMS, type RequestParamKey } from '../engine/request-rules.js';
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

/** A request parameter flag (--temperature, --top-p, ...), checked by the same definition as
 * the matching API field; `max` bounds an open maximum (the context for --max-tokens). */
export function param(v: ArgValues, key: RequestParamKey, max?: number): number | undefined {
  const def = REQUEST_PARAMS[key];
  const n = num(v, def.flag);
  if (n === undefined) return undefined;
  const problem = paramProblem(def, n, `--${def.flag}`, max);
  if (problem) throw new DeltaserveError('bad_request', problem);
  return n;
}

/** The text of a file a flag names; a missing or unreadable file is the user's error. */
export function readFlagFile(flag: string, path: string): string {
  return readFlagFileAs(flag, path, () => readFileSync(path, 'utf8'));
}

/** A flag's file as bytes (an image), with readFlagFile's errors. */
export function readFlagFileBytes(flag: string, path: string): Buffer {
  return readFlagFileAs(flag, path, () => readFileSync(path));
}

function readFlagFileAs<R>(flag: string, path: string, read: () => R): R {
  try {
    return read();
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    const why = code === 'ENOENT' ? 'does not exist' : code === 'EISDIR' ? 'is a directory' : code === 'EACCES' ? 'is not readable' : (e as Error).message;
    return bad(flag, `file ${path} ${why}`);
  }
}

/** A negative number after a value-taking flag (`--temperature -1`) would otherwise be
 * read as an option by parseArgs ("argument is ambiguous"): glue it to its flag. */
export function glueNegativeNumbers(argv: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const next = argv[i + 1];
    if (/^--[a-z][\w-]*$/.test(a) && next !== undefined && /^-(\d|\.\d)/.test(next) && Number.isFinite(Number(next))) {
      out.push(`${a}=${next}`);
      i++;
    } else out.push(a);
  }
  return out;
}
