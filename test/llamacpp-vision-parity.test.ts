// llama.cpp parity on the tiny-vision fixture: llama-mtmd-cli's greedy continuations, kept in
// test/fixtures/llamacpp-vision/expected.json (scripts/llamacpp-vision-parity.mjs wrote them
// with the commit and exact command lines), replayed by deltaserve on the same text GGUF,
// mmproj, images and prompts — every case, and every banned-id round (the ranking of the top
// tokens), must print what llama.cpp printed. No llama.cpp at test time.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Engine } from '../src/engine/engine.js';
import { TINY_VISION } from './vision-helpers.js';
import { PARITY_CASES, PARITY_DIR, type ParityCase, parityAnswer } from './llamacpp-vision-cases.js';

interface Recorded extends ParityCase {
  readonly banned: readonly number[];
  readonly max_tokens: number;
  readonly command: string;
  readonly stdout: string;
}
const expected = JSON.parse(readFileSync(join(PARITY_DIR, 'expected.json'), 'utf8')) as { llama_cpp: { commit: string }; cases: Recorded[] };
let gguf: Engine;

before(async () => {
  gguf = await Engine.load({
    model: join(PARITY_DIR, 'text-tiny-vision-F32.gguf'), mmproj: join(PARITY_DIR, 'mmproj-tiny-vision-F32.gguf'),
    kernels: 'ref', specTokens: 0, maxRunning: 1, prefixCache: false,
  });
});
after(async () => { await gguf.close(); });

/** The stdout llama.cpp printed (recorded whole: the generator repeats a run whose logger
 * lost the tail) is what deltaserve's answer prints as. */
function sameOutput(ours: string, llama: string, what: string): void {
  assert.equal(ours, llama, `${what}: deltaserve ${JSON.stringify(ours)}, llama.cpp ${JSON.stringify(llama)}`);
}

test('the fixture covers every case with 4 rounds of banned ids, from one llama.cpp commit', () => {
  assert.match(expected.llama_cpp.commit, /^[0-9a-f]{40}$/);
  for (const c of PARITY_CASES) {
    const rounds = expected.cases.filter((r) => r.image === c.image && r.prompt === c.prompt);
    assert.deepEqual(rounds.map((r) => r.banned.length), [0, 1, 2, 3], `${c.image} ${c.prompt}`);
    for (const r of rounds) {
      assert.ok(r.command.startsWith('llama-mtmd-cli ') && r.command.includes(`--image ${c.image}`));
      assert.ok(r.stdout.endsWith('\n\n'), 'recorded whole');
    }
  }
});

test('deltaserve (text GGUF + mmproj) prints llama.cpp\'s greedy continuation in every case and round', async () => {
  for (const r of expected.cases) {
    const ours = await parityAnswer(gguf, r, r.banned, r.max_tokens);
    sameOutput(ours.stdout, r.stdout, `${r.image} ${JSON.stringify(r.prompt)} banned [${r.banned}]`);
  }
});

test('the safetensors directory gives the same answers (the GGUF pair holds its weights exactly)', async () => {
  const dir = await Engine.load({ model: TINY_VISION, kernels: 'ref', specTokens: 0, maxRunning: 1, prefixCache: false });
  try {
    for (const r of expected.cases.filter((x) => x.image === PARITY_CASES[0]!.image && x.prompt === PARITY_CASES[0]!.prompt)) {
      sameOutput((await parityAnswer(dir, r, r.banned, r.max_tokens)).stdout, r.stdout, `directory, banned [${r.banned}]`);
    }
  } finally {
    await dir.close();
  }
});

test('where llama.cpp letterboxes, HF\'s stretch (deltaserve\'s own preprocessing) answers differently: the case is discriminating', async () => {
  const boxed = expected.cases.find((r) => r.letterbox && r.banned.length === 1)!;
  const stretched = await parityAnswer(gguf, { ...boxed, letterbox: false }, boxed.banned, boxed.max_tokens);
  assert.notEqual(stretched.stdout, boxed.stdout);
});
