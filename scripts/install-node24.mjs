// The root package's `prepare` script (npm ci / npm install in a checkout; never run for a user
// of the published package): installs Node 24 into tools/node24/node_modules from its own
// lockfile (tools/node24/package-lock.json: the npm registry's per-platform `node-<os>-<cpu>`
// packages, with their integrity), so that ./deltaserve, npm start and npm test run on Node 24
// (scripts/node.sh picks it) on a machine whose system Node is 20. Node 24's V8 runs the wasm
// kernels faster (README, "Node versions").
//
// Nothing to do, silently, when it is already installed, or when the Node running npm is ≥ 24.
// Where the registry has no Node 24 package for this platform it says so and leaves the
// system Node in charge. A failed install fails `npm ci`, naming the command to retry.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';

// First, before reading anything: the container build runs `npm ci` on Node 24 with only
// package.json, this file and tools/node24 copied.
if (Number(process.versions.node.split('.')[0]) >= 24) process.exit(0);

const root = join(import.meta.dirname ?? new URL('.', import.meta.url).pathname, '..');
const dir = join(root, 'tools', 'node24');
const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
const pkg = `node-${process.platform}-${process.arch}`;
const version = manifest.optionalDependencies[pkg];
const bin = join(dir, 'node_modules', pkg, 'bin', 'node');
const say = (m) => console.error(`install-node24: ${m}`);

if (!version) {
  say(`the npm registry has no Node 24 package for ${process.platform}-${process.arch} in tools/node24: deltaserve runs on this Node ${process.version} (install Node ≥ 24 for the faster kernels)`);
  process.exit(0);
}
const installed = () => existsSync(bin) && spawnSync(bin, ['--version'], { encoding: 'utf8' }).stdout.trim() === `v${version}`;
if (installed()) process.exit(0);

say(`installing Node ${version} (npm package ${pkg}) into tools/node24: the system Node is ${process.version}`);
const npm = process.env.npm_execpath;
const [cmd, args] = npm && npm.endsWith('.js') ? [process.execPath, [npm]] : ['npm', []];
const r = spawnSync(cmd, [...args, 'ci', '--prefix', dir, '--no-audit', '--no-fund', '--ignore-scripts', '--loglevel=error'], { stdio: ['ignore', 'ignore', 'inherit'] });
if (r.status !== 0 || !installed()) {
  say(`ERROR: npm ci --prefix tools/node24 failed${r.error ? ` (${r.error.message})` : ''}: rerun \`npm run setup:node\`; until then ./deltaserve runs on ${process.version}`);
  process.exit(1);
}
say(`Node ${version} installed: ${bin}`);
