// AdaptiveK (spec/policy.ts) on its own, with synthetic step timings instead of a clock:
// exploration order, convergence to the fastest k per batch bucket, periodic probes of
// the neighbours, recovery when load changes, and the fixed-k mode.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { AdaptiveK } from '../src/engine/speculative/policy.js';

/** Drive the policy for `steps` steps at batch size `batch`, where drafting k yields
 * `tokensPerMs(k)` tokens per ms (1 ms per step); returns the k chosen at each step. */
function drive(p: AdaptiveK, batch: number, steps: number, tokensPerMs: (k: number) => number): number[] {
  const ks: number[] = [];
  for (let i = 0; i < steps; i++) {
    const k = p.choose(batch);
    ks.push(k);
    p.observe(batch, k, tokensPerMs(k), 1);
  }
  return ks;
}

test('AdaptiveK: off → always kMax; kMax 0 → always 0', () => {
  const fixed = new AdaptiveK(3, false);
  assert.deepEqual(drive(fixed, 1, 10, (k) => 10 - k), Array(10).fill(3));
  const none = new AdaptiveK(0, true);
  assert.deepEqual(drive(none, 4, 10, () => 1), Array(10).fill(0));
});

test('AdaptiveK: explores k=1, then 0, then climbs only while the larger k pays', () => {
  // Rates rise to a peak at k = 2: exploration measures 1, 0, 2, 3 and stops climbing at 3.
  const rate = [1.0, 1.5, 2.0, 1.8, 1.2];
  const p = new AdaptiveK(4, true);
  const ks = drive(p, 1, 4, (k) => rate[k]!);
  assert.deepEqual(ks, [1, 0, 2, 3]);
  // Then it settles on the best (2); k = 4 is never tried before a probe.
  const next = drive(p, 1, 6, (k) => rate[k]!);
  assert.deepEqual(next, Array(6).fill(2));
});

test('AdaptiveK: a policy where speculation loses settles on k = 0', () => {
  const p = new AdaptiveK(4, true);
  const ks = drive(p, 8, 30, (k) => 2 - 0.3 * k);
  assert.deepEqual(ks.slice(0, 2), [1, 0]);
  // After exploration, only 0 and the periodic probe of k = 1 appear.
  assert.ok(ks.slice(2).every((k) => k === 0 || k === 1), `choices ${ks.join(',')}`);
  assert.equal(ks.slice(2).filter((k) => k === 0).length >= 25, true);
});

test('AdaptiveK: probes both neighbours of the best k every 24 steps', () => {
  const rate = [1.0, 1.5, 2.0, 1.8, 1.2];
  const p = new AdaptiveK(4, true);
  const ks = drive(p, 1, 4 + 48, (k) => rate[k]!);
  const after = ks.slice(4);
  const probes = after.map((k, i) => [i, k] as const).filter(([, k]) => k !== 2);
  // Two probe pairs within 48 steps: best+1 (3) and best−1 (1), 12 steps apart.
  assert.deepEqual(probes.map(([, k]) => k).sort(), [1, 1, 3, 3]);
  const at = probes.map(([i]) => i);
  assert.equal(at[1]! - at[0]!, 12);
});

test('AdaptiveK: follows a change of load through its probes', () => {
  const p = new AdaptiveK(3, true);
  drive(p, 1, 60, (k) => [1, 3, 2, 1.5][k]!); // k = 1 best
  assert.equal(p.choose(1), 1);
  p.observe(1, 1, 3, 1);
  // Load changes: now speculation costs more than it gains; k = 0 is best.
  const ks = drive(p, 1, 200, (k) => [2, 0.5, 0.4, 0.3][k]!);
  assert.deepEqual(ks.slice(-10).filter((k) => k === 0).length >= 9, true, `tail ${ks.slice(-10).join(',')}`);
});

test('AdaptiveK: batch-size buckets are measured separately', () => {
  const p = new AdaptiveK(2, true);
  drive(p, 1, 40, (k) => [1, 2, 3][k]!); // alone: k = 2 best
  drive(p, 32, 40, (k) => [3, 2, 1][k]!); // large batch: k = 0 best
  assert.equal(p.choose(1), 2);
  assert.equal(p.choose(20), 0); // 20 falls in the ≤ 32 bucket
  // A bucket never seen starts its own exploration at k = 1.
  assert.equal(p.choose(3), 1);
});

test('AdaptiveK: ignores observations it cannot use', () => {
  const p = new AdaptiveK(2, true);
  p.observe(1, 5, 10, 1); // k out of range
  p.observe(1, 1, 10, 0); // zero time
  p.observe(1, -1, 10, 1);
  assert.equal(p.choose(1), 1); // still exploring: nothing was recorded
});
