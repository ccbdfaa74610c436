// bench --mode mtp (cli/bench-mtp.ts) and its simulated acceptance
// (engine/speculative/accept-rate.ts): the per-position draws agree with P; at P = 0 no draft
// is accepted and at P = 1 every one is; every run's outputs equal MTP off (the bench
// checks and reports it); the real MTP head's run is measured too.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { acceptRateDrafts, positionDraw } from '../src/engine/speculative/accept-rate.js';
import { mtpRoundPhases, parseAcceptRates, runMtpBench, withPhases } from '../src/cli/bench-mtp.js';
import { createKernels } from '../src/kernels/index.js';
import { loadModel } from '../src/model/model.js';
import { TINY_THINK } from './paths.js';

test('positionDraw: reproducible, and a rate of P agrees on ≈ P of 20,000 positions', () => {
  assert.equal(positionDraw(7, 123, 45), positionDraw(7, 123, 45));
  assert.notEqual(positionDraw(7, 123, 45), positionDraw(7, 123, 46));
  for (const p of [0.6, 0.8, 0.9]) {
    let agree = 0;
    for (let pos = 0; pos < 20_000; pos++) if (positionDraw(1, 99, pos) < p) agree++;
    assert.ok(Math.abs(agree / 20_000 - p) < 0.015, `P = ${p}: ${agree / 20_000}`);
  }
});

test('acceptRateDrafts: the target token or another id, by position; model drafts kept past the recording', () => {
  const target = [5, 6, 7, 8];
  const prompt = [1, 2];
  const sim = (rate: number) => acceptRateDrafts({ rate, seed: 3, vocab: 9, targetOf: (ids) => (ids.join() === '1,2' ? target : undefined) });
  const req = { promptIds: prompt, tokens: [1, 2, 5] }; // one output token committed: drafts are for outputs 1..
  assert.deepEqual(sim(1)(req, [0, 0, 0, 0]), [6, 7, 8, 0], 'P = 1: the target; past it, the model draft');
  assert.deepEqual(sim(0)(req, [0, 0, 0]), [7, 8, 0], 'P = 0: (target + 1) mod vocab');
  assert.deepEqual(sim(1)({ promptIds: [4], tokens: [4] }, [3, 3]), [3, 3], 'unknown prompt: the model drafts');
  assert.throws(() => acceptRateDrafts({ rate: 1.5, seed: 0, vocab: 9, targetOf: () => undefined }), /\[0, 1\]/);
});

test('parseAcceptRates: real and rates; a bad entry is named', () => {
  assert.deepEqual(parseAcceptRates(undefined), [null]);
  assert.deepEqual(parseAcceptRates('real,0.6,0.9'), [null, 0.6, 0.9]);
  assert.throws(() => parseAcceptRates('0.8,1.2'), /bad entry "1.2"/);
});

test('runMtpBench on tiny-think: P = 0 accepts nothing, P = 1 everything; outputs == MTP off in every run', { timeout: 300_000 }, async () => {
  const r = await runMtpBench({ engine: { model: TINY_THINK(), kernels: 'cpu', threads: 1 }, specTokens: 3,
    acceptRates: [null, 0, 1, 0.8], batch: 2, genTokens: 14, repeat: 1, seed: 1 });
  const runs = r['runs'] as { accept: unknown; rounds: number; drafted: number; accepted: number; outputs_identical: boolean; speedup: number;
    accept_len_mean: number; round_ms: number }[];
  assert.deepEqual(runs.map((x) => x.accept), ['mtp head', 0, 1, 0.8]);
  for (const x of runs) {
    assert.equal(x.outputs_identical, true);
    assert.ok(x.rounds > 0 && x.drafted > 0, `${x.accept}: drafts were verified`);
    assert.ok(x.speedup > 0 && x.round_ms > 0);
  }
  assert.equal(runs[1]!.accepted, 0, 'P = 0: every draft rejected');
  assert.equal(runs[1]!.accept_len_mean, 1);
  assert.equal(runs[2]!.accepted, runs[2]!.drafted, 'P = 1: every draft accepted');
  assert.ok(runs[3]!.accept_len_mean > 1 && runs[3]!.accept_len_mean < runs[2]!.accept_len_mean);
});

test('runMtpBench --sample: seeded sampled requests, verified by matching; outputs == MTP off, P = 1 accepts every draft; rejection refused', { timeout: 300_000 }, async () => {
  const sampling = { temperature: 0.8, topK: 20, topP: 0.9, minP: 0, presencePenalty: 0, frequencyPenalty: 0, repetitionPenalty: 1 };
  const o = { engine: { model: TINY_THINK(), kernels: 'cpu' as const, threads: 1 }, specTokens: 3, acceptRates: [null, 1], batch: 2, genTokens: 14, repeat: 1, seed: 5, sampling };
  const r = await runMtpBench(o);
  assert.deepEqual(r['sampling'], { ...sampling, verified_by: 'match' });
  const runs = r['runs'] as { rounds: number; drafted: number; accepted: number; outputs_identical: boolean }[];
  for (const x of runs) assert.ok(x.outputs_identical && x.rounds > 0 && x.drafted > 0);
  assert.equal(runs[1]!.accepted, runs[1]!.drafted, 'P = 1: every draft (MTP off\'s draw) accepted');
  await assert.rejects(runMtpBench({ ...o, engine: { ...o.engine, specSampling: 'rejection' } }), /verifies by matching/);
});

test('mtpRoundPhases times a verify step and a draft chain; withPhases splits each measured round', async () => {
  const k = await createKernels('cpu', 1);
  try {
    const p = await mtpRoundPhases(loadModel(TINY_THINK(), k), { batch: 2, genTokens: 4, specTokens: 2, seed: 1 });
    assert.ok(p.verify > 0 && p.draft > 0, JSON.stringify(p));
  } finally {
    k.dispose();
  }
  const r = withPhases({ runs: [{ round_ms: 10 }, { round_ms: null }] }, { verify: 6, draft: 1.5 });
  assert.deepEqual(r['runs'], [{ round_ms: 10, draft_ms: 1.5, verify_ms: 6, commit_and_host_ms: 2.5 }, { round_ms: null, draft_ms: 1.5, verify_ms: 6, commit_and_host_ms: null }]);
});
