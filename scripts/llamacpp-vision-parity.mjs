// Writes test/fixtures/llamacpp-vision/expected.json: llama.cpp's greedy continuations
// (llama-mtmd-cli) on the tiny-vision fixture's text GGUF + mmproj for each case, which
// test/llamacpp-vision-parity.test.ts replays in deltaserve (no llama.cpp at test time).
// The random-weight model repeats one token, so each case also runs with growing lists of
// banned ids (logit bias −inf): deltaserve's greedy pick, then its runner-up, … must be
// llama.cpp's too — the ranking of the top tokens, not only the first.
// Usage (after `npx tsc`; LLAMA: a llama.cpp build's bin directory):
//   node scripts/llamacpp-vision-parity.mjs LLAMA_BIN LLAMA_COMMIT
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Engine } from '../dist/src/engine/engine.js';
import { PARITY_CASES, PARITY_DIR, parityAnswer } from '../dist/test/llamacpp-vision-cases.js';

const [bin, commit] = process.argv.slice(2);
if (!bin || !commit) throw new Error('usage: node scripts/llamacpp-vision-parity.mjs LLAMA_BIN LLAMA_COMMIT');
const TEXT = 'text-tiny-vision-F32.gguf';
const MMPROJ = 'mmproj-tiny-vision-F32.gguf';
const FLAGS = ['--temp', '0', '-t', '2', '--no-warmup', '-ctk', 'f32', '-ctv', 'f32', '-fa', 'off', '--jinja', '--image-min-tokens', '64'];

/** One case's stdout. llama-mtmd-cli prints through an asynchronous logger that can lose
 * the tail of its output at exit; its last words are "\n\n". A lost tail only shortens the
 * output, and one that ends in "\n" tokens can still end in "\n\n", so the longest of three
 * runs that end so is kept. */
function llama(image, prompt, banned, n) {
  const args = ['-m', TEXT, '--mmproj', MMPROJ, '--image', image, '-p', prompt, '-n', String(n), ...FLAGS, ...banned.flatMap((id) => ['-l', `${id}-inf`])];
  let best = null;
  for (let attempt = 0; attempt < 3; attempt++) {
    const stdout = execFileSync(join(bin, 'llama-mtmd-cli'), args, { cwd: PARITY_DIR, stdio: ['ignore', 'pipe', 'ignore'] }).toString('latin1');
    if (stdout.endsWith('\n\n') && (best === null || stdout.length > best.length)) best = stdout;
  }
  if (best === null) throw new Error(`llama-mtmd-cli never printed its whole output: ${args.join(' ')}`);
  return { command: `llama-mtmd-cli ${args.map((a) => (/[\s?]/.test(a) ? JSON.stringify(a) : a)).join(' ')}`, stdout: best };
}

const engine = await Engine.load({ model: join(PARITY_DIR, TEXT), mmproj: join(PARITY_DIR, MMPROJ), kernels: 'ref', specTokens: 0, maxRunning: 1, prefixCache: false });
const cases = [];
for (const c of PARITY_CASES) {
  const banned = [];
  for (let round = 0; round < 4; round++) {
    const ours = await parityAnswer(engine, c, banned, 16);
    const run = llama(c.image, c.prompt, banned, 16);
    cases.push({ ...c, banned: [...banned], max_tokens: 16, ...run });
    console.log(`${c.image} ${JSON.stringify(c.prompt)} banned [${banned}]: llama.cpp ${JSON.stringify(run.stdout)} deltaserve ${JSON.stringify(ours.stdout)}`);
    banned.push(ours.ids[0]);
  }
}
await engine.close();
writeFileSync(join(PARITY_DIR, 'expected.json'), `${JSON.stringify({
  llama_cpp: { commit, source: 'node-llama-cpp 3.22.1 llama/gitRelease.bundle (tag in llama.cpp.info.json)', tool: 'llama-mtmd-cli' },
  build: 'cmake -B build -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON -DGGML_AVX_VNNI=ON -DLLAMA_CURL=OFF -DLLAMA_BUILD_SERVER=OFF -DCMAKE_BUILD_TYPE=Release',
  text_gguf: `${TEXT}: PYTHONPATH=<llama.cpp>/gguf-py python3 to_gguf.py test/fixtures/tiny-vision ${TEXT} --type f32 (shared/peer-bench/to_gguf.py, skipping model.visual.* and adding chat_template.jinja)`,
  mmproj: `${MMPROJ}: node scripts/llamacpp-vision-inputs.mjs (deltaserve's writer; the BF16 tower widened exactly)`,
  stdout: 'llama-mtmd-cli prints "\\n", the pieces, "\\n" more when it stops at an end-of-generation token, then "\\n\\n" (the longest of 3 runs: its logger can lose the tail at exit)',
  cases,
}, null, 1)}\n`);
