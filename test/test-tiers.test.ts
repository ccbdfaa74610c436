// The test tiers (scripts/test-tiers.mjs): every test file is in exactly one tier, a file no
// tier names lands in the default (middle) tier, and the table's mistakes are errors.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { REPO_ROOT } from './paths.js';

interface Tier { name: string; concurrency: number; files: string[]; alone?: string[]; slowFirst?: string[]; fileEnv?: { files: string[]; env: Record<string, string> }[] }
interface TiersModule {
  TIERS: Tier[];
  DEFAULT_TIER: string;
  assignTiers(names: string[], tiers?: Tier[]): { byTier: Map<string, string[]>; errors: string[] };
  fileEnvOf(tier: Tier, name: string): Record<string, string>;
}
const load = async (): Promise<TiersModule> => await import(pathToFileURL(join(REPO_ROOT, 'scripts', 'test-tiers.mjs')).href) as TiersModule;

test('every compiled test file is in exactly one tier (run-tests --check)', () => {
  const r = spawnSync(process.execPath, [join(REPO_ROOT, 'scripts', 'run-tests.mjs'), '--check'], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /each in exactly one tier \(fast \d+, main \d+, system \d+\)/);
});

test('tiers run fast → main → system; an unlisted file lands in main; mistakes in the table are errors', async () => {
  const { TIERS, DEFAULT_TIER, assignTiers } = await load();
  assert.deepEqual(TIERS.map((t) => t.name), ['fast', 'main', 'system']);
  assert.equal(DEFAULT_TIER, 'main');
  const table: Tier[] = [
    { name: 'fast', concurrency: 2, files: ['a', 'b*'], slowFirst: ['a'] },
    { name: 'main', concurrency: 2, files: [], alone: ['c'] },
    { name: 'system', concurrency: 1, files: ['sys-*'] },
  ];
  const ok = assignTiers(['a', 'b1', 'b2', 'c', 'new-file', 'sys-x'], table);
  assert.deepEqual(ok.errors, []);
  assert.deepEqual(Object.fromEntries(ok.byTier), { fast: ['a', 'b1', 'b2'], main: ['c', 'new-file'], system: ['sys-x'] });
  const twice = assignTiers(['a', 'b1', 'c', 'sys-x'], [...table.slice(0, 2), { name: 'system', concurrency: 1, files: ['sys-*', 'b1'] }]);
  assert.ok(twice.errors.some((e) => e.startsWith('b1.test.ts is in 2 tiers (fast, system)')), twice.errors.join('\n'));
  const stale = assignTiers(['b1', 'c', 'sys-x'], table);
  assert.ok(stale.errors.some((e) => e.includes("files entry 'a' matches no test file")), stale.errors.join('\n'));
  assert.ok(stale.errors.some((e) => e.includes("slowFirst entry 'a' matches no test file")), stale.errors.join('\n'));
  const misplaced = assignTiers(['a', 'b1', 'c', 'sys-x'], [table[0]!, { name: 'main', concurrency: 2, files: [], alone: ['a'] }, table[2]!]);
  assert.ok(misplaced.errors.some((e) => e.includes("alone entry 'a' names a file of another tier")), misplaced.errors.join('\n'));
  assert.ok(assignTiers(['a'], [table[0]!]).errors.some((e) => e.includes("default tier 'main' is not defined")));
});

test('fileEnv: a tier gives some files environment variables; a stale or misplaced entry is an error', async () => {
  const { TIERS, assignTiers, fileEnvOf } = await load();
  const sys: Tier = { name: 'system', concurrency: 2, files: ['gpu-*', 'other'],
    fileEnv: [{ files: ['gpu-fold*'], env: { A: '1' } }, { files: ['gpu-fold-q'], env: { B: '2' } }] };
  const main: Tier = { name: 'main', concurrency: 2, files: [] };
  assert.deepEqual(fileEnvOf(sys, 'gpu-fold-q'), { A: '1', B: '2' });
  assert.deepEqual(fileEnvOf(sys, 'gpu-fold'), { A: '1' });
  assert.deepEqual(fileEnvOf(sys, 'other'), {});
  assert.deepEqual(assignTiers(['gpu-fold', 'gpu-fold-q', 'other'], [main, sys]).errors, []);
  const stale = assignTiers(['gpu-fold', 'other'], [main, sys]);
  assert.ok(stale.errors.some((e) => e.includes("fileEnv entry 'gpu-fold-q' matches no test file")), stale.errors.join('\n'));
  const misplaced = assignTiers(['gpu-fold', 'gpu-fold-q', 'other', 'x'], [{ ...main, fileEnv: [{ files: ['gpu-fold'], env: {} }] }, sys]);
  assert.ok(misplaced.errors.some((e) => e.includes("fileEnv entry 'gpu-fold' names a file of another tier")), misplaced.errors.join('\n'));
  // the real table: every lavapipe file gets llvmpipe's 4-wide vectors and a GPU's launch
  // profile (one shader cache); the dry-run bench keeps the adapter's; others get nothing
  const system = TIERS.find((t) => t.name === 'system')!;
  const lavapipe = { LP_NATIVE_VECTOR_WIDTH: '128', DELTASERVE_LAUNCHES: 'gpu' };
  for (const name of ['webgpu-conv-fold-quant', 'webgpu-spec-match', 'vision-webgpu']) assert.deepEqual(fileEnvOf(system, name), lavapipe, name);
  assert.deepEqual(fileEnvOf(system, 'gpu-bench-script'), {});
  assert.deepEqual(fileEnvOf(system, 'node-versions'), {});
});
