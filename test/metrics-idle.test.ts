// Windowed rates: tokens/s is what the engine delivered over the last RATE_WINDOW_MS of wall
// time, and it falls to 0 one window after the last step, on every surface that shows it
// (engine.stats(), the dashboard's /metrics.json samples, the Prometheus gauge). The clock
// is injected: the test passes idle time without sleeping.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Batch } from '../src/engine/batch.js';
import { Engine } from '../src/engine/engine.js';
import { EngineMetrics, RATE_WINDOW_MS } from '../src/engine/metrics.js';
import { ServerMetrics } from '../src/server/api/metrics.js';
import { StatsSampler } from '../src/server/api/stats.js';
import { TINY_THINK } from './paths.js';

const KERNELS = (process.env['DELTASERVE_TEST_KERNELS'] ?? 'wasm') as 'ref' | 'wasm';

/** A clock the test moves by hand. */
function manualClock(start = 1_000_000): { now: () => number; advance: (ms: number) => void } {
  let t = start;
  return { now: () => t, advance: (ms) => void (t += ms) };
}

const decode = { kind: 'decode' } as Batch;

test('tokens/s: tokens of the window over wall time, 0 once a whole window has passed idle', () => {
  const clock = manualClock();
  const m = new EngineMetrics(clock.now);
  assert.equal(m.tokensPerSecond(), 0, 'no step yet');
  assert.equal(m.secondsPerStep(), null);
  // 10 decode steps of 100 ms, 8 tokens each, back to back: 80 tokens in 1 s
  for (let i = 0; i < 10; i++) {
    clock.advance(100);
    m.stepDone(decode, 8, 100);
  }
  assert.equal(m.tokensPerSecond(), 80, 'busy for 1 s since the first step: 80 tokens / 1 s');
  assert.equal(m.secondsPerStep(), 0.1);
  // idle for 4 s: the same 80 tokens over the 5 s since the first step started
  clock.advance(4000);
  assert.equal(m.tokensPerSecond(), 16);
  // idle past the window: every step ended more than RATE_WINDOW_MS ago
  clock.advance(RATE_WINDOW_MS);
  assert.equal(m.tokensPerSecond(), 0, 'idle for a window: 0 tok/s, not the last busy rate');
  assert.equal(m.secondsPerStep(), null, 'no step in the window');
  // traffic again: one step in a full window (the first step is long past)
  clock.advance(100);
  m.stepDone(decode, 50, 100);
  assert.equal(m.tokensPerSecond(), 50 / (RATE_WINDOW_MS / 1000));
  // a step ending exactly one window ago is out of it
  clock.advance(RATE_WINDOW_MS);
  assert.equal(m.tokensPerSecond(), 0);
});

test('an idle engine reports 0 tok/s in stats(), the dashboard sample and the Prometheus gauge', async () => {
  const clock = manualClock();
  const engine = await Engine.load({ model: TINY_THINK(), kernels: KERNELS, maxRunning: 2, specTokens: 0 }, { clock: clock.now });
  try {
    const done = await engine.complete({ promptIds: [5, 6, 7], maxTokens: 12 });
    assert.equal(done.outputIds.length, 12);
    const busy = engine.stats().tokensPerSecond;
    assert.ok(busy > 0, `a rate right after generating (${busy})`);
    const server = new ServerMetrics();
    const sampler = new StatsSampler(engine, server);
    const gauge = (): number => {
      const line = /^deltaserve_engine_tokens_per_second (\S+)$/m.exec(server.render(engine.stats()));
      assert.ok(line, 'the Prometheus text has deltaserve_engine_tokens_per_second');
      return Number(line[1]);
    };
    assert.equal(sampler.sample().tokens_per_second, busy, 'the dashboard reads the same number');
    assert.equal(gauge(), busy, 'the Prometheus gauge reads the same number');
    // half a window later the same tokens spread over more wall time: lower, not frozen
    clock.advance(RATE_WINDOW_MS / 2);
    const half = engine.stats().tokensPerSecond;
    assert.ok(half > 0 && half < busy, `decays while idle (${busy} → ${half})`);
    clock.advance(RATE_WINDOW_MS / 2);
    const s = engine.stats();
    assert.equal(s.running, 0);
    assert.equal(s.tokensPerSecond, 0, 'idle for a whole window: 0 tok/s');
    assert.equal(sampler.sample().tokens_per_second, 0);
    assert.equal(gauge(), 0);
  } finally {
    await engine.close();
  }
});
