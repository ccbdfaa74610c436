// The prompt frontend builds exactly the chat prompts the server built before it existed:
// token ids, message-end split points and the reasoning start of chat turns with and without
// tools (inlined for a template without tool support, handed to XML- and JSON-style tool
// templates), thinking on and off. The goldens (fixtures/frontend-prompts.golden.json) were
// recorded from server/chat-prompt.ts's chatPrompt at commit 679e18e, before the move, over
// the cases in frontend-golden-cases.ts. Each path that builds a chat prompt now is checked
// against them: the server's adapter, the frontend on the calling thread, the prepare pool's
// workers, and the library's one-call engine.generate({ messages }).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Engine } from '../src/engine/engine.js';
import { chatPrompt as frontendChatPrompt } from '../src/frontend/chat-prompt.js';
import { PromptFrontend } from '../src/frontend/frontend.js';
import { PreparePool } from '../src/frontend/prepare-pool.js';
import { chatPrompt, toolSetup } from '../src/server/api/chat-prompt.js';
import type { ServerContext } from '../src/server/context.js';
import { TextTokenizer } from '../src/tokenizer/tokenizer.js';
import { GOLDEN_CASES, type GoldenCase, type GoldenPrompt, type GoldenTemplate } from './frontend-golden-cases.js';
import { REPO_ROOT, TINY_THINK } from './paths.js';

const GOLDEN = JSON.parse(readFileSync(join(REPO_ROOT, 'test', 'fixtures', 'frontend-prompts.golden.json'), 'utf8')) as Record<string, GoldenPrompt>;
const tok = TextTokenizer.load(TINY_THINK());
const TEMPLATES: Record<GoldenTemplate, string> = {
  tiny: tok.chatTemplate!,
  xml: readFileSync(join(REPO_ROOT, 'test', 'fixtures', 'qwen-xml-tools.jinja'), 'utf8'),
  json: readFileSync(join(REPO_ROOT, 'test', 'fixtures', 'qwen-json-tools.jinja'), 'utf8'),
};

function frontendFor(template: GoldenTemplate): PromptFrontend {
  const t = Object.assign(Object.create(tok) as TextTokenizer, { chatTemplate: TEMPLATES[template] });
  return new PromptFrontend(t, { vocabSize: tok.size, maxContext: 1 << 20, modelType: 'qwen3_5_text' });
}

/** A server context with no prepare pool (jobs run inline) over the frontend. */
function serverContext(frontend: PromptFrontend, pool?: PreparePool): ServerContext {
  return { engine: { info: { frontend }, maxContext: frontend.maxContext }, ...(pool ? { prepare: pool } : {}) } as unknown as ServerContext;
}

function golden(c: GoldenCase): GoldenPrompt {
  const g = GOLDEN[c.name];
  assert.ok(g, `no golden for case "${c.name}"`);
  return g;
}

test('every case has its golden, each with split points inside the prompt', () => {
  assert.deepEqual(Object.keys(GOLDEN).sort(), GOLDEN_CASES.map((c) => c.name).sort());
  for (const c of GOLDEN_CASES) {
    const g = golden(c);
    assert.ok(g.boundaries.length >= 1 && g.boundaries.every((b) => b > 0 && b < g.ids.length), c.name);
  }
});

test('the server\'s chat prompt (through the frontend) equals the golden: ids, split points, thinking', async () => {
  for (const c of GOLDEN_CASES) {
    const ctx = serverContext(frontendFor(c.template));
    const p = await chatPrompt(ctx, c.messages, c.think, c.kwargs, toolSetup(ctx, c.tools, c.choice, true));
    assert.deepEqual({ ids: p.ids, boundaries: p.boundaries, thinking: p.thinking, thinkStart: p.thinkStart }, golden(c), c.name);
  }
});

test('the frontend alone gives the same prompts (tools placed as the server asks, no server code)', async () => {
  for (const c of GOLDEN_CASES) {
    const frontend = frontendFor(c.template);
    const tools = { offered: c.choice.kind === 'none' ? [] : c.tools, format: frontend.toolFormat, parallel: c.tools.length > 0 ? true : null };
    const p = await frontendChatPrompt({ engine: { info: { frontend } } }, c.messages, c.think, c.kwargs, tools);
    assert.deepEqual({ ids: p.ids, boundaries: p.boundaries }, { ids: golden(c).ids, boundaries: golden(c).boundaries }, c.name);
    if (c.tools.length === 0) {
      // the library's prompt (what engine.generate({ messages }) runs) is the same
      const lib = frontend.prompt({ messages: c.messages, think: c.think, chatTemplateKwargs: c.kwargs });
      assert.deepEqual({ ids: lib.ids, boundaries: lib.boundaries }, { ids: golden(c).ids, boundaries: golden(c).boundaries }, c.name);
    }
  }
});

test('the prepare pool\'s workers build the same prompts as the calling thread', async (t) => {
  const frontend = new PromptFrontend(tok, { vocabSize: tok.size, maxContext: 1 << 20, modelType: 'qwen3_5_text' });
  const data = frontend.workerData();
  assert.ok(data, 'a tokenizer loaded from a directory can be rebuilt in a worker');
  const pool = new PreparePool(data, 2, 60_000);
  t.after(() => pool.close());
  await pool.ready();
  const tiny = GOLDEN_CASES.filter((c) => c.template === 'tiny');
  assert.ok(tiny.length >= 3);
  const ctx = serverContext(frontend, pool);
  const got = await Promise.all(tiny.map((c) => chatPrompt(ctx, c.messages, c.think, c.kwargs, toolSetup(ctx, c.tools, c.choice, true))));
  tiny.forEach((c, i) => assert.deepEqual({ ids: got[i]!.ids, boundaries: got[i]!.boundaries }, { ids: golden(c).ids, boundaries: golden(c).boundaries }, c.name));
});

test('engine.generate({ messages }) runs the golden prompt; the engine itself takes ids and split points', async (t) => {
  const engine = await Engine.load({ model: TINY_THINK(), kernels: 'ref', specTokens: 0, maxRunning: 2, log: () => {} });
  t.after(() => engine.close());
  const c = GOLDEN_CASES.find((x) => x.template === 'tiny' && x.tools.length === 0 && x.messages.length > 1)!;
  const chat = await engine.complete({ messages: c.messages, think: c.think, maxTokens: 4, temperature: 0 });
  assert.deepEqual(chat.promptIds, golden(c).ids);
  const ids = await engine.complete({ promptIds: golden(c).ids, messageBoundaries: golden(c).boundaries, maxTokens: 4, temperature: 0 });
  assert.deepEqual(ids.outputIds, chat.outputIds);
  // what the CLI sends: the frontend's ids, the text fields dropped
  const cli = await engine.complete(engine.info.frontend.withPromptIds({ messages: c.messages, think: c.think, maxTokens: 4, temperature: 0 }));
  assert.deepEqual([cli.promptIds, cli.outputIds], [golden(c).ids, chat.outputIds]);
  assert.equal(engine.info.frontend.tokenizer, engine.tokenizer);
  assert.equal(engine.info.maxContext, engine.maxContext);
  assert.equal(engine.info.config.vocabSize, engine.info.frontend.vocabSize);
});
