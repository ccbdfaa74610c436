// Same-run A/B of chunked submits (kernels/webgpu/submit-chunks.ts): `bench --kernels webgpu
// --json` in one child process per run, DELTASERVE_SUBMIT_CHUNK set per arm (read when the
// backend opens), the arms alternating for --rounds rounds. Prints one JSON object: per arm
// the medians of wall ms per step, the host's CPU µs per dispatch (main thread), submits per
// step, GPU ms per step (timestamps: span and busy), queue-done ms, and the child's process
// CPU seconds (every thread: lavapipe's too); `runs` has each run's figures.
// Usage: sh scripts/node.sh scripts/ab-submit-chunks.mjs [--arms 0,8:32,3] [--rounds 3]
//   [--mode decode] [--gen-tokens 16] [--prompt-tokens 8] [--batch 1] [--model DIR]
// (an arm "F:N" is DELTASERVE_SUBMIT_CHUNK=F,N).
import { parseArgs } from 'node:util';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { dirname, join, resolve } from 'node:path';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const { values: v } = parseArgs({ options: {
  arms: { type: 'string', default: '0,8:32,3' }, rounds: { type: 'string', default: '3' }, mode: { type: 'string', default: 'decode' },
  'gen-tokens': { type: 'string', default: '16' }, 'prompt-tokens': { type: 'string', default: '8' }, batch: { type: 'string', default: '1' },
  model: { type: 'string', default: join(root, '..', 'shared', 'models', 'tiny-think') },
} });

const arms = v.arms.split(',').map((a) => a.replace(':', ','));
const median = (xs) => {
  const s = xs.filter((x) => x !== null && x !== undefined).sort((a, b) => a - b);
  if (s.length === 0) return null;
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

/** One bench process; its CPU seconds from bash's `time` (user + sys of the child). */
function benchRun(arm) {
  const args = [join(root, 'dist', 'src', 'cli', 'main.js'), 'bench', '--kernels', 'webgpu', '--model', v.model, '--mode', v.mode,
    '--gen-tokens', v['gen-tokens'], '--prompt-tokens', v['prompt-tokens'], '--batch', v.batch, '--repeat', '1', '--json'];
  const cmd = `TIMEFORMAT='cpu %U %S'; time "${process.execPath}" ${args.map((a) => `'${a}'`).join(' ')}`;
  const p = spawnSync('bash', ['-c', cmd], { encoding: 'utf8', env: { ...process.env, DELTASERVE_SUBMIT_CHUNK: arm }, maxBuffer: 1 << 26 });
  if (p.status !== 0) throw new Error(`arm ${arm} failed: ${p.stderr}`);
  const cpu = /cpu ([\d.]+) ([\d.]+)\s*$/.exec(p.stderr);
  const r = JSON.parse(p.stdout.trim().split('\n').pop());
  const g = r.gpu;
  return { ms_per_step: r.ms_per_step.median, host_cpu_us_per_dispatch: g.host_cpu_us_per_dispatch, host_record_ms_per_step: g.host_record_ms_per_step,
    host_encode_ms_per_step: g.host_encode_ms_per_step, submits_per_step: g.submits_per_step, dispatches_per_step: g.dispatches_per_step,
    gpu_ms_per_step: g.gpu_ms_per_step, gpu_busy_ms_per_step: g.gpu_busy_ms_per_step, queue_done_ms_per_step: g.queue_done_ms_per_step,
    process_cpu_s: cpu ? Number(cpu[1]) + Number(cpu[2]) : null };
}

const runs = Object.fromEntries(arms.map((a) => [a, []]));
for (let r = 0; r < Number(v.rounds); r++) {
  for (const arm of arms) {
    runs[arm].push(benchRun(arm));
    process.stderr.write(`round ${r + 1} arm ${arm}: ${JSON.stringify(runs[arm].at(-1))}\n`);
  }
}
const keys = Object.keys(runs[arms[0]][0]);
const medians = Object.fromEntries(arms.map((a) => [a, Object.fromEntries(keys.map((k) => [k, median(runs[a].map((x) => x[k]))]))]));
process.stdout.write(JSON.stringify({ mode: v.mode, batch: Number(v.batch), gen_tokens: Number(v['gen-tokens']), rounds: Number(v.rounds),
  node: process.version, load: (await import('node:os')).loadavg(), medians, runs }) + '\n');
