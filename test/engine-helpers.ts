// Shared helpers for engine tests: run a workload, capture every step's logits.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { Engine, type EngineOptions } from '../src/engine/engine.js';
import type { GenerateRequest } from '../src/engine/request-builder.js';
import type { EngineTestHooks } from '../src/engine/test-hooks.js';
import type { ChatMessage } from '../src/frontend/chat-template.js';
import { sharedPath } from './paths.js';

export interface RunResult {
  ids: number[];
  logits: Float32Array[];
  finishReason: string;
  text: string;
}

/** Chat prompts from ../shared/eval (mixed lengths: zero-shot and few-shot items). */
export function evalPrompts(n: number): ChatMessage[][] {
  const out: ChatMessage[][] = [];
  for (const task of ['add', 'mcq', 'recall']) {
    const lines = readFileSync(sharedPath('eval', `${task}.public.jsonl`), 'utf8').trim().split('\n');
    for (const l of lines.slice(0, Math.ceil(n / 3))) out.push((JSON.parse(l) as { messages: ChatMessage[] }).messages);
  }
  return out.slice(0, n);
}

/** Submit all requests at once (the engine batches them) and collect results in order. */
export async function runAll(engine: Engine, reqs: readonly GenerateRequest[], captureLogits = true): Promise<RunResult[]> {
  return Promise.all(reqs.map(async (r) => {
    const logits: Float32Array[] = [];
    const done = await engine.complete({ ...r, ...(captureLogits ? { captureLogits: (l: Float32Array) => logits.push(l.slice()) } : {}) });
    return { ids: [...done.outputIds], logits, finishReason: done.finishReason, text: done.text };
  }));
}

/** Load an engine (options plus test-only hooks, split as Engine.load takes them), run
 * `fn`, close it. */
export async function withEngine<T>(opts: EngineOptions & EngineTestHooks, fn: (e: Engine) => Promise<T>): Promise<T> {
  const { poisonPadding, preemptIf, draftOverride, hostDrafts, sampledCandidates, penaltyChain, sampledChain, deferredDrafts, specK, chainDrawU, refuseCandidate, draftUniforms,
    deferredRejection, deferSeededRejection, ...engineOpts } = opts;
  const hooks: EngineTestHooks = {
    ...(sampledCandidates !== undefined ? { sampledCandidates } : {}),
    ...(penaltyChain !== undefined ? { penaltyChain } : {}),
    ...(sampledChain !== undefined ? { sampledChain } : {}),
    ...(deferredDrafts !== undefined ? { deferredDrafts } : {}),
    ...(specK ? { specK } : {}),
    ...(chainDrawU ? { chainDrawU } : {}),
    ...(refuseCandidate ? { refuseCandidate } : {}),
    ...(draftUniforms ? { draftUniforms } : {}),
    ...(deferredRejection !== undefined ? { deferredRejection } : {}),
    ...(deferSeededRejection !== undefined ? { deferSeededRejection } : {}),
    ...(poisonPadding !== undefined ? { poisonPadding } : {}),
    ...(preemptIf ? { preemptIf } : {}),
    ...(draftOverride ? { draftOverride } : {}),
    ...(hostDrafts ? { hostDrafts } : {}),
  };
  const engine = await Engine.load(engineOpts, hooks);
  try {
    return await fn(engine);
  } finally {
    await engine.close();
  }
}

/** Two runs of the same requests gave the same ids, finish reasons and texts, request by request. */
export function assertSameRuns(got: readonly RunResult[], want: readonly RunResult[], what: string): void {
  assert.equal(got.length, want.length, `${what}: ${got.length} results for ${want.length}`);
  got.forEach((g, i) => {
    assert.deepEqual(g.ids, want[i]!.ids, `${what}: request ${i}'s ids`);
    assert.equal(g.finishReason, want[i]!.finishReason, `${what}: request ${i}'s finish reason`);
    assert.equal(g.text, want[i]!.text, `${what}: request ${i}'s text`);
  });
}

/** Count the kernels' read-back calls: `readBack` of the engine's kernels while
 * `fn` runs. */
export async function countingReadBacks<T>(e: Engine, fn: () => Promise<T>): Promise<{ value: T; readBacks: number }> {
  const k = e.model.kernels as { readBack: (...a: never[]) => unknown };
  const original = k.readBack.bind(k);
  let readBacks = 0;
  k.readBack = ((...a: never[]) => (readBacks++, original(...a))) as typeof k.readBack;
  try {
    return { value: await fn(), readBacks };
  } finally {
    k.readBack = original;
  }
}

export function sameBits(a: Float32Array, b: Float32Array): boolean {
  if (a.length !== b.length) return false;
  const x = new Uint32Array(a.buffer, a.byteOffset, a.length);
  const y = new Uint32Array(b.buffer, b.byteOffset, b.length);
  for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return false;
  return true;
}
