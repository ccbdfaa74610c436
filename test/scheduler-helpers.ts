// The scheduler tests' pools, scheduler and requests (scheduler.test.ts, overlap-chain.test.ts):
// small pools and greedy requests stand in for the model (the scheduler never reads activations).
import { KvPool } from '../src/cache/kv-pool.js';
import { StatePool } from '../src/cache/state-pool.js';
import { RadixCache } from '../src/cache/radix-cache.js';
import { Scheduler, type SchedulerOptions } from '../src/engine/scheduler.js';
import { Request } from '../src/engine/request.js';
import { OutputText } from '../src/engine/output.js';
import { TokenHistory } from '../src/engine/sampler.js';
import { setPromptPoints, type PrefixContext } from '../src/engine/prefix.js';
import { Rng } from '../src/util/rng.js';

export const alloc = (n: number): Float32Array => new Float32Array(n);
export const GREEDY = { temperature: 0, topK: 0, topP: 1, minP: 0, repetitionPenalty: 1, presencePenalty: 0, frequencyPenalty: 0 };

export interface Setup {
  readonly kv: KvPool;
  readonly state: StatePool;
  readonly sched: Scheduler;
  readonly prefix: PrefixContext | null;
}

/** Pools of `pages` usable KV pages of `pageSize` and `slots` state slots, and a scheduler. */
export function setup(o: { pages: number; pageSize: number; slots: number; maxRunning: number; budget: number; chunk: number;
  maxSteps?: number; prefix?: boolean }): Setup {
  const kv = new KvPool({ numPages: o.pages + 1, pageSize: o.pageSize, kvDim: 1, numLayers: 1, numMtpLayers: 0, alloc });
  const state = new StatePool({ slots: o.slots, numLinear: 1, convSize: 1, ssmSize: 2, batchCapacity: o.maxRunning, maxSteps: o.maxSteps ?? 0, alloc });
  const prefix: PrefixContext | null = o.prefix
    ? { cache: new RadixCache(kv, state), kv, state, kvDim: 1, chunk: o.chunk, interval: o.chunk, mtp: false, inserted: 0 }
    : null;
  const opts: SchedulerOptions = { maxRunning: o.maxRunning, maxPrefillTokens: o.budget, chunk: o.chunk, trackInterval: o.chunk, prefix };
  return { kv, state, sched: new Scheduler(opts, kv, state), prefix };
}

/** A greedy request of `promptLength` tokens (ids from `base`) with message ends `ends`. */
export function request(id: number, promptLength: number, maxTokens: number, chunk: number, ends: number[] = [], base = id * 1000): Request {
  const prompt = Array.from({ length: promptLength }, (_, i) => base + i);
  const r = new Request(id, id, prompt, maxTokens, promptLength + maxTokens, GREEDY, new Rng(id), new Rng(id + 1),
    new TokenHistory(prompt), new OutputText(() => '', prompt, new Set(), []));
  setPromptPoints(r, ends, chunk);
  return r;
}

/** Pools and scheduler (and the prefix cache) agree on every page, slot and lock. */
export function checkPools(s: Setup, extraPages: number[] = [], extraSlots: number[] = []): void {
  const own = s.sched.owners();
  const cached = s.prefix?.cache.owners() ?? { pages: [], slots: [] };
  s.kv.checkIntegrity([...own.pages, ...cached.pages, ...extraPages]);
  s.state.checkIntegrity([...own.slots, ...cached.slots, ...extraSlots]);
  s.prefix?.cache.checkIntegrity(own.locks);
}

