// The read-back pacer of CPU adapters (kernels/webgpu/readback-pacer.ts) on a simulated
// clock: a device whose submits take `gpuMs` each, a mapAsync that resolves when the work is
// done (plus a poll's latency). What it must do: sleep through most of a known shape's time,
// so that the busy-polled remainder is a small share; never sleep on a shape seen first;
// recover within a few submits when a shape's time drops (an oversleep shrinks the estimate)
// or grows; keep shapes apart.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { FRACTION, MIN_SLEEP_MS, ReadbackPacer, submitShape } from '../src/kernels/webgpu/readback-pacer.js';
import { foldQuantActs, launchProfile, readbackPacing } from '../src/kernels/webgpu-node.js';

const POLL_LATENCY_MS = 0.05;

/** A simulated device and clock: `submit(gpuMs)` runs one paced read-back. */
function simulated(): { pacer: ReadbackPacer; submit: (shape: string, gpuMs: number) => Promise<{ polled: number; total: number; slept: number }> } {
  let clock = 0;
  const pacer = new ReadbackPacer(async (ms) => { clock += ms; }, () => clock);
  const submit = async (shape: string, gpuMs: number): Promise<{ polled: number; total: number; slept: number }> => {
    const start = clock;
    const sleptBefore = pacer.sleptMs;
    let mapCalled = NaN;
    await pacer.wait(shape, async () => {
      mapCalled = clock;
      clock = Math.max(clock, start + gpuMs) + POLL_LATENCY_MS;
    });
    return { polled: clock - mapCalled, total: clock - start, slept: pacer.sleptMs - sleptBefore };
  };
  return { pacer, submit };
}

describe('read-back pacer (simulated clock)', () => {
  test('a shape seen first is not slept on; then most of its time is slept, the rest polled', async () => {
    const { pacer, submit } = simulated();
    const first = await submit('decode', 300);
    assert.equal(first.slept, 0, 'no estimate: no sleep');
    assert.ok(first.polled >= 300, 'the first submit polls throughout');
    for (let i = 0; i < 5; i++) {
      const r = await submit('decode', 300);
      assert.ok(r.slept > 0, `submit ${i + 2} slept`);
      assert.ok(r.polled <= (1 - FRACTION) * 300 + 1, `submit ${i + 2}: polled ${r.polled} ms of 300`);
      assert.ok(r.total <= 300 + 1, `submit ${i + 2}: no oversleep on a steady shape (${r.total} ms)`);
    }
    assert.equal(pacer.sleeps, 5);
  });

  test('a shape whose time drops: the oversleep shrinks the estimate, back to ≤ 1.05× the GPU time within 5 submits', async () => {
    const { submit } = simulated();
    await submit('s', 1000);
    await submit('s', 1000);
    const totals: number[] = [];
    for (let i = 0; i < 8; i++) totals.push((await submit('s', 100)).total);
    assert.ok(totals[0]! > 100, 'the first short submit oversleeps (the old estimate)');
    assert.ok(totals.slice(4).every((t) => t <= 105), `converged by the 5th submit: ${totals.map((t) => t.toFixed(0)).join(' ')}`);
  });

  test('a shape whose time grows: the next sleep covers most of the new time', async () => {
    const { submit } = simulated();
    await submit('s', 50);
    await submit('s', 50);
    await submit('s', 400);
    const r = await submit('s', 400);
    assert.ok(r.slept >= FRACTION * 400 - 1 && r.total <= 401, `slept ${r.slept}, total ${r.total}`);
  });

  test('short submits (< MIN_SLEEP_MS) are never slept on; shapes keep their own estimates', async () => {
    const { submit } = simulated();
    for (let i = 0; i < 3; i++) assert.equal((await submit('tiny', MIN_SLEEP_MS / 2)).slept, 0);
    await submit('long', 200);
    assert.ok((await submit('long', 200)).slept > 0);
    assert.equal((await submit('tiny', MIN_SLEEP_MS / 2)).slept, 0, 'the long shape does not leak into the tiny one');
  });

  test('submit shapes: the same dispatches and workgroups within ~19 % share one; a doubled prefill does not', () => {
    assert.equal(submitShape(53, 1000), submitShape(53, 1100));
    assert.notEqual(submitShape(53, 1000), submitShape(54, 1000));
    assert.notEqual(submitShape(66, 1000), submitShape(66, 2000));
    assert.equal(submitShape(53, 1000, 1), submitShape(53, 1000), 'one submit: the shape as before');
    assert.notEqual(submitShape(53, 1000, 3), submitShape(53, 1000), 'a chunked step waits on less after its last submit');
  });

  test('DELTASERVE_READBACK_PACING: on by default, off turns it off, anything else is an error naming the variable', () => {
    assert.equal(readbackPacing({}), true);
    assert.equal(readbackPacing({ DELTASERVE_READBACK_PACING: 'on' }), true);
    assert.equal(readbackPacing({ DELTASERVE_READBACK_PACING: 'off' }), false);
    assert.throws(() => readbackPacing({ DELTASERVE_READBACK_PACING: '0' }), /DELTASERVE_READBACK_PACING: "0" is not on or off/);
  });

  test('DELTASERVE_FOLD_QUANT_ACTS: unset is the adapter\'s default, on / off force it, anything else is an error naming the variable', () => {
    assert.equal(foldQuantActs({}), undefined);
    assert.equal(foldQuantActs({ DELTASERVE_FOLD_QUANT_ACTS: 'on' }), true);
    assert.equal(foldQuantActs({ DELTASERVE_FOLD_QUANT_ACTS: 'off' }), false);
    assert.throws(() => foldQuantActs({ DELTASERVE_FOLD_QUANT_ACTS: '1' }), /DELTASERVE_FOLD_QUANT_ACTS: "1" is not on or off/);
  });

  test('DELTASERVE_LAUNCHES: unset is the adapter\'s own profile, gpu / cpu pick one, anything else is an error naming the variable', () => {
    assert.equal(launchProfile({}), undefined);
    assert.equal(launchProfile({ DELTASERVE_LAUNCHES: 'gpu' }), 'gpu');
    assert.equal(launchProfile({ DELTASERVE_LAUNCHES: 'cpu' }), 'cpu');
    assert.throws(() => launchProfile({ DELTASERVE_LAUNCHES: 'GPU' }), /DELTASERVE_LAUNCHES: "GPU" is not gpu or cpu/);
  });
});
