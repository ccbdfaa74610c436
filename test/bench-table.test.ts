// bench's output (cli/bench-table.ts): 4-significant-digit JSON, the table's numbers, and
// the table of a real run agreeing with the JSON of the same report.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { type BenchReport, formatBenchTable, roundNumbers, roundSig, sig3, testName } from '../src/cli/bench-table.js';
import { REPO_ROOT } from './paths.js';

test('roundSig / roundNumbers: 4 significant digits, integers and strings untouched', () => {
  assert.equal(roundSig(0.29123456789012), 0.2912);
  assert.equal(roundSig(14222336.5), 14220000);
  assert.equal(roundSig(1234567), 1234567);
  assert.equal(roundSig(Number.NaN), Number.NaN);
  assert.deepEqual(roundNumbers({ a: [1.23456, 'x', null, 7], b: { c: 2 / 3 } }), { a: [1.235, 'x', null, 7], b: { c: 0.6667 } });
});

test('sig3: 3 significant digits, no exponent', () => {
  assert.deepEqual([12345.6, 123.4, 12.345, 1.2345, 0.012345, 0].map(sig3), ['12346', '123', '12.3', '1.23', '0.0123', '0']);
});

const REPORT: BenchReport = {
  mode: 'decode', batch: 8, threads: 2, kernels: 'wasm', model: '/m/qwen3.5-0.8b', prompt_tokens: 128, gen_tokens: 32,
  weight_types: { q8_0: 150, f32: 40, bf16: 1 }, tok_s: { median: 61.234, min: 58.1, max: 63.9 },
  ms_per_step: { median: 130.64, min: 125, max: 137.7 }, roofline_fraction: 0.8123, roofline_tok_s: 75.4,
  bandwidth_gbs: 9.87, weight_bytes_per_step: 812_000_000,
};

test('the table: one row with the test name, tok/s ± half the range, ms/step, share of roofline', () => {
  const lines = formatBenchTable(REPORT).trimEnd().split('\n');
  assert.equal(lines.length, 4);
  const cells = lines[2]!.split('|').slice(1, -1).map((c) => c.trim());
  assert.deepEqual(cells, ['qwen3.5-0.8b', 'q8_0+f32', 'wasm', '2', '8', 'tg32 @ 128', '61.2 ± 2.9', '131', '81%']);
  assert.match(lines[3]!, /812 MB of weights a step at the measured 9.87 GB\/s = 75.4 tok\/s/);
  assert.equal(testName({ ...REPORT, mode: 'prefill' }), 'pp128');
  assert.equal(testName({ ...REPORT, mode: 'verify', verify_tokens: 4 }), 'verify4 @ 128');
  const none = formatBenchTable({ ...REPORT, roofline_fraction: null, bandwidth_gbs: null, roofline_tok_s: null });
  assert.match(none, /\| +n\/a \|\n/);
});

test('deltaserve bench prints the table by default and the JSON with --json (tiny-think)', () => {
  const run = (extra: string[]): string => {
    const r = spawnSync(process.execPath, [join(REPO_ROOT, 'dist', 'src', 'cli', 'main.js'), 'bench', '--gen-tokens', '2',
      '--prompt-tokens', '4', '--repeat', '1', '--threads', '1', ...extra], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    return r.stdout;
  };
  const table = run([]);
  assert.match(table, /^\| model +\| weights +\| kernels .*\| +tok\/s \| ms\/step \| of roofline \|\n/);
  assert.match(table, /\| tiny-think \| bf16\+f32 \|/);
  const json = JSON.parse(run(['--json'])) as Record<string, unknown>;
  assert.equal(json['gen_tokens'], 2);
  const walk = (v: unknown): void => {
    if (typeof v === 'number') assert.equal(Number(v.toPrecision(Math.max(4, Math.ceil(Math.log10(Math.abs(v) + 1))))), v, `${v}: at most 4 significant digits`);
    else if (v && typeof v === 'object') Object.values(v).forEach(walk);
  };
  walk(json);
  // a BF16 model: no quantized format was calibrated
  const q = json['quant_kernels'] as Record<string, unknown> | undefined;
  if (q) for (const k of ['q8x4M1Ms', 'q4kx4M1Ms', 'q6kx4M1Ms', 'q5kx4M1Ms']) assert.deepEqual(q[k], {}, k);
});
