// In-process A/B of Kernels.matmulGroup: ONE loaded model decoding (bench's benchOnce) with the
// wasm backend's grouped matmuls ('group': one pool run per qkv/z/b/a, q/k/v, gate/up group)
// and with every group run as separate matmul calls ('separate'), alternating run by run so
// a machine whose load changes slows both alike (the two give the same bits). Prints one
// JSON object: per side the median and best ms/step and tok/s over --rounds runs.
// Usage: node scripts/ab-matmul-group.mjs --model FILE [--batch 1] [--gen 32] [--rounds 9] [--threads T]
import { parseArgs } from 'node:util';
import { cpus } from 'node:os';
import { resolve } from 'node:path';
import { createKernels } from '../dist/src/kernels/index.js';
import { matmulGroupByCalls } from '../dist/src/kernels/matmul-group.js';
import { loadModel } from '../dist/src/model/model.js';
import { benchOnce } from '../dist/src/cli/bench-run.js';
import { Rng } from '../dist/src/util/rng.js';

const { values: v } = parseArgs({
  options: {
    model: { type: 'string' }, batch: { type: 'string', default: '1' }, gen: { type: 'string', default: '32' },
    prompt: { type: 'string', default: '128' }, rounds: { type: 'string', default: '9' }, threads: { type: 'string', default: String(cpus().length) },
  },
});
if (!v.model) throw new Error('--model FILE is required');
const batch = Number(v.batch);
const kernels = await createKernels('wasm', Number(v.threads));
const model = loadModel(resolve(v.model), kernels);
/** The same kernels with matmulGroup as one matmul call per entry. */
const separate = new Proxy(kernels, {
  get(target, prop, receiver) {
    if (prop === 'matmulGroup') return (x, m, group) => matmulGroupByCalls(target, x, m, group);
    const f = Reflect.get(target, prop, receiver);
    return typeof f === 'function' ? f.bind(target) : f;
  },
});
const sides = { group: model, separate: { ...model, kernels: separate } };
const rng = new Rng(1);
for (const m of Object.values(sides)) await benchOnce(m, 'decode', batch, 16, 2, 1, rng); // warm-up
const ms = { group: [], separate: [] };
for (let r = 0; r < Number(v.rounds); r++) {
  const order = r % 2 ? ['separate', 'group'] : ['group', 'separate'];
  for (const side of order) {
    const run = await benchOnce(sides[side], 'decode', batch, Number(v.prompt), Number(v.gen), 1, rng);
    ms[side].push(run.ms / run.steps);
  }
}
const median = (a) => [...a].sort((x, y) => x - y)[a.length >> 1];
const round = (x) => Math.round(x * 1000) / 1000;
const out = { model: v.model, batch, threads: kernels.threads, cpu: cpus()[0]?.model, rounds: Number(v.rounds) };
for (const side of ['separate', 'group']) {
  const a = ms[side];
  out[side] = { ms_per_step_median: round(median(a)), ms_per_step_min: round(Math.min(...a)), tok_s_median: round((1000 * batch) / median(a)),
    tok_s_best: round((1000 * batch) / Math.min(...a)) };
}
out.group_vs_separate_median = round(ms.separate.length ? median(ms.separate) / median(ms.group) : 0);
// paired: each round's separate/group ratio (the two runs of a round are seconds apart)
out.paired_ratio_median = round(median(ms.group.map((g, i) => ms.separate[i] / g)));
process.stdout.write(JSON.stringify(out) + '\n');
kernels.dispose();
