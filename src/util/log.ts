// A small structured logger: one line per record, JSON (for log collectors) or readable
// text (for a terminal). Records below the level are dropped. No global state: the CLI
// creates one and passes it down (the server takes it as an option; silent by default).
import { format } from 'node:util';

export const LOG_LEVELS = ['debug', 'info', 'warn', 'error', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];
export type LogFormat = 'json' | 'pretty';
export type LogFields = Readonly<Record<string, unknown>>;

export interface Logger {
  readonly level: LogLevel;
  debug(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
}

export interface LoggerOptions {
  readonly level?: LogLevel;
  /** Default: json when `stream` is not a terminal, else pretty. */
  readonly format?: LogFormat;
  /** Where lines go (default process.stderr). */
  readonly stream?: { write(s: string): unknown; readonly isTTY?: boolean };
}

const RANK: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 };

export function isLogLevel(s: string): s is LogLevel {
  return (LOG_LEVELS as readonly string[]).includes(s);
}

/** Errors become {type, message, stack}: JSON.stringify drops an Error's own fields. */
function plain(v: unknown): unknown {
  if (v instanceof Error) return { type: v.name, message: v.message, stack: v.stack };
  return v;
}

function jsonLine(level: LogLevel, msg: string, fields: LogFields): string {
  const rec: Record<string, unknown> = { time: new Date().toISOString(), level, msg };
  for (const [k, v] of Object.entries(fields)) if (v !== undefined) rec[k] = plain(v);
  return JSON.stringify(rec) + '\n';
}

function prettyValue(v: unknown): string {
  if (typeof v === 'string') return /[\s"=]/.test(v) || v === '' ? JSON.stringify(v) : v;
  return typeof v === 'object' && v !== null ? JSON.stringify(v) : String(v);
}

function prettyLine(level: LogLevel, msg: string, fields: LogFields): string {
  let stack = '';
  const parts = [new Date().toISOString(), level.toUpperCase().padEnd(5), msg];
  for (const [k, v] of Object.entries(fields)) {
    if (v === undefined) continue;
    if (v instanceof Error) {
      parts.push(`${k}=${prettyValue(v.message)}`);
      if (v.stack) stack = '\n' + v.stack;
    } else parts.push(`${k}=${prettyValue(v)}`);
  }
  return parts.join(' ') + stack + '\n';
}

export function createLogger(opts: LoggerOptions = {}): Logger {
  const level = opts.level ?? 'info';
  const stream = opts.stream ?? process.stderr;
  const fmt = opts.format ?? (stream.isTTY ? 'pretty' : 'json');
  const line = fmt === 'json' ? jsonLine : prettyLine;
  const emit = (at: LogLevel) => (msg: string, fields: LogFields = {}): void => {
    if (RANK[at] < RANK[level]) return;
    try {
      stream.write(line(at, msg, fields));
    } catch (e) {
      // A logger must never take a request down (e.g. a closed pipe).
      process.emitWarning(format('deltaserve: log write failed: %s', (e as Error).message));
    }
  };
  return { level, debug: emit('debug'), info: emit('info'), warn: emit('warn'), error: emit('error') };
}

/** A logger that drops everything (library use and in-process tests). */
export const SILENT: Logger = createLogger({ level: 'silent', stream: { write: () => true } });
