// `deltaserve serve --kernels webgpu` as a process (Dawn on the machine's adapter; lavapipe
// without a GPU): the ready line names the backend and the adapter, Dawn's own warnings
// stay out of stderr, and one chat request through HTTP answers — for tiny-think and for a
// quantized GGUF fixture — with the same tokens as the CPU kernels give (greedy, MTP on,
// overlapped), and an unseeded sampled chat request answers with MTP rounds.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { sharedPath, TINY_THINK } from './paths.js';
import { type ServeProcess, spawnServe } from './serve-process.js';
import { post } from './server-helpers.js';
import { withEngine } from './engine-helpers.js';

/** serve --kernels webgpu on `model`; ready once the ready line names the adapter. Overlap on
 * (a GPU's default; off on a CPU adapter) and k fixed at 3: the completion's MTP rounds stay on
 * the device until their verify (pending-drafts.ts); a chat answer's carry the closed-think
 * mask (a constraint), so they read their drafts back first. */
const serve = (model: string): Promise<ServeProcess> => spawnServe(
  ['--kernels', 'webgpu', '--max-running', '2', '--kv-cache-tokens', '2048', '--max-context', '1024', '--no-webui',
    '--overlap', 'on', '--spec-tokens', '3', '--spec-adaptive', 'off'],
  { model, readyWhen: /kernels webgpu on .*binding \d+ MiB/ });

const CHAT = { messages: [{ role: 'user', content: 'What is 2 + 3?' }], max_tokens: 6, temperature: 0, ignore_eos: true };
const COMPLETION = { prompt: 'The capital of France is', max_tokens: 6, temperature: 0, ignore_eos: true };
// an unseeded sampled chat (what most clients send): verified by rejection sampling
const SAMPLED = { messages: [{ role: 'user', content: 'Name a color.' }], max_tokens: 10, temperature: 0.7, top_k: 20, top_p: 0.8, ignore_eos: true };

/** The completion's greedy text on the CPU kernels (in process). */
async function cpuText(model: string): Promise<string> {
  return withEngine({ model, specTokens: 0, prefixCache: false }, async (e) =>
    (await e.complete({ prompt: COMPLETION.prompt, maxTokens: COMPLETION.max_tokens, ignoreEos: true })).text);
}

for (const [name, model] of [['tiny-think', TINY_THINK], ['tiny-think Q8_0 GGUF', () => sharedPath('models', 'gguf', 'tiny-think-Q8_0.gguf')]] as const) {
  test(`serve --kernels webgpu: ${name}, one chat request through HTTP`, { timeout: 240_000 }, async () => {
    const s = await serve(model());
    try {
      const r = await post(`${s.url}/v1/chat/completions`, CHAT);
      assert.equal(r.status, 200, JSON.stringify(r.json));
      const chat = r.json as unknown as { choices: { finish_reason: string }[]; usage: { completion_tokens: number } };
      assert.equal(chat.usage.completion_tokens, 6);
      assert.equal(chat.choices[0]!.finish_reason, 'length');
      const c = await post(`${s.url}/v1/completions`, COMPLETION);
      assert.equal(c.status, 200, JSON.stringify(c.json));
      assert.equal((c.json as unknown as { choices: { text: string }[] }).choices[0]!.text, await cpuText(model()), 'same greedy text as the CPU kernels');
      const sampled = await post(`${s.url}/v1/chat/completions`, SAMPLED);
      assert.equal(sampled.status, 200, JSON.stringify(sampled.json));
      const out = sampled.json as unknown as { usage: { completion_tokens: number }; speculative: { rounds: number } | null };
      assert.equal(out.usage.completion_tokens, 10);
      assert.ok((out.speculative?.rounds ?? 0) > 0, `MTP rounds ran: ${JSON.stringify(out.speculative)}`);
    } finally {
      const code = await s.stop();
      assert.equal(code, 0, s.stderr());
    }
    assert.doesNotMatch(s.stderr(), /^Warning: /m, 'Dawn warnings are filtered out');
  });
}
