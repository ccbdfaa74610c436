// A prepare worker thread: builds the served model's tokenizer once, then renders and
// tokenizes prompts on request (prepare-jobs.ts), so the server's event loop never does.
// Protocol: → {ready} | {fatal, message} once; then per job {id, job} → {id, result} |
// {id, error: {code, message}} (a DeltaserveError's code, or 'internal').
import { parentPort, workerData } from 'node:worker_threads';
import { TextTokenizer, type TokenizerSource } from '../tokenizer/tokenizer.js';
import { DeltaserveError } from '../util/errors.js';
import { type PrepareContext, type PrepareJob, runPrepareJob, transferablesOf } from './prepare-jobs.js';

export interface PrepareWorkerData {
  readonly source: TokenizerSource;
  readonly vocabSize: number;
  readonly maxContext: number;
}

const port = parentPort;
if (port) {
  const data = workerData as PrepareWorkerData;
  let ctx: PrepareContext | null = null;
  try {
    ctx = { tokenizer: TextTokenizer.fromSource(data.source), vocabSize: data.vocabSize, maxContext: data.maxContext };
    port.postMessage({ ready: true });
  } catch (e) {
    port.postMessage({ fatal: true, message: (e as Error).message });
  }
  port.on('message', (msg: { id: number; job: PrepareJob }) => {
    if (!ctx) return;
    try {
      const result = runPrepareJob(ctx, msg.job);
      port.postMessage({ id: msg.id, result }, transferablesOf(result));
    } catch (e) {
      const code = e instanceof DeltaserveError ? e.code : 'internal';
      port.postMessage({ id: msg.id, error: { code, message: e instanceof Error ? e.message : String(e) } });
    }
  });
}
