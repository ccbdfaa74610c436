// Greedy picks on the device (engine/device-picks.ts, Kernels.argmaxRows): a greedy request
// without penalties, bias, constraint, logprobs or logits capture takes the argmax on the
// GPU and its step reads back ids, not logits rows. Two paths that must agree:
// - webgpu device-picked ids == the wasm engine's ids (golden prompts), MTP off and on;
// - on webgpu, the device pick == the host pick over the same logits (a capture request
//   takes the host path), and every request of a mixed batch (device and host rows) == alone;
// - the read-back carries exactly one id instead of one vocabulary row per sampled token;
// - MTP drafts chain on the device: a round (k drafts + verify) reads back at most twice;
// - a constrained greedy request picks under its grammar mask on the device (argmaxRowsMasked)
//   == the host path (mask on read-back logits) == wasm;
// - greedy requests with penalties or logit bias pick on the device over their untouched ids,
//   the host finishing from the touched ids' logits (engine/device-finish.ts) == the host
//   path == wasm, reading back a few values per step instead of a row; their MTP drafts
//   chain on the device (== the drafts picked on the host, the hostDrafts hook), the
//   penalised one's f32 picks replayed exactly on the host: 2 read-backs a round.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { Engine } from '../src/engine/engine.js';
import type { GenerateRequest } from '../src/engine/request-builder.js';
import type { WebGpuBoundaryKernels } from '../src/kernels/webgpu/kernels.js';
import { withEngine } from './engine-helpers.js';
import { sharedPath, TINY_THINK } from './paths.js';
import { webgpuEngineKernels } from './webgpu-helpers.js';
import { draftRecorder, type DraftRun } from './draft-record.js';
import type { Constraint } from '../src/constrain/constraint.js';
import type { ServerContext } from '../src/server/context.js';
import { TokenTexts } from '../src/server/api/logprobs.js';
import { structuredConstraint } from '../src/server/api/structured.js';

/** The chat route's JSON-schema constraint over an engine (thinking off). */
function constraintFor(engine: Engine, schema: unknown): Constraint {
  const ctx = { engine, texts: new TokenTexts(engine.tokenizer) } as unknown as ServerContext;
  return structuredConstraint(ctx, { kind: 'json_schema', name: 't', schema }, null, false)!;
}

const gpu = { kernels: 'webgpu' as const, specAdaptive: false, kvCacheTokens: 2048, maxContext: 1024, prefixCache: false, maxRunning: 8 };
const cpu = { ...gpu, kernels: 'wasm' as const };

type Golden = { name: string; prompt_ids: number[]; greedy_ids: number[] };
const goldenPrompts = (): Golden[] =>
  (JSON.parse(readFileSync(sharedPath('golden', 'tiny-think.json'), 'utf8')) as { prompts: Golden[] }).prompts;
/** The `n` shortest golden prompts (22, 39, 67 tokens), for the golden ids: lavapipe's
 * prefill costs ~0.12 CPU-s a prompt token (as much as a decode step); every golden prompt,
 * the longest included, runs on webgpu in webgpu-dump-logits. */
const shortest = (n: number): Golden[] => {
  const got = [...goldenPrompts()].sort((a, b) => a.prompt_ids.length - b.prompt_ids.length).slice(0, n);
  assert.equal(got.length, n, `tiny-think's golden has ${n} prompts`);
  return got;
};
/** The first BRIEF_TOKENS ids of the `n` shortest golden prompts (`<|im_start|>user\n` and
 * the start of their text; distinct prompts), for the checks that compare two paths over the
 * same prompt, where no golden id is asserted and no check depends on a prompt's length: each
 * of these tests was most of its CPU in prefill on the 22/39-token golden prompts. With these
 * ids the repetition penalty of prompt ids changes the picks (a device finish that leaves the
 * prompt ids untouched fails the penalties test; ids 3..11 of the text did not catch it), and
 * every plain greedy pick wins by ≥ 2 % of the row's scale (wasm). */
const BRIEF_TOKENS = 8;
const brief = (n: number): number[][] => {
  const got = shortest(n).map((p) => p.prompt_ids.slice(0, BRIEF_TOKENS));
  assert.equal(new Set(got.map((ids) => ids.join())).size, n, 'distinct brief prompts');
  return got;
};
/** The first 8 plain greedy ids (MTP off, wasm) of the two brief prompts: a greedy row's
 * ids alone, and the ids a logit bias must change. */
let plainBrief: Promise<number[][]> | null = null;
const plainGreedyBrief = (): Promise<number[][]> =>
  (plainBrief ??= withEngine({ ...cpu, model: TINY_THINK(), specTokens: 0 }, (e) => ids(e, brief(2).map((promptIds) => ({ promptIds, maxTokens: 8, ignoreEos: true })))));

/** The MTP drafts' recorder of the shared k = 3 engine (its hooks change nothing until a
 * run asks for host drafts). */
const rec = draftRecorder();
const sharedEngines = new Map<number, Promise<Engine>>();
/**
 * The file's webgpu engine with `specTokens` (0 or 3), loaded on first use and closed after
 * the last test: each load compiles every pipeline again on lavapipe. Every test runs its
 * requests on it one after another or as one batch, counting around its own runs; with the
 * prefix cache off no request leaves state that another reads. Engines whose options a test
 * varies (k = 4; the wasm references) stay the test's own.
 */
function sharedGpu(specTokens: 0 | 3): Promise<Engine> {
  let e = sharedEngines.get(specTokens);
  if (!e) {
    e = Engine.load({ ...gpu, model: TINY_THINK(), specTokens }, specTokens > 0 ? rec.hooks : {});
    sharedEngines.set(specTokens, e);
  }
  return e;
}
after(async () => {
  for (const e of sharedEngines.values()) await (await e).close();
});

function counters(e: Engine): WebGpuBoundaryKernels['counters'] {
  const k = e.model.kernels as unknown as Partial<WebGpuBoundaryKernels>;
  assert.ok(k.counters, 'the engine runs on the webgpu backend');
  return k.counters;
}

async function ids(e: Engine, reqs: readonly GenerateRequest[]): Promise<number[][]> {
  return Promise.all(reqs.map(async (r) => [...(await e.complete(r)).outputIds]));
}

/** Lowest id of the maximum over [0, n) (NaN never wins): the host reference pick. */
function hostArgmax(v: Float32Array, n: number): number {
  let best = 0;
  for (let i = 1; i < n; i++) if (v[i]! > v[best]! || (v[best] !== v[best] && v[i] === v[i])) best = i;
  return best;
}

before(webgpuEngineKernels);

describe('greedy picks on the device', () => {
  test('webgpu device-picked ids == wasm ids == the golden ids on the golden prompts, MTP off and on (k = 3)', async () => {
    const prompts = shortest(3);
    // 11 ids: the whole golden continuation of recall-zeroshot-think (the third prompt)
    const reqs = prompts.map((p) => ({ promptIds: p.prompt_ids, maxTokens: Math.min(p.greedy_ids.length, 11), ignoreEos: true }));
    const want = await withEngine({ ...cpu, model: TINY_THINK(), specTokens: 0 }, (e) => ids(e, reqs));
    // the golden continuations on webgpu (once webgpu-engine's check, on the third prompt)
    assert.deepEqual(want, prompts.map((p, i) => p.greedy_ids.slice(0, reqs[i]!.maxTokens)), 'wasm == the golden');
    for (const specTokens of [0, 3] as const) assert.deepEqual(await ids(await sharedGpu(specTokens), reqs), want, `MTP k = ${specTokens}`);
  });

  test('a greedy step reads back its id, not its logits row; device pick == host pick', async () => {
    const [prompt] = brief(1);
    const n = 6;
    const e = await sharedGpu(0);
    const c = counters(e);
    const vocab = e.model.config.vocabSize;
    const measure = async (capture: boolean): Promise<{ out: number[]; logits: Float32Array[]; reads: number; bytes: number }> => {
      const logits: Float32Array[] = [];
      const [r0, b0] = [c.steps, c.readBackBytes];
      const done = await e.complete({ promptIds: prompt, maxTokens: n, ignoreEos: true,
        ...(capture ? { captureLogits: (l: Float32Array) => logits.push(l.slice()) } : {}) });
      return { out: [...done.outputIds], logits, reads: c.steps - r0, bytes: c.readBackBytes - b0 };
    };
    const host = await measure(true);
    const device = await measure(false);
    assert.deepEqual(device.out, host.out, 'device pick == host pick');
    assert.deepEqual(host.out, host.logits.map((l) => hostArgmax(l, e.sampleVocab)), 'host pick == the reference argmax');
    assert.equal(device.reads, host.reads, 'one read-back per step either way');
    assert.equal(device.bytes, 4 * device.reads, 'no prefix cache: a greedy step reads back its one id, nothing else');
    // the same hidden rows come back; each sampled token brings 1 id instead of a row
    assert.equal(host.bytes - device.bytes, n * (vocab - 1) * 4, 'read-back bytes: a row of logits → one id, per token');
  });

  test('MTP drafts picked on the device (ids read back) == drafts picked on the host: same acceptance, same ids', async () => {
    const reqs = brief(2).map((promptIds) => ({ promptIds, maxTokens: 8, ignoreEos: true }));
    // an empty logit bias changes no logit but sends the request down the host path
    const hostPath = reqs.map((r) => ({ ...r, logitsAdjust: { bias: new Map<number, number>() } }));
    const e = await sharedGpu(3);
    const run = async (rs: GenerateRequest[]): Promise<{ out: number[][]; drafted: number; accepted: number; reads: number }> => {
      const [s0, r0] = [e.stats().spec, counters(e).steps];
      const out = await ids(e, rs);
      const s1 = e.stats().spec;
      return { out, drafted: s1.drafted - s0.drafted, accepted: s1.accepted - s0.accepted, reads: counters(e).steps - r0 };
    };
    const device = await run(reqs);
    const host = await run(hostPath);
    assert.deepEqual(device.out, host.out);
    assert.ok(device.drafted > 0, 'the runs drafted');
    assert.deepEqual([device.drafted, device.accepted], [host.drafted, host.accepted], 'drafted, accepted');
    // device drafts chain on the device (one read-back per round's drafts); host drafts read back per draft step
    assert.ok(device.reads < host.reads, `read-backs: device ${device.reads} < host ${host.reads}`);
  });

  test('an MTP round (k drafts + verify) reads back at most twice, k = 4; the host-drafted round reads 1 + k', async () => {
    const req = { promptIds: brief(2)[1]!, maxTokens: 10, ignoreEos: true };
    const want = await withEngine({ ...cpu, model: TINY_THINK(), specTokens: 0, maxRunning: 1 }, (e) => ids(e, [req]));
    // k = 1 reads back twice on either path; the largest k bounds the rest: a read-back per
    // draft step, or a pass of fewer than k drafts, breaks it at k = 4 (the latter not at
    // k = 2, once a second engine here: ~14 CPU-s on lavapipe). MTP on == off at k = 2 on
    // webgpu: webgpu-engine's batch; at k = 3: the golden test above.
    for (const k of [4]) {
      await withEngine({ ...gpu, model: TINY_THINK(), specTokens: k, maxRunning: 1 }, async (e) => {
        const run = async (r: GenerateRequest): Promise<{ out: number[][]; rounds: number; reads: number; bytes: number }> => {
          const c = counters(e);
          const [s0, r0, b0] = [e.stats().spec.rounds, c.steps, c.readBackBytes];
          const out = await ids(e, [r]);
          return { out, rounds: e.stats().spec.rounds - s0, reads: c.steps - r0, bytes: c.readBackBytes - b0 };
        };
        const device = await run(req);
        const host = await run({ ...req, logitsAdjust: { bias: new Map<number, number>() } });
        assert.deepEqual(device.out, want, `k = ${k}: MTP on == off`);
        assert.deepEqual(host.out, want, `k = ${k}: host drafts, MTP on == off`);
        assert.ok(device.rounds > 0 && device.rounds === host.rounds, `k = ${k}: ${device.rounds} rounds`);
        // the prefill step and the draft after it read back once each; then every round ≤ 2
        const perRound = (device.reads - 2) / device.rounds;
        console.log(`# k=${k} rounds=${device.rounds} read-backs: device ${device.reads} (${perRound.toFixed(2)}/round) host ${host.reads}; bytes/read-back ${(device.bytes / device.reads).toFixed(0)}`);
        assert.ok(device.reads - 2 <= 2 * device.rounds, `k = ${k}: ${device.reads} read-backs for ${device.rounds} rounds`);
        assert.ok(host.reads - 2 > 2 * host.rounds, `k = ${k}: the host path reads back per draft step (${host.reads})`);
      });
    }
  });

  test('a constrained greedy request picks under its mask on the device (ids read back) == the host path == wasm, MTP off and on', async () => {
    const schema = { type: 'object', properties: { n: { type: 'integer' }, s: { type: 'string', maxLength: 6 } }, required: ['n', 's'] };
    const [prompt] = brief(1);
    // bias null: the mask is applied on the kernels; an empty bias: the host path, same logits
    const reqOf = (e: Engine, hostPath: boolean): GenerateRequest => ({
      promptIds: prompt, maxTokens: 14, temperature: 0, logitsAdjust: { bias: hostPath ? new Map<number, number>() : null, constraint: constraintFor(e, schema) },
    });
    const want = await withEngine({ ...cpu, model: TINY_THINK(), specTokens: 0 }, (e) => ids(e, [reqOf(e, true)]));
    const cpuDevice = await withEngine({ ...cpu, model: TINY_THINK(), specTokens: 0 }, (e) => ids(e, [reqOf(e, false)]));
    assert.deepEqual(cpuDevice, want, 'wasm: argmaxRowsMasked == the host mask + argmax');
    for (const specTokens of [0, 3] as const) {
      const e = await sharedGpu(specTokens);
      const c = counters(e);
      const run = async (hostPath: boolean): Promise<{ out: number[][]; reads: number; bytes: number }> => {
        const [r0, b0] = [c.steps, c.readBackBytes];
        const out = await ids(e, [reqOf(e, hostPath)]);
        return { out, reads: c.steps - r0, bytes: c.readBackBytes - b0 };
      };
      const device = await run(false);
      const host = await run(true);
      assert.deepEqual(device.out, want, `k = ${specTokens}: device masked picks`);
      assert.deepEqual(host.out, want, `k = ${specTokens}: host masked picks`);
      console.log(`# constrained k=${specTokens}: read-backs device ${device.reads} (${device.bytes} B) host ${host.reads} (${host.bytes} B)`);
      assert.ok(device.bytes * 100 < host.bytes, `k = ${specTokens}: ids, not logits rows (${device.bytes} vs ${host.bytes} bytes)`);
      if (specTokens === 0) assert.equal(device.bytes, 4 * device.reads, 'each step reads back its one id');
    }
  });

  // Each greedy row alone is known without running it on lavapipe: wasm's ids alone (webgpu's
  // greedy ids == wasm's: the first test, the penalties test below); the penalised row's alone
  // == wasm (the penalties test below checks webgpu alone == wasm); only the sampled row (a
  // seeded draw over webgpu's own logits) runs alone here.
  test('a mixed batch (device rows, host rows: logprobs, sampled, capture) == each request alone', async () => {
    const [a, b] = brief(2);
    const none = (): void => {};
    const reqs: GenerateRequest[] = [
      { promptIds: a!, maxTokens: 6, ignoreEos: true },
      { promptIds: b!, maxTokens: 6, ignoreEos: true, logprobs: { top: 2, onToken: none } },
      { promptIds: a!, maxTokens: 6, ignoreEos: true, temperature: 0.8, topK: 20, seed: 7 },
      { promptIds: b!, maxTokens: 6, ignoreEos: true, captureLogits: none },
      { promptIds: b!, maxTokens: 6, ignoreEos: true, repetitionPenalty: 1.3 },
    ];
    const [greedyA, greedyB] = (await plainGreedyBrief()).map((out) => out.slice(0, 6));
    const [penalisedAlone] = await withEngine({ ...cpu, model: TINY_THINK(), specTokens: 0 }, (e) => ids(e, [reqs[4]!]));
    assert.notDeepEqual(penalisedAlone, greedyB, 'the penalty changes the picks');
    const e = await sharedGpu(0);
    const [sampledAlone] = await ids(e, [reqs[2]!]);
    const alone = [greedyA!, greedyB!, sampledAlone!, greedyB!, penalisedAlone!];
    const batched = await ids(e, reqs);
    assert.deepEqual(batched, alone);
    assert.deepEqual(batched[1], batched[3], 'logprobs and capture (host picks) agree');
  });

  test('greedy with penalties / logit bias: device-finished picks == host path == wasm; a step reads back a few values, not a row', async () => {
    // the penalties change the second brief prompt's first pick, the first's 6th
    const [a, b] = brief(2);
    const [plainA, plainB] = await plainGreedyBrief();
    const n = 6;
    const reqs: GenerateRequest[] = [
      { promptIds: b!, maxTokens: n, ignoreEos: true, repetitionPenalty: 1.3, presencePenalty: 0.5, frequencyPenalty: 0.3 },
      // the bias pushes the plain run's 2nd token out and lifts its 3rd: the picks change
      { promptIds: a!, maxTokens: n, ignoreEos: true,
        logitsAdjust: { bias: new Map([[plainA![1]!, -100], [plainA![2]!, 3], [17, 1]]) } },
    ];
    const want = await withEngine({ ...cpu, model: TINY_THINK(), specTokens: 0, maxRunning: 1 }, (e) => ids(e, reqs));
    [plainB!, plainA!].forEach((plain, i) => assert.notDeepEqual(want[i], plain.slice(0, n), `request ${i}: the penalties / the bias change the picks`));
    const e = await sharedGpu(0);
    const c = counters(e);
    const vocab = e.model.config.vocabSize;
    for (const [i, r] of reqs.entries()) {
      const measure = async (capture: boolean): Promise<{ out: number[]; reads: number; bytes: number }> => {
        const [r0, b0] = [c.steps, c.readBackBytes];
        // a logits capture sends the request down the host path (its rows read back)
        const done = await e.complete({ ...r, ...(capture ? { captureLogits: () => undefined } : {}) });
        return { out: [...done.outputIds], reads: c.steps - r0, bytes: c.readBackBytes - b0 };
      };
      const host = await measure(true);
      const device = await measure(false);
      assert.deepEqual(device.out, host.out, `request ${i}: device-finished == host path`);
      assert.deepEqual(device.out, want[i], `request ${i}: == wasm`);
      assert.equal(device.reads, host.reads, 'one read-back per step either way');
      // per sampled token: id + its logit + the touched ids' logits (prompt, output, bias ids) instead of a row
      const touchedMax = (r.promptIds ?? []).length + n + 3;
      assert.ok(device.bytes <= n * 4 * (2 + touchedMax), `request ${i}: ${device.bytes} bytes read back for ${n} tokens`);
      assert.ok(host.bytes - device.bytes >= n * (vocab - 2 - touchedMax) * 4, 'a logits row per token no longer comes back');
      console.log(JSON.stringify({ request: i, tokens: n, hostBytes: host.bytes, deviceBytes: device.bytes, vocab }));
    }
  });

  test('MTP drafts of penalised / biased greedy requests: device-picked (+ host finish) == host-picked drafts, MTP on == off, no row read back', async () => {
    const [a, b] = brief(2);
    const [plainA, plainB] = await plainGreedyBrief();
    // both chain on the device: the penalised request's with f32 penalties, each pick replayed
    // exactly on the host (speculative/draft-device.ts), the biased one's (f32 values) as they
    // come: 2 read-backs a round (plus a redraft pass per disagreement, and a last plain step)
    const cases: { req: GenerateRequest }[] = [
      { req: { promptIds: b!, maxTokens: 8, ignoreEos: true, repetitionPenalty: 1.3, presencePenalty: 0.5, frequencyPenalty: 0.3 } },
      { req: { promptIds: a!, maxTokens: 8, ignoreEos: true, logitsAdjust: { bias: new Map([[plainA![1]!, -100], [plainA![2]!, 3]]) } } },
    ];
    // MTP off on wasm: the webgpu picks equal wasm's (the tests above), so MTP on == off here too
    const want = await withEngine({ ...cpu, model: TINY_THINK(), specTokens: 0, maxRunning: 1 }, (e) => ids(e, cases.map((c) => c.req)));
    [plainB!, plainA!].forEach((plain, i) => assert.notDeepEqual(want[i], plain, `request ${i}: the penalties / the bias change the picks`));
    // one k on lavapipe (the shared engine's); wasm covers k = 2..4 (greedy-finish-engine)
    const k = 3;
    const e = await sharedGpu(k);
    const run = async (req: GenerateRequest, hostDrafts: boolean): Promise<DraftRun> => {
      const [s0, b0] = [counters(e).steps, counters(e).readBackBytes];
      const r = await rec.run(e, [req], hostDrafts);
      assert.deepEqual([counters(e).steps - s0, counters(e).readBackBytes - b0], [r.reads, r.bytes], 'the recorder counts what the backend counts');
      return r;
    };
    for (const [i, { req }] of cases.entries()) {
      const disagreed = e.penaltyDrafts.disagreements;
      const [device, host] = [await run(req, false), await run(req, true)];
      const what = `k = ${k}, request ${i}`;
      assert.deepEqual(device.out, [want[i]], `${what}: MTP on == off`);
      assert.deepEqual(host.out, [want[i]], `${what}: host drafts, MTP on == off`);
      assert.ok(device.drafts.some((d) => d.length > 2), `${what}: the request drafted`);
      assert.deepEqual(device.drafts, host.drafts, `${what}: device draft ids == host draft ids`);
      assert.ok(device.reads <= 2 * device.rounds + 2 + (e.penaltyDrafts.disagreements - disagreed), `${what}: ${device.reads} read-backs for ${device.rounds} rounds: 2 a round`);
      assert.ok(host.longest >= e.sampleVocab && device.longest < e.sampleVocab, `${what}: longest range ${device.longest} (host path ${host.longest})`);
      console.log(`# ${i === 0 ? 'penalised (chained, replayed)' : 'biased (chained)'} drafts k=${k} rounds=${device.rounds}: read-backs device ${device.reads} host ${host.reads}, bytes device ${device.bytes} (${(device.bytes / device.rounds).toFixed(0)}/round) host ${host.bytes} (${(host.bytes / host.rounds).toFixed(0)}/round)`);
    }
  });
});
