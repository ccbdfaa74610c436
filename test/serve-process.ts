// `deltaserve serve` as a child process, for tests of what only the CLI does: the ready
// line, flags, signals, restarts.
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { REPO_ROOT, TINY_THINK } from './paths.js';
import { KERNELS } from './server-helpers.js';

export interface ServeProcess {
  readonly proc: ChildProcess;
  /** http://127.0.0.1:PORT (no /v1). */
  readonly url: string;
  readonly port: number;
  stdout(): string;
  stderr(): string;
  /** The exit code, once the process has exited. */
  readonly exited: Promise<number | null>;
  /** SIGTERM, then the exit code. */
  stop(): Promise<number | null>;
}

export interface ServeOptions {
  /** Extra environment (DELTASERVE_KERNELS defaults to the suite's kernels). */
  readonly env?: NodeJS.ProcessEnv;
  /** Also wait until stdout matches this. */
  readonly readyWhen?: RegExp;
  /** --model (default tiny-think); null leaves the flag out. */
  readonly model?: string | null;
}

/** `deltaserve serve --port 0 --model M ...args`; resolves once stdout has the line
 * "serving NAME at URL/v1" (and `readyWhen`); rejects with its stderr if it exits first. */
export async function spawnServe(args: readonly string[], o: ServeOptions = {}): Promise<ServeProcess> {
  const model = o.model === null ? [] : ['--model', o.model ?? TINY_THINK()];
  const proc = spawn(process.execPath, [join(REPO_ROOT, 'dist', 'src', 'cli', 'main.js'), 'serve', '--port', '0', ...model, ...args], {
    env: { ...process.env, DELTASERVE_KERNELS: KERNELS, ...o.env }, stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  proc.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
  const exited = new Promise<number | null>((resolve) => proc.on('exit', (code) => resolve(code)));
  const url = await new Promise<string>((resolve, reject) => {
    proc.stdout.on('data', (b: Buffer) => {
      stdout += b.toString();
      const m = /serving \S+ at (http:\/\/127\.0\.0\.1:\d+)\/v1\n/.exec(stdout);
      if (m && (!o.readyWhen || o.readyWhen.test(stdout))) resolve(m[1]!);
    });
    void exited.then((code) => reject(new Error(`serve exited (${code}) before it was ready: ${stderr}`)));
  });
  return {
    proc, url, port: Number(new URL(url).port), exited, stdout: () => stdout, stderr: () => stderr,
    stop: () => (proc.kill('SIGTERM'), exited),
  };
}
