// The golden prompt logits on webgpu (Dawn on the machine's adapter; lavapipe without a GPU):
// - `generate --kernels webgpu --json --dump-logits` as a process awaits webgpu's
//   asynchronous read-back (issue 47): on the shortest golden prompt its last_logits and
//   mtp_top match ../shared/golden/tiny-think.json (the golden tests' tolerance, 1e-4
//   relative to the largest logit), and its greedy ids equal the wasm process's. The
//   shortest: lavapipe's prefill costs ~0.07 s CPU a prompt token, and the longer prompts'
//   numbers (past 64 positions: attention over more than one tile) are the engine check's
//   below (the same probe code the process runs);
// - the golden prompts of ENGINE_PROMPTS (67, 171 and 264 tokens: attention over 2, 3 and 5
//   64-position tiles, past 128 and past 256 positions) through one webgpu engine in this
//   process (the probe the CLI's dump runs): the same golden checks against the golden and
//   one wasm engine. Left to others: 22 tokens (one tile) is the process check's above, and
//   39 (one tile) and 89 (two tiles, as 67) add no position range; their probes cost ~25
//   CPU-s (webgpu-device-picks checks the 39-token prompt's greedy ids on webgpu). One
//   engine load instead of a process per prompt: each webgpu process pays
//   Dawn's start-up and lavapipe's shader compiles. The greedy run before the probe (its
//   first GREEDY_TOKENS ids == wasm's == a prefix of the golden) is the longest prompt's
//   alone (264 tokens: its steps, MTP verify blocks at the default k = 3, attend past 256
//   positions); the other prompts' probes are fed the golden's first id, and that id must
//   be the argmax of the webgpu last logits. webgpu-device-picks checks the three shortest
//   prompts' greedy ids (10-11 ids, the third past 64 positions). A greedy run prefills its
//   prompt a second time (lavapipe: ~0.1 CPU-s a prompt token): the middle two prompts'
//   runs (89 and 171 tokens, for 3 and 1 ids past their first) cost ~35 CPU-s, left out.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Engine } from '../src/engine/engine.js';
import { topLogits } from '../src/model/probe.js';
import { withEngine } from './engine-helpers.js';
import { REPO_ROOT, sharedPath, TINY_THINK } from './paths.js';
import { relErr } from './numeric.js';
import { GOLDEN_TOL, type GoldenPrompt } from './golden-check.js';
import { webgpuEngineKernels } from './webgpu-helpers.js';

interface Dump { output_ids: number[]; last_logits: number[]; mtp_top: [number, number][] | null }
/** An engine dump: also each greedy step's logits row (none without the greedy run). */
interface EngineDump extends Dump { step_logits: Float32Array[] }

const TOL = GOLDEN_TOL;
const GREEDY_TOKENS = 4;
const tokens = (p: GoldenPrompt): number => Math.min(GREEDY_TOKENS, p.greedy_ids.length);

/** One greedy `generate --json --dump-logits` process of `p` on `kernels`. */
function cliDump(kernels: string, p: GoldenPrompt): Dump {
  const args = ['generate', '--model', TINY_THINK(), '--kernels', kernels, '--prompt-ids', p.prompt_ids.join(','),
    '--max-tokens', String(tokens(p)), '--temperature', '0', '--json', '--dump-logits'];
  const r = spawnSync(process.execPath, [join(REPO_ROOT, 'dist', 'src', 'cli', 'main.js'), ...args], { encoding: 'utf8' });
  assert.equal(r.status, 0, `generate --kernels ${kernels}: ${r.stderr}`);
  return JSON.parse(r.stdout) as Dump;
}

/** The same dump through a loaded engine: the greedy run, its steps' logits rows captured
 * (unless `greedy` is false: then output_ids is the last logits' argmax, the probe fed the
 * golden's first id), then the CLI's prompt probe. */
async function engineDump(e: Engine, p: GoldenPrompt, greedy: boolean): Promise<EngineDump> {
  const steps: Float32Array[] = [];
  const out = greedy ? [...(await e.complete({ promptIds: p.prompt_ids, maxTokens: tokens(p), temperature: 0, ignoreEos: true,
    captureLogits: (l) => steps.push(l.slice()) })).outputIds] : null;
  const probe = await e.info.probePrompt(p.prompt_ids, out?.[0] ?? p.greedy_ids[0]);
  const lastLogits = Array.from(probe.lastLogits);
  const argmax = lastLogits.reduce((best, v, i) => (v > lastLogits[best]! ? i : best), 0);
  return { output_ids: out ?? [argmax], last_logits: lastLogits, mtp_top: probe.mtpLogits ? topLogits(probe.mtpLogits, 10) : null, step_logits: steps };
}

/** Each greedy step's logits: webgpu == wasm within the golden tolerance. Ids alone miss a
 * step's attention reading too few positions (verify blocks capped at 128 of 264: the ids
 * held, the rows moved by 3e-3 of their scale). */
function checkSteps(gpu: EngineDump, cpu: EngineDump, p: GoldenPrompt): void {
  assert.equal(gpu.step_logits.length, cpu.step_logits.length, `${p.name}: greedy steps captured`);
  gpu.step_logits.forEach((row, i) => {
    const err = relErr(row, cpu.step_logits[i]!);
    assert.ok(err <= TOL, `${p.name}: greedy step ${i} logits: webgpu vs wasm rel err ${err}`);
  });
}

/** A webgpu dump against the golden prompt and a wasm dump of it. */
function checkDump(gpu: Dump, cpu: Dump, p: GoldenPrompt): void {
  assert.equal(gpu.last_logits.length, p.last_logits.length, `${p.name}: last_logits over vocab_size`);
  const err = relErr(gpu.last_logits, p.last_logits);
  assert.ok(err <= TOL, `${p.name}: last logits rel err ${err}`);
  assert.ok(gpu.mtp_top, `${p.name}: tiny-think has an MTP head: mtp_top present`);
  assert.deepEqual(gpu.mtp_top.map(([id]) => id), p.mtp_logits_top.map(([id]) => id), `${p.name}: MTP top-10 ids`);
  const maxAbs = Math.max(...p.mtp_logits_top.map(([, v]) => Math.abs(v)));
  for (const [i, [id, v]] of p.mtp_logits_top.entries()) {
    assert.ok(Math.abs(gpu.mtp_top[i]![1] - v) / maxAbs <= TOL, `${p.name}: MTP logit ${id}: ${gpu.mtp_top[i]![1]} vs ${v}`);
  }
  assert.deepEqual(gpu.output_ids, cpu.output_ids, `${p.name}: greedy ids: webgpu == wasm`);
  assert.deepEqual(gpu.output_ids, p.greedy_ids.slice(0, gpu.output_ids.length), `${p.name}: greedy ids: a prefix of the golden`);
  assert.ok(relErr(gpu.last_logits, cpu.last_logits) <= TOL, `${p.name}: webgpu last logits == wasm`);
}

const golden = JSON.parse(readFileSync(sharedPath('golden', 'tiny-think.json'), 'utf8')) as { prompts: GoldenPrompt[] };
assert.ok(golden.prompts.length > 0, 'tiny-think golden has prompts');
const byLength = [...golden.prompts].sort((a, b) => a.prompt_ids.length - b.prompt_ids.length);
const shortest = byLength[0]!;
/** The prompt whose webgpu greedy run is checked here (see the header). */
const longest = byLength.at(-1)!;
/** The prompts of the engine check (see the header): 2, 3 and 5 tiles of attention. */
const ENGINE_PROMPTS = ['recall-zeroshot-think', 'mcq-fewshot-nothink', 'recall-fewshot-think'];
const enginePrompts = byLength.filter((p) => ENGINE_PROMPTS.includes(p.name));
assert.deepEqual(enginePrompts.map((p) => Math.ceil(p.prompt_ids.length / 64)), [2, 3, 5], 'the engine prompts span 2, 3 and 5 tiles');
assert.ok(enginePrompts.includes(longest), 'the longest prompt is the engine check\'s');

test(`generate --kernels webgpu --dump-logits (a process): ${shortest.name} matches the golden and the wasm process`, { timeout: 240_000 }, () => {
  checkDump(cliDump('webgpu', shortest), cliDump('wasm', shortest), shortest);
});

test('the golden prompts past one tile on one webgpu engine: the dump matches the golden and one wasm engine', { timeout: 600_000 }, async () => {
  await webgpuEngineKernels(); // fails with the reason when no adapter can be had
  const opts = { model: TINY_THINK(), prefixCache: false, maxRunning: 1 };
  assert.ok(longest.prompt_ids.length > 256, `the greedy run here decodes past 256 positions (${longest.name}: ${longest.prompt_ids.length} tokens)`);
  const run = (e: Engine): Promise<EngineDump[]> => enginePrompts.reduce<Promise<EngineDump[]>>(
    async (acc, p) => [...await acc, await engineDump(e, p, p === longest)], Promise.resolve([]));
  const gpu = await withEngine({ ...opts, kernels: 'webgpu' }, run);
  const cpu = await withEngine({ ...opts, kernels: 'wasm' }, run);
  enginePrompts.forEach((p, i) => checkDump(gpu[i]!, cpu[i]!, p));
  const at = enginePrompts.indexOf(longest);
  assert.equal(gpu[at]!.step_logits.length, tokens(longest), `${longest.name}: a logits row per greedy step`);
  checkSteps(gpu[at]!, cpu[at]!, longest);
});
