// Dawn (the webgpu backend's WebGPU implementation) prints driver warnings from native
// code straight to file descriptor 2 — on lavapipe, "Warning: maxDynamicUniformBuffersPer-
// PipelineLayout artificially reduced ..." — where no JavaScript hook can catch them. A
// command that may load Dawn (--kernels webgpu or auto) therefore runs as a child process
// whose stderr this process copies line by line, leaving those lines out. The child gets
// every signal this process is sent (a terminal's Ctrl-C already reaches both).
import { spawn } from 'node:child_process';

/** Set in the child: its stderr is filtered already. */
export const FILTERED_ENV = 'DELTASERVE_STDERR_FILTERED';

const ENGINE_COMMANDS = new Set(['serve', 'generate', 'eval', 'bench']);

/** A line Dawn wrote on its own (our own messages start with "deltaserve:" or are JSON). */
export function isDawnWarning(line: string): boolean {
  return /^Warning: /.test(line);
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

/** Run this same command line in a child with Dawn's lines left out of its stderr;
 * resolves to the child's exit code. */
export function runFiltered(): Promise<number> {
  const child = spawn(process.execPath, [...process.execArgv, ...process.argv.slice(1)], {
    stdio: ['inherit', 'inherit', 'pipe'], env: { ...process.env, [FILTERED_ENV]: '1' },
  });
  let pending = '';
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (chunk: string) => {
    const lines = (pending + chunk).split('\n');
    pending = lines.pop()!;
    const kept = lines.filter((l) => !isDawnWarning(l));
    if (kept.length > 0) process.stderr.write(kept.join('\n') + '\n');
  });
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
      if (pending && !isDawnWarning(pending)) process.stderr.write(pending);
      for (const [s, h] of handlers) process.off(s, h);
      resolve(code ?? (signal ? 128 + (signal === 'SIGINT' ? 2 : signal === 'SIGTERM' ? 15 : 1) : 1));
    });
  });
}
