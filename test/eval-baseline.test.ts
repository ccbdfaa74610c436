// `deltaserve eval --compare-spec` on the three public eval sets reproduces the reference
// accuracy of ../shared/eval/baseline.json within ±1 item per task, with identical outputs
// MTP off and on. Full sets (300 items, twice) on the wasm kernels (about 2 minutes on 2
// cores; `npm run build` builds them — a missing build fails loudly);
// DELTASERVE_EVAL_BASELINE=ref asks for the (much slower) reference kernels.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { EvalResult } from '../src/cli/eval.js';
import { REPO_ROOT, sharedPath, TINY_THINK } from './paths.js';

const kernels = process.env['DELTASERVE_EVAL_BASELINE'] === 'ref' ? 'ref' : 'wasm';

test('eval --compare-spec reproduces baseline.json (±1 item per task), identical outputs MTP off/on',
  { timeout: 3_600_000 },
  () => {
    assert.ok(kernels === 'ref' || existsSync(join(REPO_ROOT, 'build', 'kernels.wasm')), 'build/kernels.wasm is missing: run npm run build');
    const baseline = JSON.parse(readFileSync(sharedPath('eval', 'baseline.json'), 'utf8')) as { accuracy: Record<string, number>; n: Record<string, number> };
    const sets = Object.keys(baseline.accuracy).map((t) => sharedPath('eval', `${t}.public.jsonl`));
    const r = spawnSync(process.execPath, [join(REPO_ROOT, 'dist', 'src', 'cli', 'main.js'), 'eval', '--data', ...sets,
      '--compare-spec', '--spec-tokens', '3', '--max-tokens', '128', '--model', TINY_THINK(), '--kernels', kernels], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    const out = JSON.parse(r.stdout) as EvalResult;
    for (const [task, acc] of Object.entries(baseline.accuracy)) {
      const t = out.tasks[task]!;
      const n = baseline.n[task]!;
      assert.equal(t.n, n, task);
      assert.ok(Math.abs(Math.round(t.accuracy * n) - Math.round(acc * n)) <= 1, `${task}: accuracy ${t.accuracy} vs baseline ${acc}`);
      assert.ok(Math.abs(Math.round(t.accuracy_spec! * n) - Math.round(acc * n)) <= 1, `${task}: accuracy_spec ${t.accuracy_spec} vs baseline ${acc}`);
      assert.equal(t.identical_fraction, 1, `${task}: outputs differ with MTP on`);
    }
    assert.equal(out.spec.tokens, 3);
    assert.ok(out.spec.accept_len_mean! > 1, `accept_len_mean ${out.spec.accept_len_mean}`);
  });
