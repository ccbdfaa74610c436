// Image encode time side by side with llama.cpp, same run: a 448×448 image on a make-model
// shape's tower (qwen3.5-0.8b by default), deltaserve's tower (scripts/bench-vision.mjs: wasm
// linear layers, the tower in-process) and llama-mtmd-cli's (it logs "mtmd batch encoding
// done in N ms"), interleaved round by round; prints one JSON object with each round and the
// medians. The llama.cpp side needs the shape as GGUF: make-model --layout release (any
// --layers / --vocab-size: only the tower is timed) then `deltaserve quantize --type f16`,
// which writes the text GGUF and mmproj-NAME-F16.gguf beside it.
// --baseline DIR also times another checkout's tower (DIR/scripts/bench-vision.mjs with its own
// built dist/ and build/, e.g. a copy made before a change) in the same rounds: a before/after
// pair measured under the same load.
// Usage: node scripts/bench-vision-llamacpp.mjs LLAMA_BIN TEXT.gguf MMPROJ.gguf [--rounds 3] [--threads 2] [--shape qwen3.5-0.8b] [--baseline DIR]
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { encodePng } from '../dist/test/vision-encode.js';

const { values: v, positionals: [bin, text, mmproj] } = parseArgs({
  allowPositionals: true,
  options: { rounds: { type: 'string', default: '3' }, threads: { type: 'string', default: '2' }, shape: { type: 'string', default: 'qwen3.5-0.8b' },
    baseline: { type: 'string' } },
});
if (!bin || !text || !mmproj) throw new Error('usage: node scripts/bench-vision-llamacpp.mjs LLAMA_BIN TEXT.gguf MMPROJ.gguf [--rounds N] [--threads N]');
const SIZE = 448;
const dir = mkdtempSync(join(tmpdir(), 'bench-vision-'));
const image = join(dir, `image-${SIZE}.png`);
// the pattern of bench-vision.mjs's image (the timing does not depend on the pixels)
const rgba = new Uint8Array(SIZE * SIZE * 4);
for (let i = 0; i < SIZE * SIZE; i++) for (let c = 0; c < 3; c++) rgba[4 * i + c] = ((3 * i + c) * 2654435761) >>> 24;
for (let i = 0; i < SIZE * SIZE; i++) rgba[4 * i + 3] = 255;
writeFileSync(image, await encodePng(rgba, SIZE, SIZE));

/** One encode by the tower of this checkout (or of `root`, a baseline checkout). */
function deltaserve(root) {
  const script = root ? join(root, 'scripts', 'bench-vision.mjs') : new URL('bench-vision.mjs', import.meta.url).pathname;
  const out = execFileSync(process.execPath, [script, '--shape', v.shape, '--size', String(SIZE), '--threads', v.threads, '--runs', '1'], { encoding: 'utf8' });
  return JSON.parse(out.trim().split('\n').at(-1));
}

function llama() {
  const args = ['-m', text, '--mmproj', mmproj, '--image', image, '-p', 'x', '-n', '1', '-c', '4096', '-t', v.threads, '--no-warmup', '--temp', '0'];
  const run = spawnSync(join(bin, 'llama-mtmd-cli'), args, { encoding: 'utf8', stdio: ['ignore', 'ignore', 'pipe'] });
  const log = run.stderr;
  if (run.status !== 0) throw new Error(`llama-mtmd-cli failed (${run.status ?? run.signal}):\n${log.slice(-2000)}`);
  const m = /mtmd batch encoding done in (\d+) ms/.exec(log) ?? /image slice encoded in (\d+) ms/.exec(log);
  if (!m) throw new Error(`no encode time in llama-mtmd-cli's log:\n${log.slice(-2000)}`);
  const tokens = /n_tokens_batch = (\d+)/.exec(log);
  return { encode_ms: Number(m[1]), image_tokens: tokens ? Number(tokens[1]) : null, command: `llama-mtmd-cli ${args.join(' ')}` };
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const rounds = [];
for (let r = 0; r < Number(v.rounds); r++) {
  const base = v.baseline ? deltaserve(v.baseline) : null;
  const ds = deltaserve();
  const lc = llama();
  rounds.push({ ...(base ? { baseline_ms: base.encode_ms, baseline_cpu_ms: base.encode_cpu_ms[0] } : {}),
    deltaserve_ms: ds.encode_ms, deltaserve_cpu_ms: ds.encode_cpu_ms[0], llama_ms: lc.encode_ms, deltaserve_tokens: ds.image_tokens, llama_tokens: lc.image_tokens, load: Number(execFileSync('cat', ['/proc/loadavg'], { encoding: 'utf8' }).split(' ')[0]) });
  process.stderr.write(`round ${r + 1}: ${base ? `baseline ${base.encode_ms} ms, ` : ''}deltaserve ${ds.encode_ms} ms, llama.cpp ${lc.encode_ms} ms\n`);
  if (r === 0) Object.assign(rounds, { meta: { ds, lc } });
}
rmSync(dir, { recursive: true, force: true });
const ds = median(rounds.map((x) => x.deltaserve_ms));
const lc = median(rounds.map((x) => x.llama_ms));
const baseline = v.baseline ? {
  baseline: v.baseline, baseline_ms: median(rounds.map((x) => x.baseline_ms)), baseline_cpu_ms: median(rounds.map((x) => x.baseline_cpu_ms)),
  baseline_ratio: Number((median(rounds.map((x) => x.baseline_ms)) / lc).toFixed(2)),
} : {};
console.log(JSON.stringify({
  shape: v.shape, image: `${SIZE}x${SIZE}`, threads: Number(v.threads), node: process.version, tower: rounds.meta.ds.tower,
  deltaserve_ms: ds, deltaserve_cpu_ms: median(rounds.map((x) => x.deltaserve_cpu_ms)), llama_ms: lc, ratio: Number((ds / lc).toFixed(2)), ...baseline, rounds: rounds.map(({ meta: _m, ...x }) => x), llama_command: rounds.meta.lc.command,
}));
