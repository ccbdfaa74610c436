// The "Batch M > 1" tables of docs/kernels.md in one command: runs scripts/gpu-batch-model.mjs
// (recording on this machine's adapter, BF16, Q8_0 and Q4_K_M; the quantized formats again
// with --fold-quant-acts off) and prints the tables as markdown, or with --write FILE puts
// them between FILE's `<!-- gpu-batch-tables:begin -->` and `<!-- gpu-batch-tables:end -->`.
//   npx tsc && node scripts/gpu-batch-tables.mjs [--write docs/kernels.md] [--shapes ...]
//        [--formats bf16,q8_0,q4_k_m] [--from-dir DIR] (reuse DIR's saved recordings)
import { parseArgs } from 'node:util';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const { values } = parseArgs({
  options: {
    shapes: { type: 'string', default: 'qwen3.5-4b,qwen3.5-0.8b' },
    formats: { type: 'string', default: 'bf16,q8_0,q4_k_m' },
    write: { type: 'string' },
    'from-dir': { type: 'string' },
    dir: { type: 'string', default: '/tmp/gpu-batch-tables' },
  },
});
const MODEL = fileURLToPath(new URL('./gpu-batch-model.mjs', import.meta.url));
const dir = values['from-dir'] ?? values.dir;
mkdirSync(dir, { recursive: true });
const quantized = values.formats.split(',').filter((f) => f !== 'bf16');

/** The model's JSON for one recording setting (recorded now, or modelled from --from-dir's records). */
function run(name, formats, extra) {
  const records = join(dir, `${name}.records.json`);
  const out = join(dir, `${name}.json`);
  const source = values['from-dir'] && existsSync(records) ? ['--from', records] : ['--records', records, '--shapes', values.shapes, '--formats', formats];
  execFileSync(process.execPath, [MODEL, ...source, '--out', out, ...extra], { stdio: ['ignore', 'ignore', 'inherit'] });
  return JSON.parse(readFileSync(out, 'utf8'));
}

const runs = [{ fold: 'on', json: run('folded', values.formats, []) }];
if (quantized.length > 0) runs.push({ fold: 'off', json: run('unfolded', quantized.join(','), ['--fold-quant-acts', 'off']) });

const FORMAT = { bf16: 'BF16', q8_0: 'Q8_0', q4_k_m: 'Q4_K_M' };
const f2 = (v) => v.toFixed(2);
const lohi = (a) => `${f2(a[0])} – ${f2(a[1])}`;
const gpuName = (g) => (g.startsWith('H100') ? 'H100 SXM' : g.split(' ')[0]);
const label = (r, fold) => `${FORMAT[r.format] ?? r.format}${r.format !== 'bf16' && fold === 'off' ? ' (acts not folded)' : ''}`;
const rows = runs.flatMap(({ fold, json }) => json.results.filter((r) => fold === 'on' || r.format !== 'bf16').map((r) => ({ r, fold })));
rows.sort((a, b) => a.r.shape.localeCompare(b.r.shape) * -1 || values.formats.split(',').indexOf(a.r.format) - values.formats.split(',').indexOf(b.r.format)
  || (a.fold === 'on' ? -1 : 1) - (b.fold === 'on' ? -1 : 1) || a.r.gpu.localeCompare(b.r.gpu));

const decode = ['| shape | format | GPU | decode GPU µs (fraction of peak) | dispatches | step µs at 24 µs a dispatch: serial / chunked | of 4.3 TB/s: GPU / serial / chunked |',
  '|---|---|---|---|---|---|---|',
  ...rows.map(({ r, fold }) => {
    const d = r.decode_1;
    const s = d.step['24us'];
    const t = d.fraction_of_target;
    return `| ${r.shape} | ${label(r, fold)} | ${gpuName(r.gpu)} | ${d.gpu_us.map(Math.round).join(' – ')} (${lohi(d.fraction_of_peak)}) | ${Math.round(d.dispatches)} | ${Math.round(s.serial_us)} / ${Math.round(s.chunked_us)} | ${f2(t.gpu_only[0])} / ${f2(t['24us'].serial)} / ${f2(t['24us'].chunked)} |`;
  })];
const ratios = ['| shape | format | GPU | verify k = 4 ÷ decode: GPU / serial 24 µs | 32 streams ÷ one: GPU / serial 24 / chunked 24 | MTP k = 3 at P 0.8: GPU / serial 24 / chunked 24 | MTP k = 3 ÷ overlapped decode, 24 µs: one read-back (the engine\'s greedy round) / two / sampled, one read-back (÷ sampled decode) |',
  '|---|---|---|---|---|---|---|',
  ...rows.map(({ r, fold }) => {
    const v = r.verify[4].verify_vs_decode;
    const s = r.streams[32].throughput_vs_one;
    const m = r.mtp_round.by_k[3].speedup;
    return `| ${r.shape} | ${label(r, fold)} | ${gpuName(r.gpu)} | ${lohi(v.gpu)} / ${lohi(v.serial_24us)} | ${lohi(s.gpu)} / ${lohi(s.serial_24us)} / ${f2(s.chunked_24us)} | ${lohi(m.gpu)} / ${lohi(m.serial_24us)} / ${f2(m.chunked_24us)} | ${f2(m.vs_overlapped_decode_24us)} / ${f2(m.two_read_backs_vs_overlapped_decode_24us)} / ${f2(m.sampled_vs_overlapped_sampled_decode_24us)} |`;
  })];
// every ratio of one configuration: the first shape's first format on the last GPU (4b BF16 H200)
const main = rows.find(({ r, fold }) => fold === 'on' && r.format === values.formats.split(',')[0] && r.shape === values.shapes.split(',')[0] && r.gpu.startsWith('H200')) ?? rows[0];
const all = (o) => `${lohi(o.gpu)} | ${lohi(o.serial_24us)} | ${lohi(o.serial_36us)} | ${f2(o.chunked_24us)} | ${f2(o.chunked_36us)}`;
const detail = [`| ${main.r.shape} ${label(main.r, main.fold)} ${gpuName(main.r.gpu)} | GPU only | serial, 24 µs | serial, 36 µs | chunked, 24 µs | chunked, 36 µs |`, '|---|---|---|---|---|---|',
  ...Object.entries(main.r.verify).map(([k, v]) => `| verify k = ${k} ÷ decode | ${all(v.verify_vs_decode)} |`),
  ...Object.entries(main.r.streams).map(([s, v]) => `| ${s} streams ÷ one | ${all(v.throughput_vs_one)} |`),
  ...Object.entries(main.r.mtp_round.by_k).map(([k, v]) => `| MTP k = ${k} (E ${v.tokens_per_round.toFixed(2)}) | ${all(v.speedup)} |`)];
const text = [decode.join('\n'), ratios.join('\n'), detail.join('\n')].join('\n\n');
if (values.write) {
  const doc = readFileSync(values.write, 'utf8');
  const begin = '<!-- gpu-batch-tables:begin -->';
  const end = '<!-- gpu-batch-tables:end -->';
  const i = doc.indexOf(begin);
  const j = doc.indexOf(end);
  if (i < 0 || j < i) throw new Error(`${values.write}: no ${begin} … ${end}`);
  writeFileSync(values.write, `${doc.slice(0, i + begin.length)}\n${text}\n${doc.slice(j)}`);
}
console.log(text);
