// The read-back pacer of CPU adapters (kernels/webgpu/readback-pacer.ts) on a simulated
// clock: a device whose submits take `gpuMs` each, a mapAsync that resolves when the work is
// done (plus a poll's latency). What it must do: sleep through most of a known shape's time,
// so that the busy-polled remainder is a small share; never sleep on a shape seen first;
// recover within a few submits when a shape's time drops (oversleeps shrink the sleep) or
// grows; keep shapes apart; and under overlapped decode (step N + 1 submitted before N's
// read-back, the host busy recording while timers are due) keep a steady estimate: a step's
// time is taken from when the queue reached it, and a late timer teaches nothing.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { FRACTION, GROW, HALVE_AFTER, MIN_SLEEP_MS, NO_TIMES, PROBE_MIN_MS, PROBE_SHARE, ReadbackPacer, SHRINK, type ShapeTimes, learn, sleepOf, submitShape } from '../src/kernels/webgpu/readback-pacer.js';
import { foldQuantActs, launchProfile, readbackPacing } from '../src/kernels/webgpu-node.js';

const POLL_LATENCY_MS = 0.05;

/** A simulated device and clock: `submit(gpuMs)` runs one paced read-back. */
function simulated(): { pacer: ReadbackPacer; submit: (shape: string, gpuMs: number, compiles?: boolean) => Promise<{ polled: number; total: number; slept: number }> } {
  let clock = 0;
  const pacer = new ReadbackPacer(async (ms) => { clock += ms; }, () => clock);
  const submit = async (shape: string, gpuMs: number, compiles = false): Promise<{ polled: number; total: number; slept: number }> => {
    const start = clock;
    const sleptBefore = pacer.sleptMs;
    let mapCalled = NaN;
    await pacer.wait(shape, async () => {
      mapCalled = clock;
      clock = Math.max(clock, start + gpuMs) + POLL_LATENCY_MS;
    }, compiles ? { probe: async () => clock >= start + gpuMs } : null);
    return { polled: clock - mapCalled, total: clock - start, slept: pacer.sleptMs - sleptBefore };
  };
  return { pacer, submit };
}

/** A discrete-event clock for overlapped steps: timers and device completions fire in time
 * order; `busy(ms)` is synchronous host work (timers due meanwhile fire late). */
class EventClock {
  now = 0;
  private events: { at: number; fire: () => void }[] = [];
  at(at: number, fire: () => void): void {
    this.events.push({ at, fire });
  }
  sleep = (ms: number): Promise<void> => new Promise((r) => this.at(this.now + ms, r));
  busy(ms: number): void {
    this.now += ms;
  }
  /** Runs `driver` to its end, firing events in time order whenever it waits. */
  async run(driver: Promise<void>): Promise<void> {
    let done = false;
    void driver.then(() => { done = true; });
    while (!done) {
      await new Promise((r) => setImmediate(r)); // every reaction settles first
      if (done) break;
      this.events.sort((a, b) => a.at - b.at);
      const next = this.events.shift();
      if (!next) throw new Error('the driver waits on nothing');
      this.now = Math.max(this.now, next.at);
      next.fire();
    }
    await driver;
  }
}

/** The bench's overlapped decode (cli/bench-run.ts) on a serial device queue: record step s
 * (`recordMs` of host work), submit it, then await step s - 1's read-back. Returns the time
 * between read-backs and the time polled per step, over the steps after `warm`. */
async function overlappedDecode(gpuMs: number, recordMs: number, steps: number, warm = 6): Promise<{ msPerStep: number; polledPerStep: number }> {
  const clock = new EventClock();
  const pacer = new ReadbackPacer(clock.sleep, () => clock.now);
  let queueFree = 0;
  const polled: number[] = [];
  const mappedAt: number[] = [];
  const driver = (async () => {
    let previous: Promise<void> | null = null;
    for (let s = 0; s < steps; s++) {
      clock.busy(recordMs);
      queueFree = Math.max(queueFree, clock.now) + gpuMs;
      const done = queueFree;
      const read = pacer.wait('decode', () => new Promise<void>((r) => {
        const t = clock.now;
        clock.at(Math.max(t, done) + POLL_LATENCY_MS, () => {
          polled.push(clock.now - t);
          mappedAt.push(clock.now);
          r();
        });
      }));
      await previous;
      previous = read;
    }
    await previous;
  })();
  await clock.run(driver);
  const n = steps - 1 - warm;
  return { msPerStep: (mappedAt[steps - 1]! - mappedAt[warm]!) / n, polledPerStep: polled.slice(warm + 1).reduce((a, b) => a + b, 0) / n };
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

  test('a step that compiles (a pipeline\'s first dispatch) is probed, not polled, and teaches nothing: a 30 s compile, then 100 ms steps, sleep ≤ 100 ms each', async () => {
    const { pacer, submit } = simulated();
    const compile = await submit('s', 30_000, true);
    assert.ok(compile.polled < 1, `the compile is slept through, not polled (${compile.polled} ms polled)`);
    assert.ok(compile.total <= (1 + PROBE_SHARE) * 30_000 + PROBE_MIN_MS, `≤ ${PROBE_SHARE} past the work's end: ${compile.total} ms`);
    assert.ok(pacer.probes > 10 && pacer.probes < 120, `${pacer.probes} probes`);
    const totals: number[] = [];
    for (let i = 0; i < 8; i++) totals.push((await submit('s', 100)).total);
    assert.ok(totals.every((t) => t <= 101), `no oversleep after the compile: ${totals.map((t) => t.toFixed(0)).join(' ')}`);
    assert.ok(pacer.sleeps >= 6, 'the warm steps are slept on');
    // a pipeline first dispatched in a learnt shape's step: that step teaches nothing either
    const before = (await submit('s', 100)).slept;
    await submit('s', 5_000, true);
    assert.ok(Math.abs((await submit('s', 100)).slept - before) < 20, 'the estimate after the compiling step is the warm one');
    const p = {};
    assert.equal(pacer.firstDispatch(p), true);
    assert.equal(pacer.firstDispatch(p), false, 'a pipeline compiles once');
  });

  test('a shape whose time drops 10×: oversleeps shrink the sleep, back to ≤ 1.05× the GPU time within 7 submits', async () => {
    const { submit } = simulated();
    await submit('s', 1000);
    await submit('s', 1000);
    const totals: number[] = [];
    for (let i = 0; i < 10; i++) totals.push((await submit('s', 100)).total);
    assert.ok(totals[0]! > 100, 'the first short submit oversleeps (the old estimate)');
    assert.ok(totals.slice(6).every((t) => t <= 105), `converged by the 7th submit: ${totals.map((t) => t.toFixed(0)).join(' ')}`);
  });

  test('a shape whose time grows 8×: the sleep at most doubles a submit, and covers most of the new time from the 5th', async () => {
    const { submit } = simulated();
    await submit('s', 50);
    await submit('s', 50);
    const slept: number[] = [];
    for (let i = 0; i < 5; i++) slept.push((await submit('s', 400)).slept);
    assert.ok(slept.slice(1).every((x, i) => x <= 2 * slept[i]! * GROW + 1e-9), `sleeps ${slept.map((x) => x.toFixed(0)).join(' ')}`);
    assert.ok(slept[4]! >= FRACTION * 400, `sleeps ${slept.map((x) => x.toFixed(0)).join(' ')}`);
  });

  test('the controller: no sleep on a first step, then FRACTION of its time; one slow step costs one sleep; oversleeps shrink, from the 4th in a row halve', () => {
    const at = (sleep: number | undefined, oversleeps = 0): ShapeTimes => ({ sleep, oversleeps });
    assert.equal(sleepOf(NO_TIMES), 0, 'a first step is not slept on');
    assert.equal(sleepOf(learn(NO_TIMES, { slept: 0, asleep: 0, waited: 100 })), FRACTION * 100, 'then FRACTION of its time');
    assert.equal(learn(at(80), { slept: 80, asleep: 80, waited: 1749 }).sleep, GROW * 160, 'a 1.8 s step: at most twice the sleep');
    assert.equal(learn(at(80), { slept: 80, asleep: 80, waited: 20 }).sleep, GROW * 100, 'outlasted: GROW of the whole time');
    assert.deepEqual(learn(at(240), { slept: 240, asleep: 600, waited: 0 }), at(240), 'a late timer: nothing learnt');
    assert.deepEqual(learn(at(240), { slept: 240, asleep: 240, waited: 0.5 }), at(SHRINK * 240, 1), 'woke on time, done: SHRINK');
    assert.deepEqual(learn(at(204, 1), { slept: 204, asleep: 204, waited: 0.5 }), at(SHRINK * 204, 2), 'twice in a row: SHRINK');
    assert.deepEqual(learn(at(204, HALVE_AFTER), { slept: 204, asleep: 204, waited: 0.5 }), at(102, HALVE_AFTER + 1), 'the 4th in a row: half');
    assert.equal(learn(at(102, 2), { slept: 102, asleep: 102, waited: 5 }).oversleeps, 0, 'an outlasted sleep ends the run');
    assert.equal(sleepOf(at(MIN_SLEEP_MS / 2)), 0, 'sleeps under MIN_SLEEP_MS are not taken');
  });

  test('a timer that fires late (the host busy) with the work done keeps the estimate: no swing', async () => {
    let clock = 0;
    const pacer = new ReadbackPacer(async (ms) => { clock += 2.5 * ms; }, () => clock); // every timer fires 2.5x late
    const gpuMs = 300;
    const totals: number[] = [];
    for (let i = 0; i < 10; i++) {
      const start = clock;
      await pacer.wait('s', async () => { clock = Math.max(clock, start + gpuMs) + POLL_LATENCY_MS; });
      totals.push(clock - start);
    }
    // each sleep asks 0.8 x 300 and lasts 600: a late wake every time, the estimate stays
    assert.ok(totals.slice(2).every((t) => Math.abs(t - 600) < 2), `steady: ${totals.map((t) => t.toFixed(0)).join(' ')}`);
  });

  test('overlapped decode (step N + 1 submitted before N\'s read-back): a step costs its GPU time, the polled share stays small', async () => {
    for (const [gpuMs, recordMs] of [[120, 10], [120, 60], [120, 150], [300, 30]] as const) {
      const r = await overlappedDecode(gpuMs, recordMs, 30);
      const bound = Math.max(gpuMs, recordMs);
      assert.ok(r.msPerStep <= 1.03 * bound + 1, `gpu ${gpuMs} ms, record ${recordMs} ms: ${r.msPerStep.toFixed(1)} ms a step (bound ${bound})`);
      assert.ok(r.polledPerStep <= (1 - FRACTION) * gpuMs + 2, `gpu ${gpuMs} ms, record ${recordMs} ms: polled ${r.polledPerStep.toFixed(1)} ms a step`);
    }
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
