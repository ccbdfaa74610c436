// What an MTP round costs in read-backs, by request kind, through the engine: one chat-shaped
// request of each kind (the chat template's prompt, its reasoning mask as the server adds it:
// constrain/think.ts, and the server's JSON-schema constraint where the kind has one), alone,
// on one engine per kind. A read-back is one Kernels.readBack call (on a GPU a wait on the
// device: docs/speculative-decoding.md says which rounds take one, which two). Prints one JSON
// line per kind: read-backs, target steps, MTP rounds and those deferred (drafts read back with
// their verify), tokens, and read-backs per round (the prefill's one left out).
// Usage: node scripts/readback-survey.mjs [--kernels webgpu|wasm] [--model DIR] [--spec-tokens 3] [--tokens 24] [--overlap on|off]
// (wasm: the GPU's draft paths forced on, as the tests force them, so the counts are the GPU's.)
import { parseArgs } from 'node:util';
import { Engine } from '../dist/src/engine/engine.js';
import { withClosedThinkMask, withReasoningBudget } from '../dist/src/constrain/think.js';
import { THINK_CLOSE, THINK_OPEN } from '../dist/src/tokenizer/reasoning.js';
import { TokenTexts } from '../dist/src/server/api/logprobs.js';
import { structuredConstraint } from '../dist/src/server/api/structured.js';

const { values: v } = parseArgs({ options: {
  kernels: { type: 'string', default: 'webgpu' }, model: { type: 'string', default: 'models/tiny-think' },
  'spec-tokens': { type: 'string', default: '3' }, tokens: { type: 'string', default: '24' }, overlap: { type: 'string', default: 'on' },
} });
const SCHEMA = { type: 'object', properties: { n: { type: 'integer' }, s: { type: 'string', maxLength: 8 } }, required: ['n', 's'] };
const SAMPLED = { temperature: 0.7, topK: 20 };
/** Each kind: its sampling fields, where the prompt leaves reasoning, and its constraint. */
const KINDS = {
  'greedy, reasoning open': { think: 'open' },
  'greedy, reasoning closed': { think: 'closed' },
  'greedy, reasoning budget 8': { think: 'open', budget: 8 },
  'sampled (T 0.7, top-k 20)': { think: 'open', sampling: SAMPLED },
  'sampled, seeded': { think: 'open', sampling: { ...SAMPLED, seed: 7 } },
  'greedy, presence penalty 1.5': { think: 'open', sampling: { presencePenalty: 1.5 } },
  'sampled, presence penalty 1.5': { think: 'open', sampling: { ...SAMPLED, presencePenalty: 1.5 } },
  'greedy, logprobs 5': { think: 'open', sampling: { logprobs: { top: 5, onToken: () => undefined } } },
  'greedy, JSON schema': { think: 'closed', schema: true },
  'greedy, JSON schema, reasoning open': { think: 'open', schema: true },
  'sampled, JSON schema': { think: 'closed', schema: true, sampling: SAMPLED },
};

const forced = v.kernels === 'webgpu' ? {} : { penaltyChain: true, sampledChain: true, sampledCandidates: true, deferredDrafts: true };
for (const [kind, k] of Object.entries(KINDS)) {
  const e = await Engine.load({
    model: v.model, kernels: v.kernels, specTokens: Number(v['spec-tokens']), specAdaptive: false, overlapSteps: v.overlap === 'on',
    kvCacheTokens: 4096, maxContext: 2048, prefixCache: false,
  }, forced);
  try {
    const t = e.tokenizer;
    const ids = { open: t.tokenToId(THINK_OPEN), close: t.tokenToId(THINK_CLOSE) };
    const schema = k.schema ? structuredConstraint({ engine: e, texts: new TokenTexts(t) }, { kind: 'json_schema', name: 'answer', schema: SCHEMA }, null, k.think === 'open') : null;
    const inner = k.budget ? withReasoningBudget(schema, ids.close, k.budget, e.sampleVocab) : schema;
    const head = k.think === 'open' ? '<think>\n' : '<think>\n\n</think>\n\n';
    const req = {
      promptIds: t.encode(`<|im_start|>user\nWhat is 12 + 7?<|im_end|>\n<|im_start|>assistant\n${head}`), maxTokens: Number(v.tokens) + (k.schema && k.think === 'open' ? 16 : 0), ignoreEos: !k.schema,
      ...(k.sampling ?? {}), logitsAdjust: { bias: null, constraint: withClosedThinkMask(inner, k.think, ids, e.sampleVocab) },
    };
    const kernels = e.model.kernels;
    const readBack = kernels.readBack.bind(kernels);
    let readBacks = 0;
    kernels.readBack = (...args) => (readBacks++, readBack(...args));
    const out = await e.complete(req);
    const s = e.stats();
    const rounds = s.spec.rounds;
    console.log(JSON.stringify({
      kind, kernels: v.kernels, readBacks, steps: s.steps.prefill + s.steps.decode + s.steps.verify, rounds, deferredRounds: s.spec.deferredRounds,
      tokens: out.outputIds.length, readBacksPerRound: rounds > 0 ? +((readBacks - s.steps.prefill - s.steps.decode) / rounds).toFixed(2) : null,
    }));
  } finally {
    await e.close();
  }
}
