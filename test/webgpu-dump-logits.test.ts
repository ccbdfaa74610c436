// `generate --kernels webgpu --json --dump-logits` as a process (Dawn on the machine's adapter;
// lavapipe without a GPU): the dump awaits webgpu's asynchronous read-back (issue 47), its
// last_logits and mtp_top match ../shared/golden/tiny-think.json (the golden tests'
// tolerance, 1e-4 relative to the largest logit), and its greedy ids equal the wasm run's.
// Every golden prompt (22 to 264 tokens: both attention kernels) is dumped, each generating
// only its first GREEDY_TOKENS ids: the dump is of the prompt, and longer webgpu greedy runs
// are webgpu-engine's and webgpu-device-picks' checks (a process here pays Dawn's start-up
// and lavapipe's shader compiles, ~30 s on a loaded 2-core machine).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT, sharedPath, TINY_THINK } from './paths.js';
import { relErr } from './numeric.js';
import { GOLDEN_TOL, type GoldenPrompt } from './golden-check.js';

interface Dump { output_ids: number[]; last_logits: number[]; mtp_top: [number, number][] | null }

const TOL = GOLDEN_TOL;
const GREEDY_TOKENS = 4;

/** One greedy `generate --json --dump-logits` run of `p` on `kernels`. */
function dump(kernels: string, p: GoldenPrompt): Dump {
  const args = ['generate', '--model', TINY_THINK(), '--kernels', kernels, '--prompt-ids', p.prompt_ids.join(','),
    '--max-tokens', String(Math.min(GREEDY_TOKENS, p.greedy_ids.length)), '--temperature', '0', '--json', '--dump-logits'];
  const r = spawnSync(process.execPath, [join(REPO_ROOT, 'dist', 'src', 'cli', 'main.js'), ...args], { encoding: 'utf8' });
  assert.equal(r.status, 0, `generate --kernels ${kernels}: ${r.stderr}`);
  return JSON.parse(r.stdout) as Dump;
}

const golden = JSON.parse(readFileSync(sharedPath('golden', 'tiny-think.json'), 'utf8')) as { prompts: GoldenPrompt[] };
assert.ok(golden.prompts.length > 0, 'tiny-think golden has prompts');

for (const p of golden.prompts) {
  test(`generate --kernels webgpu --dump-logits: ${p.name} matches the golden and the wasm run`, { timeout: 240_000 }, () => {
    const gpu = dump('webgpu', p);
    assert.equal(gpu.last_logits.length, p.last_logits.length, 'last_logits over vocab_size');
    const err = relErr(gpu.last_logits, p.last_logits);
    assert.ok(err <= TOL, `last logits rel err ${err}`);
    assert.ok(gpu.mtp_top, 'tiny-think has an MTP head: mtp_top present');
    assert.deepEqual(gpu.mtp_top.map(([id]) => id), p.mtp_logits_top.map(([id]) => id), 'MTP top-10 ids');
    const maxAbs = Math.max(...p.mtp_logits_top.map(([, v]) => Math.abs(v)));
    for (const [i, [id, v]] of p.mtp_logits_top.entries()) {
      assert.ok(Math.abs(gpu.mtp_top[i]![1] - v) / maxAbs <= TOL, `MTP logit ${id}: ${gpu.mtp_top[i]![1]} vs ${v}`);
    }
    const cpu = dump('wasm', p);
    assert.deepEqual(gpu.output_ids, cpu.output_ids, 'greedy ids: webgpu == wasm');
    assert.deepEqual(gpu.output_ids, p.greedy_ids.slice(0, gpu.output_ids.length), 'greedy ids: a prefix of the golden');
    assert.ok(relErr(gpu.last_logits, cpu.last_logits) <= TOL, 'webgpu last logits == wasm');
  });
}
