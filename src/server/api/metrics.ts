// /metrics: Prometheus text exposition (format 0.0.4) of the server's own counters and
// latency histograms plus every numeric field of engine.stats(), walked generically so
// stats added to the engine later (prefix cache, speculative decoding) appear by themselves.
import type { EngineStats } from '../../engine/metrics.js';

const PREFIX = 'deltaserve_';

type Labels = Readonly<Record<string, string>>;

function labelText(l: Labels): string {
  const parts = Object.entries(l).map(([k, v]) => `${k}="${v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"`);
  return parts.length > 0 ? `{${parts.join(',')}}` : '';
}

function fmt(v: number): string {
  if (Number.isNaN(v)) return 'NaN';
  if (v === Infinity) return '+Inf';
  if (v === -Infinity) return '-Inf';
  return String(v);
}

function header(name: string, type: string, help: string): string {
  return `# HELP ${name} ${help.replace(/\\/g, '\\\\').replace(/\n/g, '\\n')}\n# TYPE ${name} ${type}\n`;
}

/** A counter with labels. */
export class Counter {
  private readonly values = new Map<string, { labels: Labels; v: number }>();
  constructor(readonly name: string, readonly help: string) {}
  inc(labels: Labels = {}, by = 1): void {
    const key = labelText(labels);
    const e = this.values.get(key);
    if (e) e.v += by;
    else this.values.set(key, { labels, v: by });
  }
  get(labels: Labels = {}): number {
    return this.values.get(labelText(labels))?.v ?? 0;
  }
  render(): string {
    let s = header(this.name, 'counter', this.help);
    if (this.values.size === 0) s += `${this.name} 0\n`;
    for (const { labels, v } of this.values.values()) s += `${this.name}${labelText(labels)} ${fmt(v)}\n`;
    return s;
  }
}

/** A histogram without labels (cumulative buckets, sum, count). */
export class Histogram {
  private readonly counts: number[];
  private sum = 0;
  private count = 0;
  constructor(readonly name: string, readonly help: string, readonly buckets: readonly number[]) {
    this.counts = buckets.map(() => 0);
  }
  /** Sum and count of the observations so far (the JSON stats take deltas of them). */
  get total(): { readonly sum: number; readonly count: number } {
    return { sum: this.sum, count: this.count };
  }
  observe(v: number): void {
    this.sum += v;
    this.count++;
    for (let i = 0; i < this.buckets.length; i++) if (v <= this.buckets[i]!) this.counts[i]!++;
  }
  render(): string {
    let s = header(this.name, 'histogram', this.help);
    this.buckets.forEach((b, i) => (s += `${this.name}_bucket{le="${fmt(b)}"} ${this.counts[i]}\n`));
    s += `${this.name}_bucket{le="+Inf"} ${this.count}\n${this.name}_sum ${fmt(this.sum)}\n${this.name}_count ${this.count}\n`;
    return s;
  }
}

const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80];
const E2E_BUCKETS = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160, 320];
const ACCEPT_BUCKETS = [1, 1.25, 1.5, 1.75, 2, 2.5, 3, 3.5, 4, 5, 6, 8];

function snake(s: string): string {
  return s.replace(/([a-z0-9])([A-Z])/g, '$1_$2').replace(/[^A-Za-z0-9_]/g, '_').toLowerCase();
}

export interface Leaf {
  /** snake_case path, e.g. kv_pages_used. */
  readonly name: string;
  /** Index within a numeric array (rendered as the label i="n"), else null. */
  readonly index: number | null;
  readonly value: number;
}

/** Every finite numeric leaf of `obj` (booleans as 0/1, numeric arrays element-wise). */
export function numericLeaves(obj: unknown, path: string[] = []): Leaf[] {
  const name = path.map(snake).join('_');
  if (typeof obj === 'number') return Number.isFinite(obj) ? [{ name, index: null, value: obj }] : [];
  if (typeof obj === 'boolean') return [{ name, index: null, value: obj ? 1 : 0 }];
  if (Array.isArray(obj)) {
    return obj.flatMap((v: unknown, i) => (typeof v === 'number' && Number.isFinite(v) ? [{ name, index: i, value: v }] : []));
  }
  if (typeof obj !== 'object' || obj === null) return [];
  return Object.entries(obj as Record<string, unknown>).flatMap(([k, v]) => numericLeaves(v, [...path, k]));
}

export class ServerMetrics {
  readonly httpRequests = new Counter(`${PREFIX}http_requests_total`, 'HTTP requests by route and status code.');
  readonly finished = new Counter(`${PREFIX}request_finished_total`, 'Generation choices finished, by finish_reason.');
  readonly promptTokens = new Counter(`${PREFIX}prompt_tokens_total`, 'Prompt tokens of finished choices.');
  readonly cachedTokens = new Counter(`${PREFIX}prompt_tokens_cached_total`, 'Prompt tokens served from the prefix cache.');
  readonly generationTokens = new Counter(`${PREFIX}generation_tokens_total`, 'Generated tokens of finished choices.');
  readonly specRounds = new Counter(`${PREFIX}spec_rounds_total`, 'Speculative (MTP) verify rounds.');
  readonly specDrafted = new Counter(`${PREFIX}spec_draft_tokens_total`, 'Draft tokens proposed by the MTP head.');
  readonly specAccepted = new Counter(`${PREFIX}spec_accepted_tokens_total`, 'Draft tokens accepted by verification.');
  readonly ttft = new Histogram(`${PREFIX}time_to_first_token_seconds`, 'Time from request arrival to the first generated token.', LATENCY_BUCKETS);
  readonly itl = new Histogram(`${PREFIX}inter_token_latency_seconds`, 'Time between consecutive streamed token deltas of a choice.', LATENCY_BUCKETS);
  readonly e2e = new Histogram(`${PREFIX}e2e_request_latency_seconds`, 'Time from request arrival to the last token of a choice.', E2E_BUCKETS);
  readonly acceptLen = new Histogram(`${PREFIX}spec_accept_length`, 'Per-choice mean tokens per verify round ((accepted + rounds) / rounds).', ACCEPT_BUCKETS);
  inFlight = 0;

  render(stats: EngineStats, extraGauges: Readonly<Record<string, [number, string]>> = {}): string {
    const gauge = (name: string, help: string, v: number): string => `${header(name, 'gauge', help)}${name} ${fmt(v)}\n`;
    const rounds = this.specRounds.get();
    let s = '';
    for (const m of [this.httpRequests, this.finished, this.promptTokens, this.cachedTokens, this.generationTokens,
      this.specRounds, this.specDrafted, this.specAccepted]) s += m.render();
    s += this.ttft.render() + this.itl.render() + this.e2e.render() + this.acceptLen.render();
    s += gauge(`${PREFIX}spec_accept_length_mean`, 'Mean tokens per verify round over all choices ((accepted + rounds) / rounds); 0 without speculation.',
      rounds > 0 ? (this.specAccepted.get() + rounds) / rounds : 0);
    s += gauge(`${PREFIX}http_requests_in_flight`, 'HTTP requests being handled.', this.inFlight);
    s += gauge(`${PREFIX}queue_depth`, 'Requests waiting to be scheduled.', stats.waiting);
    s += gauge(`${PREFIX}running_requests`, 'Requests in the running batch.', stats.running);
    s += gauge(`${PREFIX}kv_cache_usage_ratio`, 'Fraction of KV pages in use.', stats.kvPages.total > 0 ? stats.kvPages.used / stats.kvPages.total : 0);
    s += gauge(`${PREFIX}state_slots_usage_ratio`, 'Fraction of recurrent-state slots in use.', stats.stateSlots.total > 0 ? stats.stateSlots.used / stats.stateSlots.total : 0);
    for (const [name, [v, help]] of Object.entries(extraGauges)) s += gauge(`${PREFIX}${name}`, help, v);
    let last = '';
    for (const leaf of numericLeaves(stats)) {
      const name = `${PREFIX}engine_${leaf.name}`;
      if (name !== last) s += header(name, 'gauge', `engine.stats() field ${leaf.name}${leaf.index !== null ? ' (by index i)' : ''}.`);
      last = name;
      s += `${name}${leaf.index !== null ? `{i="${leaf.index}"}` : ''} ${fmt(leaf.value)}\n`;
    }
    return s;
  }
}
