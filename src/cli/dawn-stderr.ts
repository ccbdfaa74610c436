// Dawn (the webgpu backend's WebGPU implementation) prints driver warnings from native
// code straight to file descriptor 2 — on lavapipe, "Warning: maxDynamicUniformBuffersPer-
// PipelineLayout artificially reduced ..." — where no JavaScript hook can catch them. A
// command that may load Dawn (--kernels webgpu or auto) therefore runs as a child process
// whose stderr this process copies line by line, leaving those lines out. The child gets
// every signal this process is sent (a terminal's Ctrl-C already reaches both).
import { spawn } from 'node:child_process';

/** Set in the child: its stderr is filtered already. */
export const FILTERED_ENV = 'DELTASERVE_STDERR_FILTERED';
/** Set in the child when the parent's stderr is a terminal. */
const TTY_ENV = 'DELTASERVE_STDERR_TTY';

/** Commands that may load Dawn (they take --kernels). */
const ENGINE_COMMANDS = new Set(['serve', 'chat', 'generate', 'eval', 'bench']);

/** How the native lines under Dawn begin: Dawn's own warnings ("Warning: ..."), the
 * Vulkan loader's ("WARNING: [Loader Message] ...", any level) and Mesa's ("MESA: ...",
 * older lavapipe's "WARNING: lavapipe is not a conformant ..."). Our own messages start
 * with "deltaserve:" or are JSON. */
const NATIVE_PREFIXES = ['Warning: ', 'WARNING: [Loader Message]', 'ERROR: [Loader Message]', 'INFO: [Loader Message]', 'MESA: ', 'WARNING: lavapipe is not a conformant'];

/** A line Dawn (or the driver under it) wrote on its own. */
export function isDawnWarning(line: string): boolean {
  return NATIVE_PREFIXES.some((p) => line.startsWith(p));
}

/** Whether `text` (a line's start, no newline yet) may still become a native line. */
function mayBeNative(text: string): boolean {
  return NATIVE_PREFIXES.some((p) => (text.length < p.length ? p.startsWith(text) : text.startsWith(p)));
}

/** The value of --kernels in a command's arguments (either spelling), or undefined. */
function kernelsFlag(args: readonly string[]): string | undefined {
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === '--kernels') return args[i + 1];
    if (a.startsWith('--kernels=')) return a.slice('--kernels='.length);
  }
  return undefined;
}

/** Does `deltaserve <argv>` load Dawn in this process, unfiltered? */
export function needsDawnFilter(argv: readonly string[]): boolean {
  if (process.env[FILTERED_ENV] === '1') return false;
  const [cmd, ...rest] = argv;
  if (cmd === undefined || !ENGINE_COMMANDS.has(cmd) || rest.includes('--help') || rest.includes('-h')) return false;
  const k = kernelsFlag(rest);
  return k === 'webgpu' || k === 'auto';
}

/** Copies a stream line by line, leaving out Dawn's lines. Text of a line that can no
 * longer become one (e.g. a progress bar's "\r..." with no newline yet) passes at once. */
export class DawnLineFilter {
  private pending = '';
  /** The current line is being passed through (it is not Dawn's). */
  private passing = false;

  constructor(private readonly out: (text: string) => void) {}

  push(chunk: string): void {
    let text = this.pending + chunk;
    this.pending = '';
    for (;;) {
      const nl = text.indexOf('\n');
      if (this.passing) {
        if (nl < 0) { if (text) this.out(text); return; }
        this.out(text.slice(0, nl + 1));
        this.passing = false;
        text = text.slice(nl + 1);
        continue;
      }
      if (nl >= 0) {
        const line = text.slice(0, nl);
        if (!isDawnWarning(line)) this.out(text.slice(0, nl + 1));
        text = text.slice(nl + 1);
        continue;
      }
      // a partial line: hold it only while it may still be a Dawn warning
      if (text.length > 0 && !mayBeNative(text)) {
        this.out(text);
        this.passing = true;
      } else this.pending = text;
      return;
    }
  }

  end(): void {
    if (this.pending && !isDawnWarning(this.pending)) this.out(this.pending);
    this.pending = '';
  }
}

/** Run this same command line in a child with Dawn's lines left out of its stderr;
 * resolves to the child's exit code. */
export function runFiltered(): Promise<number> {
  const child = spawn(process.execPath, [...process.execArgv, ...process.argv.slice(1)], {
    stdio: ['inherit', 'inherit', 'pipe'],
    env: { ...process.env, [FILTERED_ENV]: '1', ...(process.stderr.isTTY ? { [TTY_ENV]: '1' } : {}) },
  });
  const filter = new DawnLineFilter((text) => void process.stderr.write(text));
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (chunk: string) => filter.push(chunk));
  const forward = (sig: NodeJS.Signals) => (): void => {
    // a terminal's Ctrl-C reaches the child itself (same process group): do not double it
    if (sig === 'SIGINT' && process.stdin.isTTY) return;
    child.kill(sig);
  };
  const signals: NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];
  const handlers = signals.map((s) => [s, forward(s)] as const);
  for (const [s, h] of handlers) process.on(s, h);
  return new Promise((resolve) => {
    child.on('close', (code, signal) => {
      filter.end();
      for (const [s, h] of handlers) process.off(s, h);
      resolve(code ?? (signal === 'SIGINT' ? 130 : signal === 'SIGTERM' ? 143 : 1));
    });
  });
}

/** In the child: the parent's stderr is a terminal, so behave as if ours were (log format,
 * progress bars); the pipe in between only filters. */
export function inheritStderrTty(): void {
  if (process.env[FILTERED_ENV] === '1' && process.env[TTY_ENV] === '1' && !process.stderr.isTTY) {
    Object.defineProperty(process.stderr, 'isTTY', { value: true });
  }
}
