// Both supported Node versions. `npm ci` installs Node 24 into tools/node24 (scripts/install-
// node24.mjs) and ./deltaserve, npm start and npm test run on it (scripts/node.sh); Node 20
// must keep working (engines >= 20). This file runs the kernel suites on the version the
// suite is NOT running on: on Node 20 when the suite runs on 24 (the system `node`, else
// .cache/node20 from `npm run test:setup`), on Node 24 when it runs on 20.
// Node 24's V8 lowers the relaxed i8×i7 dot-add to AVX-VNNI where the CPU has it, so there the
// default build is `vnni` and Q8_0 packs into q8u4 (exact only under that lowering): the
// suites check it against the ref twin bit for bit, and the quantized GGUF files end to end;
// on Node 20 (or a CPU without AVX-VNNI) they check the fma build and q8x4.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT } from './paths.js';

const SUITES = ['wasm-variant', 'quant-kernel-families', 'quant-matmul', 'quant-formats', 'kernels-invariance', 'gguf-quant'];
const major = (v: string): number => Number(/^v?(\d+)\./.exec(v)?.[1] ?? NaN);
const CURRENT = major(process.version);
const PLATFORM_PKG = `node-${process.platform}-${process.arch}`;
const NODE24_PACKAGES = (JSON.parse(readFileSync(join(REPO_ROOT, 'tools', 'node24', 'package.json'), 'utf8')) as { optionalDependencies: Record<string, string> }).optionalDependencies;
const TOOLS_NODE24 = join(REPO_ROOT, 'tools', 'node24', 'node_modules', PLATFORM_PKG, 'bin', 'node');

/** `node --version` of a binary, or null when it does not run. */
function versionOf(bin: string): string | null {
  const r = spawnSync(bin, ['--version'], { encoding: 'utf8' });
  return r.status === 0 ? r.stdout.trim() : null;
}

/** Environment for a child Node: no test-runner context, no launcher override. */
function childEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env['NODE_TEST_CONTEXT']; // a nested runner would report to ours instead of stdout
  delete env['DELTASERVE_NODE'];
  return env;
}

/** The other supported Node: [binary, version], or a reason why there is none. */
function otherNode(): { bin: string; version: string } | { missing: string } {
  if (CURRENT >= 24) {
    const candidates = [process.env['DELTASERVE_NODE20'], process.env['npm_node_execpath'], 'node',
      join(REPO_ROOT, '.cache', 'node20', 'node_modules', PLATFORM_PKG, 'bin', 'node')];
    for (const bin of candidates) {
      const v = bin ? versionOf(bin) : null;
      if (bin && v && major(v) === 20) return { bin, version: v };
    }
    return { missing: `no Node 20 found (system node, .cache/node20, $DELTASERVE_NODE20): run \`npm run test:setup\`` };
  }
  for (const bin of [TOOLS_NODE24, 'node']) {
    const v = existsSync(bin) || bin === 'node' ? versionOf(bin) : null;
    if (v && major(v) >= 24) return { bin, version: v };
  }
  return { missing: `${TOOLS_NODE24} is missing: run \`npm ci\` (its prepare script installs Node 24) or \`npm run setup:node\`` };
}

test(`the kernel suites on the other Node version (this one is ${process.version}): variant probe, quantized kernel families == ref, quantized GGUF files end to end`, () => {
  const other = otherNode();
  assert.ok('bin' in other, 'missing' in other ? other.missing : '');
  const probe = spawnSync(other.bin, ['--input-type=module', '-e',
    `import { chooseVariant } from '${join(REPO_ROOT, 'dist/src/kernels/wasm/module.js')}'; process.stdout.write(chooseVariant().variant);`], { encoding: 'utf8' });
  assert.equal(probe.status, 0, probe.stderr);
  const r = spawnSync(other.bin, ['--test', '--test-reporter=spec', ...SUITES.map((s) => join(REPO_ROOT, 'dist', 'test', `${s}.test.js`))],
    { encoding: 'utf8', cwd: REPO_ROOT, env: childEnv(), timeout: 600_000 });
  const summary = r.stdout.split('\n').filter((l) => /^ℹ (tests|pass|fail)/.test(l)).join(', ');
  process.stderr.write(`node-versions: Node ${other.version}, default build ${probe.stdout}; ${summary}\n`);
  assert.equal(r.status, 0, `${summary}\n${r.stdout.split('\n').filter((l) => l.includes('✖')).slice(0, 20).join('\n')}\n${r.stderr.slice(-2000)}`);
  assert.match(r.stdout, /^ℹ fail 0$/m);
});

test('./deltaserve runs on Node 24 by default, and on the Node that DELTASERVE_NODE names', { skip: NODE24_PACKAGES[PLATFORM_PKG] ? false : `the npm registry has no Node 24 package for ${PLATFORM_PKG}` }, () => {
  const launcher = join(REPO_ROOT, 'deltaserve');
  const byDefault = spawnSync(launcher, ['--version'], { encoding: 'utf8', env: childEnv() });
  assert.equal(byDefault.status, 0, byDefault.stderr);
  const systemVersion = versionOf('node') ?? 'none';
  assert.match(byDefault.stdout, /^deltaserve \S+ \(node v(\d+)\.\d+\.\d+\)\n$/);
  assert.ok(major(/\(node (v[\d.]+)\)/.exec(byDefault.stdout)![1]!) >= 24,
    `./deltaserve ran ${byDefault.stdout.trim()} (system node ${systemVersion}): ${existsSync(TOOLS_NODE24) ? '' : `${TOOLS_NODE24} is missing: run \`npm ci\` or \`npm run setup:node\``}`);
  const env = { ...childEnv(), DELTASERVE_NODE: process.execPath };
  const chosen = spawnSync(launcher, ['--version'], { encoding: 'utf8', env });
  assert.equal(chosen.status, 0, chosen.stderr);
  assert.match(chosen.stdout, new RegExp(`\\(node ${process.version.replaceAll('.', '\\.')}\\)\\n$`));
});
