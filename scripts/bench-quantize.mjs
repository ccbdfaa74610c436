#!/usr/bin/env node
// Load-time quantizer throughput (`--quantize`), as JSON: every tensor --quantize would
// quantize in a BF16 checkpoint (or the first --fraction of each one's rows, the same mix
// of shapes and types) is quantized, and the source bytes per second of wall time are
// reported, with CPU time and the load average.
//  --source file (default): through the load path (checkpoint/quantize-load.ts loadQuantized:
//    read rows from the file, quantize, into a weight buffer) — includes the disk.
//  --source memory: each tensor's rows are read first (untimed), then only the quantizer
//    is timed (the legacy build: its BF16 → f32 widening + quantizeRows, as its load did).
//
//   node scripts/bench-quantize.mjs --model DIR [--type q4_k|q8_0] [--threads N]
//     [--fraction F] [--source file|memory] [--dist DIR] [--impl wasm|ts]
//
// --dist: a dist/ directory of another build (default: this checkout's), e.g. a build of
//   an older commit, to compare before/after with the same script (a build without
//   a wasm quantizer (kernels/wasm/quantizer.js, earlier kernels/quant/wasm-quantizer.js)
//   runs its own load-time quantizer).
// --impl ts: this build's TypeScript reference (single-threaded) instead of the wasm one.
import { parseArgs } from 'node:util';
import { existsSync } from 'node:fs';
import { loadavg } from 'node:os';
import { resolve, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const { values } = parseArgs({
  options: {
    model: { type: 'string' }, type: { type: 'string' }, threads: { type: 'string' }, fraction: { type: 'string' },
    dist: { type: 'string' }, impl: { type: 'string' }, source: { type: 'string' },
  },
});
if (!values.model) {
  process.stderr.write('bench-quantize: --model DIR is required\n');
  process.exit(2);
}
const dist = resolve(values.dist ?? join(fileURLToPath(new URL('.', import.meta.url)), '..', 'dist'));
/** The module at the first of `paths` the build holds (files move between builds: an older
 * --dist has src/model/quantize-load.js, src/kernels/quant/wasm-quantizer.js). */
const pathIn = (...paths) => paths.find((p) => existsSync(join(dist, p))) ?? paths[0];
const mod = (...paths) => import(pathToFileURL(join(dist, pathIn(...paths))).href);
const mode = values.type ?? 'q4_k';
const fraction = Number(values.fraction ?? 1);
if (!(fraction > 0 && fraction <= 1)) {
  process.stderr.write(`bench-quantize: --fraction must be in (0, 1] (got ${values.fraction})\n`);
  process.exit(2);
}
const source = values.source ?? 'file';
if (source !== 'file' && source !== 'memory') {
  process.stderr.write(`bench-quantize: --source must be file or memory (got ${source})\n`);
  process.exit(2);
}
const { openModelFiles } = await mod('src/model/model.js');
const { loadQuantized, quantTypeFor } = await mod('src/checkpoint/quantize-load.js', 'src/model/quantize-load.js');
const { quantRowBytes } = await mod('src/kernels/quant/formats.js');
const WASM_QUANTIZER = ['src/kernels/wasm/quantizer.js', 'src/kernels/quant/wasm-quantizer.js'];
const hasWasm = existsSync(join(dist, pathIn(...WASM_QUANTIZER)));
const impl = !hasWasm ? 'legacy-js' : values.impl ?? 'wasm';
let quantizer;
let threads = 1;
if (impl === 'wasm') {
  const { WasmQuantizer } = await mod(...WASM_QUANTIZER);
  quantizer = await WasmQuantizer.start(values.threads ? Number(values.threads) : undefined);
  threads = quantizer.threads;
} else if (impl === 'ts') {
  quantizer = (await mod('src/kernels/quant/row-quantizer.js')).refQuantizer;
}
/** The legacy build's quantizer as its load path ran it: BF16 widened to f32 in JS first. */
const legacy = impl === 'legacy-js' ? (await mod('src/kernels/quant/quantize.js')).quantizeRows : null;
function quantizeInMemory(type, bits, rows, cols, out) {
  if (!legacy) return quantizer.quantizeRows(type, bits, rows, cols, out);
  const f = new Float32Array(bits.length);
  const u = new Uint32Array(f.buffer);
  for (let i = 0; i < bits.length; i++) u[i] = bits[i] << 16;
  legacy(type, f, rows, cols, out);
}

const { ckpt } = openModelFiles(resolve(values.model));
const kernels = {
  allocWeight(type, rows, cols) {
    const bytes = new Uint8Array(rows * quantRowBytes(type, cols));
    return { weight: { dtype: type, rows, cols, data: bytes }, bytes };
  },
};
const byType = {};
let elements = 0;
let srcBytes = 0;
let tensors = 0;
let wall = 0;
let cpuUs = 0;
for (const [name, info] of ckpt.tensors) {
  if (info.shape.length < 2 || !['BF16', 'F16', 'F32'].includes(info.dtype) || name.includes('visual')) continue;
  if (source === 'memory' && info.dtype !== 'BF16') continue;
  const cols = info.shape[info.shape.length - 1];
  const allRows = info.shape.slice(0, -1).reduce((a, b) => a * b, 1);
  const type = quantTypeFor(mode, name, cols);
  if (!type) continue;
  const rows = Math.max(1, Math.ceil(allRows * fraction));
  let run = () => loadQuantized(ckpt, kernels, name, type, 0, rows, cols, undefined, quantizer);
  if (source === 'memory') {
    const raw = new Uint8Array(rows * cols * 2);
    ckpt.readRangeInto(name, 0, raw);
    const { bytes } = kernels.allocWeight(type, rows, cols);
    run = () => quantizeInMemory(type, new Uint16Array(raw.buffer), rows, cols, bytes);
  }
  const c = process.cpuUsage();
  const t = performance.now();
  run();
  const dt = (performance.now() - t) / 1e3;
  const dc = process.cpuUsage(c);
  wall += dt;
  cpuUs += dc.user + dc.system;
  const e = rows * cols;
  const s = (byType[type] ??= { tensors: 0, elements: 0, wall_s: 0 });
  s.tensors++;
  s.elements += e;
  s.wall_s += dt;
  elements += e;
  srcBytes += e * (info.dtype === 'F32' ? 4 : 2);
  tensors++;
}
const cpu = { user: cpuUs, system: 0 };
quantizer?.dispose?.();
ckpt.close();
for (const s of Object.values(byType)) s.mb_per_s = +((s.elements * 2) / s.wall_s / 1e6).toFixed(1);
process.stdout.write(JSON.stringify({
  model: resolve(values.model), mode, impl, source, threads, fraction, tensors, elements, source_bytes: srcBytes,
  wall_s: +wall.toFixed(2), cpu_s: +((cpu.user + cpu.system) / 1e6).toFixed(2),
  mb_per_s: +(srcBytes / wall / 1e6).toFixed(1), ns_per_element: +((wall * 1e9) / elements).toFixed(2),
  cpu_ns_per_element: +(((cpu.user + cpu.system) * 1e3) / elements).toFixed(2), by_type: byType,
  load_average: loadavg().map((v) => +v.toFixed(2)), node: process.version,
}) + '\n');
