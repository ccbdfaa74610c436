// Same-run A/B of read-back pacing on a CPU adapter (kernels/webgpu/readback-pacer.ts):
// a webgpu engine decodes --tokens greedy tokens of tiny-think after a warm-up request, with
// DELTASERVE_READBACK_PACING=off and =on in alternating child processes (the switch is read
// when the backend opens), --rounds pairs. Prints one JSON object: per run the wall seconds,
// the process's CPU seconds (every thread: lavapipe's and the main thread's) and the main
// thread's alone (Node ≥ 23.9: process.threadCpuUsage; Dawn's busy-poll shows there), and per
// mode the medians; `same_ids` says whether every run produced the same ids.
// Usage: sh scripts/node.sh scripts/ab-readback-pacing.mjs [--rounds 3] [--tokens 24] [--model DIR]
import { parseArgs } from 'node:util';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { dirname, join, resolve } from 'node:path';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const { values: v } = parseArgs({ options: {
  rounds: { type: 'string', default: '3' }, tokens: { type: 'string', default: '24' },
  model: { type: 'string', default: join(root, '..', 'shared', 'models', 'tiny-think') }, child: { type: 'boolean', default: false },
} });

if (v.child) {
  const { Engine } = await import(join(root, 'dist', 'src', 'engine', 'engine.js'));
  const e = await Engine.load({ model: v.model, kernels: 'webgpu', specTokens: 0, prefixCache: false, maxRunning: 1, kvCacheTokens: 2048, maxContext: 1024 }, {});
  const promptIds = Array.from({ length: 20 }, (_, i) => 100 + i);
  await e.complete({ promptIds, maxTokens: 2, ignoreEos: true }); // compiles the pipelines
  const t0 = performance.now();
  const c0 = process.cpuUsage();
  const m0 = process.threadCpuUsage?.() ?? null;
  const done = await e.complete({ promptIds, maxTokens: Number(v.tokens), ignoreEos: true });
  const c = process.cpuUsage(c0);
  const m = m0 ? process.threadCpuUsage(m0) : null;
  const s = (u) => Math.round(u / 1e4) / 100;
  process.stdout.write(JSON.stringify({ wall_s: Math.round(performance.now() - t0) / 1000, cpu_s: s(c.user + c.system),
    main_thread_cpu_s: m ? s(m.user + m.system) : null, ids: [...done.outputIds] }) + '\n');
  await e.close();
} else {
  const runs = { off: [], on: [] };
  for (let r = 0; r < Number(v.rounds); r++) {
    for (const mode of ['off', 'on']) {
      const p = spawnSync(process.execPath, [fileURLToPath(import.meta.url), '--child', '--tokens', v.tokens, '--model', v.model],
        { encoding: 'utf8', env: { ...process.env, DELTASERVE_READBACK_PACING: mode } });
      if (p.status !== 0) throw new Error(`${mode} run failed: ${p.stderr}`);
      runs[mode].push(JSON.parse(p.stdout.trim().split('\n').pop()));
    }
  }
  const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2; };
  const summary = (rs) => ({ wall_s: median(rs.map((r) => r.wall_s)), cpu_s: median(rs.map((r) => r.cpu_s)),
    main_thread_cpu_s: rs[0].main_thread_cpu_s === null ? null : median(rs.map((r) => r.main_thread_cpu_s)) });
  const all = [...runs.off, ...runs.on];
  const sameIds = all.every((r) => r.ids.join() === all[0].ids.join());
  const strip = (rs) => rs.map(({ ids, ...rest }) => rest);
  process.stdout.write(JSON.stringify({ tokens: Number(v.tokens), rounds: Number(v.rounds), node: process.version,
    median: { off: summary(runs.off), on: summary(runs.on) }, runs: { off: strip(runs.off), on: strip(runs.on) }, same_ids: sameIds }) + '\n');
}
