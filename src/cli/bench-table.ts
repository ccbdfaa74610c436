// `deltaserve bench` output: a short table by default (as llama-bench prints: one row per
// test with its rate and spread), or the whole report as JSON (--json) with every fraction
// rounded to 4 significant digits (no 16-digit floats).

/** `x` rounded to `digits` significant digits (integers and non-finite values unchanged). */
export function roundSig(x: number, digits = 4): number {
  if (!Number.isFinite(x) || Number.isInteger(x)) return x;
  return Number(x.toPrecision(digits));
}

/** A copy of a JSON value with every number rounded by roundSig. */
export function roundNumbers(v: unknown, digits = 4): unknown {
  if (typeof v === 'number') return roundSig(v, digits);
  if (Array.isArray(v)) return v.map((x) => roundNumbers(x, digits));
  if (v !== null && typeof v === 'object') {
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, roundNumbers(x, digits)]));
  }
  return v;
}

/** 3 significant digits as text, without an exponent (12345 → "12345", 0.01234 → "0.0123"). */
export function sig3(x: number): string {
  if (!Number.isFinite(x)) return String(x);
  if (Math.abs(x) >= 100) return x.toFixed(0);
  if (x === 0) return '0';
  const decimals = Math.max(0, 2 - Math.floor(Math.log10(Math.abs(x))));
  return x.toFixed(decimals);
}

/** `spread` printed with as many decimals as `median` has in sig3. */
function withSpread(median: number, spread: number): string {
  const m = sig3(median);
  const decimals = m.includes('.') ? m.length - m.indexOf('.') - 1 : 0;
  return `${m} ± ${spread.toFixed(decimals)}`;
}

interface Stat { readonly median: number; readonly min: number; readonly max: number }

/** The fields of bench's report the table reads (bench.ts report()). */
export interface BenchReport {
  readonly mode: string;
  readonly batch: number;
  readonly threads: number;
  readonly kernels: string;
  readonly model: string;
  readonly prompt_tokens: number;
  readonly verify_tokens?: number;
  readonly gen_tokens: number;
  readonly weight_types: Record<string, number>;
  readonly tok_s: Stat;
  readonly ms_per_step: Stat;
  readonly roofline_fraction: number | null;
  readonly roofline_tok_s: number | null;
  readonly bandwidth_gbs: number | null;
  readonly weight_bytes_per_step: number;
}

/** The test's name in llama-bench's style: pp512 (prefill), tg32 (decode), plus the context. */
export function testName(r: BenchReport): string {
  if (r.mode === 'prefill') return `pp${r.prompt_tokens}`;
  if (r.mode === 'verify') return `verify${r.verify_tokens ?? 0} @ ${r.prompt_tokens}`;
  return `tg${r.gen_tokens} @ ${r.prompt_tokens}`;
}

/** Weight formats by how many matrices use them, most first (at most two). */
function formats(types: Record<string, number>): string {
  return Object.entries(types).sort((a, b) => b[1] - a[1]).slice(0, 2).map(([t]) => t).join('+');
}

function markdownTable(head: readonly string[], rows: readonly (readonly string[])[], right: ReadonlySet<number>): string {
  const width = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const cell = (s: string, i: number): string => (right.has(i) ? s.padStart(width[i]!) : s.padEnd(width[i]!));
  const line = (cells: readonly string[]): string => `| ${cells.map(cell).join(' | ')} |`;
  const rule = `|${width.map((w, i) => (right.has(i) ? `${'-'.repeat(w + 1)}:` : '-'.repeat(w + 2))).join('|')}|`;
  return [line(head), rule, ...rows.map(line)].join('\n');
}

/** The report as a table and a line saying what the roofline is. */
export function formatBenchTable(r: BenchReport): string {
  const name = r.model.split(/[\\/]/).filter(Boolean).pop() ?? r.model;
  const spread = (r.tok_s.max - r.tok_s.min) / 2;
  const roofline = r.roofline_fraction === null ? 'n/a' : `${(r.roofline_fraction * 100).toFixed(0)}%`;
  const head = ['model', 'weights', 'kernels', 'threads', 'batch', 'test', 'tok/s', 'ms/step', 'of roofline'];
  const row = [name, formats(r.weight_types), r.kernels, String(r.threads), String(r.batch), testName(r),
    withSpread(r.tok_s.median, spread), sig3(r.ms_per_step.median), roofline];
  const note = r.bandwidth_gbs === null
    ? 'roofline: n/a (the memory-bandwidth probe runs on the wasm kernels, for decode and verify)'
    : `roofline: ${sig3(r.weight_bytes_per_step / 1e6)} MB of weights a step at the measured ${sig3(r.bandwidth_gbs)} GB/s` +
      (r.roofline_tok_s !== null ? ` = ${sig3(r.roofline_tok_s)} tok/s` : '');
  return `${markdownTable(head, [row], new Set([3, 4, 6, 7, 8]))}\n${note}; tok/s: median ± half the range over runs (--json: every number)\n`;
}
