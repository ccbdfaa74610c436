// The prepare pool: worker threads that render chat templates and tokenize prompts, so
// the event loop only routes and /health, /metrics and running streams never wait for a
// large prompt. Each job has a time budget (--prepare-timeout-ms); a job past it, or whose
// client went away, has its worker terminated (the only way to stop synchronous work) and
// replaced. Jobs wait in FIFO order for a free worker.
import { Worker } from 'node:worker_threads';
import { DeltaserveError, type ErrorCode } from '../util/errors.js';
import { type Logger, SILENT } from '../util/log.js';
import { ApiError } from '../util/api-error.js';
import { type PrepareJob, type PrepareResult, transferablesOf } from './prepare-jobs.js';
import type { PrepareWorkerData } from './prepare-worker.js';

interface Pending {
  readonly id: number;
  readonly job: PrepareJob;
  readonly signal: AbortSignal | undefined;
  readonly resolve: (r: PrepareResult) => void;
  readonly reject: (e: unknown) => void;
  settled: boolean;
}

interface Slot {
  worker: Worker;
  ready: boolean;
  current: Pending | null;
  timer: NodeJS.Timeout | null;
}

type WorkerMessage =
  | { ready: true }
  | { fatal: true; message: string }
  | { id: number; result: PrepareResult }
  | { id: number; error: { code: string; message: string } };

const ERROR_CODES: ReadonlySet<string> = new Set(['bad_config', 'bad_checkpoint', 'missing_tensor', 'bad_tokenizer', 'bad_request', 'prompt_too_long']);

/** A worker's error as the error the same job would have thrown inline. */
function errorOf(e: { code: string; message: string }): Error {
  if (ERROR_CODES.has(e.code)) return new DeltaserveError(e.code as ErrorCode, e.message);
  return new Error(e.message);
}

export class PreparePool {
  private readonly slots: Slot[] = [];
  private readonly queue: Pending[] = [];
  private nextId = 0;
  private closed = false;
  private readonly started: Promise<void>;

  /** `size` workers, each building the tokenizer `data.source` describes; `budgetMs` per job. */
  constructor(private readonly data: PrepareWorkerData, size: number, private readonly budgetMs: number,
    private readonly log: Logger = SILENT) {
    const ready: Promise<void>[] = [];
    for (let i = 0; i < size; i++) ready.push(this.spawn(i));
    this.started = Promise.all(ready).then(() => undefined);
  }

  /** Resolves once every worker has built its tokenizer; rejects when one cannot. */
  ready(): Promise<void> {
    return this.started;
  }

  /** Jobs waiting for a worker or running. */
  get pending(): number {
    return this.queue.length + this.slots.filter((s) => s.current !== null).length;
  }

  run(job: PrepareJob, signal?: AbortSignal): Promise<PrepareResult> {
    if (this.closed) return Promise.reject(new ApiError(503, 'the server is shutting down', null, 'shutting_down'));
    if (signal?.aborted) return Promise.reject(clientGone());
    return new Promise<PrepareResult>((resolve, reject) => {
      const p: Pending = { id: this.nextId++, job, signal, resolve, reject, settled: false };
      signal?.addEventListener('abort', () => this.abandon(p, clientGone()), { once: true });
      this.queue.push(p);
      this.pump();
    });
  }

  /** Terminate every worker; queued and running jobs fail with 503. */
  async close(): Promise<void> {
    this.closed = true;
    const gone = new ApiError(503, 'the server is shutting down', null, 'shutting_down');
    for (const p of this.queue.splice(0)) this.settle(p, gone);
    await Promise.all(this.slots.map(async (s) => {
      if (s.timer) clearTimeout(s.timer);
      if (s.current) this.settle(s.current, gone);
      await s.worker.terminate();
    }));
  }

  private spawn(index: number): Promise<void> {
    const worker = new Worker(new URL('./prepare-worker.js', import.meta.url), { workerData: this.data });
    worker.unref();
    const slot: Slot = { worker, ready: false, current: null, timer: null };
    this.slots[index] = slot;
    return new Promise<void>((resolve, reject) => {
      worker.on('message', (m: WorkerMessage) => {
        if ('ready' in m) {
          slot.ready = true;
          resolve();
          this.pump();
        } else if ('fatal' in m) {
          reject(new DeltaserveError('bad_tokenizer', `prepare worker: ${m.message}`));
        } else this.finish(slot, m);
      });
      worker.on('error', (e: NodeJS.ErrnoException) => {
        this.log.error('prepare worker failed', { err: e });
        reject(e);
        this.replace(index, slot, e.code === 'ERR_WORKER_OUT_OF_MEMORY'
          ? new ApiError(413, 'preparing the prompt ran out of memory; send a smaller prompt', null, 'prepare_out_of_memory')
          : new ApiError(500, `internal error: the prompt worker failed (${e.message})`, null, 'internal_error'));
      });
    });
  }

  private finish(slot: Slot, m: Extract<WorkerMessage, { id: number }>): void {
    const p = slot.current;
    if (!p || p.id !== m.id) return;
    if (slot.timer) clearTimeout(slot.timer);
    slot.current = null;
    slot.timer = null;
    if ('result' in m) this.settle(p, m.result);
    else this.settle(p, errorOf(m.error));
    this.pump();
  }

  private pump(): void {
    for (const slot of this.slots) {
      if (!slot.ready || slot.current !== null) continue;
      let p: Pending | undefined;
      while ((p = this.queue.shift()) !== undefined && p.settled);
      if (!p) return;
      slot.current = p;
      const job = p;
      slot.timer = setTimeout(() => this.timeout(slot, job), this.budgetMs);
      slot.worker.postMessage({ id: p.id, job: p.job }, transferablesOf(p.job));
    }
  }

  private timeout(slot: Slot, p: Pending): void {
    if (slot.current !== p) return;
    this.replace(this.slots.indexOf(slot), slot, new ApiError(413,
      `preparing the prompt (chat template and tokenizer) took longer than the limit of ${this.budgetMs} ms (--prepare-timeout-ms); send a smaller prompt`,
      null, 'prepare_timeout'));
  }

  /** The client went away: drop a queued job, or stop a running one by replacing its worker. */
  private abandon(p: Pending, e: ApiError): void {
    if (p.settled) return;
    const slot = this.slots.find((s) => s.current === p);
    if (slot) this.replace(this.slots.indexOf(slot), slot, e);
    else this.settle(p, e);
  }

  /** Terminate a slot's worker (failing its job with `e`) and start a fresh one. */
  private replace(index: number, slot: Slot, e: unknown): void {
    if (index < 0 || this.slots[index] !== slot) return;
    if (slot.timer) clearTimeout(slot.timer);
    if (slot.current) this.settle(slot.current, e);
    slot.current = null;
    slot.ready = false;
    void slot.worker.terminate();
    if (!this.closed) this.spawn(index).catch((err: unknown) => this.log.error('prepare worker did not restart', { err }));
  }

  private settle(p: Pending, outcome: PrepareResult | unknown): void {
    if (p.settled) return;
    p.settled = true;
    if (outcome instanceof Error) p.reject(outcome);
    else p.resolve(outcome as PrepareResult);
  }
}

function clientGone(): ApiError {
  return new ApiError(400, 'the client closed the connection', null, 'client_closed');
}
