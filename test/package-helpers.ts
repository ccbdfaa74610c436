// The npm package as a user gets it: `npm pack` of this checkout, then `npm install` of the
// tarball into a scratch project, offline: the tarball's dependencies (and any extra
// packages a test's project needs) come from the repository's installed node_modules as
// `file:` specs, as `npm ci` put them there.
import { spawn, spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT } from './paths.js';

/** The environment of a user's shell: no test-only overrides of the kernel choice. */
export function userEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env = { ...process.env, ...extra };
  delete env['DELTASERVE_KERNELS'];
  delete env['DELTASERVE_WASM_FMA'];
  return env;
}

export function run(cmd: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = userEnv()): SpawnSyncReturns<string> {
  const r = spawnSync(cmd, args, { cwd, encoding: 'utf8', env, timeout: 180_000 });
  if (r.error) throw new Error(`${cmd} ${args.join(' ')} could not run: ${r.error.message}`);
  return r;
}

/** `file:` spec of a package installed at the repository root (it must be there). */
function installed(name: string): string {
  const dir = join(REPO_ROOT, 'node_modules', name);
  if (!existsSync(dir)) throw new Error(`${dir} is missing: run npm ci first`);
  return `file:${dir}`;
}

/** Production dependencies installed at the repository root (package-lock.json). */
function installedDependencies(): Record<string, string> {
  const lock = JSON.parse(readFileSync(join(REPO_ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, { dev?: boolean }> };
  const deps: Record<string, string> = {};
  for (const [path, entry] of Object.entries(lock.packages)) {
    if (!path.startsWith('node_modules/') || entry.dev || path.lastIndexOf('node_modules/') !== 0) continue;
    const name = path.slice('node_modules/'.length);
    deps[name] = installed(name);
  }
  return deps;
}

export interface PackedFile { path: string }
export interface Packed { readonly tarball: string; readonly files: readonly string[] }

/** `npm pack` into `dir`. */
export function pack(dir: string): Packed {
  const r = run('npm', ['pack', '--json', '--pack-destination', dir], REPO_ROOT);
  if (r.status !== 0) throw new Error(`npm pack failed:\n${r.stderr}`);
  const [info] = JSON.parse(r.stdout) as { filename: string; files: PackedFile[] }[];
  return { tarball: join(dir, info!.filename), files: info!.files.map((f) => f.path) };
}

/** A scratch project in `app` with the tarball installed, plus `extra` packages from the
 * repository's node_modules (e.g. a client library, type declarations). */
export function installInto(app: string, tarball: string, extra: readonly string[] = []): void {
  mkdirSync(app, { recursive: true });
  const deps = { ...installedDependencies(), ...Object.fromEntries(extra.map((n) => [n, installed(n)])) };
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'app', private: true, type: 'module', dependencies: deps }));
  const r = run('npm', ['install', '--offline', '--install-links', '--no-audit', '--no-fund', tarball], app);
  if (r.status !== 0) throw new Error(`npm install of the tarball failed:\n${r.stderr}`);
}

export interface InstalledServer {
  readonly url: string;
  /** What it printed so far. */
  readonly stdout: () => string;
  /** Signal its process group (npx runs the bin in a child: signals must reach both). */
  readonly signal: (sig: NodeJS.Signals) => void;
  readonly exited: Promise<number | null>;
}

/** `npx deltaserve serve --port 0` in `app`, resolved once its ready line is out. */
export async function serveInstalled(app: string, args: readonly string[] = []): Promise<InstalledServer> {
  const proc = spawn('npx', ['--no-install', 'deltaserve', 'serve', '--port', '0', '--log-level', 'warn', ...args],
    { cwd: app, env: userEnv(), stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  const signal = (sig: NodeJS.Signals): void => {
    try {
      process.kill(-proc.pid!, sig);
    } catch {
      // already gone
    }
  };
  let stdout = '';
  let stderr = '';
  proc.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
  const exited = new Promise<number | null>((resolve) => proc.on('exit', (code) => resolve(code)));
  try {
    const url = await new Promise<string>((resolve, reject) => {
      proc.stdout.on('data', (b: Buffer) => {
        stdout += b.toString();
        const m = /serving tiny-think at (http:\/\/127\.0\.0\.1:\d+)\/v1\n[^\n]*\n/.exec(stdout);
        if (m) resolve(m[1]!);
      });
      void exited.then((code) => reject(new Error(`npx deltaserve serve exited (${code}) before it was ready:\n${stdout}\n${stderr}`)));
    });
    return { url, stdout: () => stdout, signal, exited };
  } catch (e) {
    signal('SIGKILL');
    throw e;
  }
}
