// The dashboard (`/dashboard`): polls /metrics.json each second and plots the last minutes
// of the server's own samples with uPlot, beside a model card.
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import '../../styles/dashboard.css';
import { getJson } from '../shared/api.js';
import { byId, h, replaceChildren } from '../shared/dom.js';

interface Sample {
  t: number;
  tokens_per_second: number;
  running: number;
  queued: number;
  prompt_tokens: number;
  cached_tokens: number;
  cache_hit_rate: number | null;
  accept_length: number | null;
  acceptance_rate: number | null;
  kv_usage: number;
  state_usage: number;
  ttft_seconds: number | null;
}

interface Stats {
  now: number;
  ring_seconds: number;
  model: Record<string, unknown>;
  samples: Sample[];
}

type Field = Exclude<keyof Sample, 't'>;

interface ChartSpec {
  id: string;
  title: string;
  series: { field: Field; label: string; color: string; scale?: string; scaleBy?: number }[];
  /** Axis titles by scale ('y' unless a series names another), units included. */
  axes: Record<string, string>;
  /** The readout next to the title: the last value of the first series. */
  unit: string;
  digits: number;
}

const CHARTS: ChartSpec[] = [
  { id: 'tps', title: 'Generated tokens/s', unit: ' tok/s', digits: 1, axes: { y: 'tokens / s' },
    series: [{ field: 'tokens_per_second', label: 'tokens/s', color: '#1f6feb' }] },
  { id: 'queue', title: 'Requests', unit: ' running', digits: 0, axes: { y: 'requests' }, series: [
    { field: 'running', label: 'running', color: '#1f6feb' }, { field: 'queued', label: 'queued', color: '#d29922' }] },
  { id: 'cache', title: 'Prefix cache', unit: '% hit', digits: 0, axes: { '%': 'hit rate (%)', tok: 'cached tokens' }, series: [
    { field: 'cache_hit_rate', label: 'hit rate %', color: '#2da44e', scale: '%', scaleBy: 100 },
    { field: 'cached_tokens', label: 'cached tokens', color: '#8250df', scale: 'tok' }] },
  { id: 'mtp', title: 'MTP speculation', unit: ' tok/round', digits: 2, axes: { len: 'tokens / round', '%': 'acceptance (%)' }, series: [
    { field: 'accept_length', label: 'accept length', color: '#1f6feb', scale: 'len' },
    { field: 'acceptance_rate', label: 'acceptance %', color: '#2da44e', scale: '%', scaleBy: 100 }] },
  { id: 'pools', title: 'Memory pools in use', unit: '% KV', digits: 0, axes: { y: 'in use (%)' }, series: [
    { field: 'kv_usage', label: 'KV pages %', color: '#1f6feb', scaleBy: 100 },
    { field: 'state_usage', label: 'state slots %', color: '#d29922', scaleBy: 100 }] },
  { id: 'ttft', title: 'Time to first token', unit: ' ms', digits: 0, axes: { y: 'ms' },
    series: [{ field: 'ttft_seconds', label: 'TTFT ms', color: '#cf222e', scaleBy: 1000 }] },
];

/** Axis labels: local wall-clock time of a sample (seconds since the epoch). */
const clock = (t: number): string => new Date(t * 1000).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23' });

class Chart {
  readonly readout = h('span', { class: 'readout' }, '—');
  readonly box: HTMLElement;
  private readonly plot: uPlot;

  constructor(private readonly spec: ChartSpec, parent: HTMLElement) {
    const plotEl = h('div', { class: 'plot' });
    this.box = h('div', { class: 'chart', id: `chart-${spec.id}`, 'data-points': 0 }, h('h2', {}, spec.title, this.readout), plotEl);
    parent.appendChild(this.box);
    const scales = [...new Set(spec.series.map((s) => s.scale ?? 'y'))];
    this.plot = new uPlot({
      width: 400, height: 180, legend: { show: true },
      scales: Object.fromEntries(scales.map((k) => [k, { range: (_u: uPlot, _min: number, max: number): [number, number] => [0, max > 0 ? max * 1.1 : 1] }])),
      axes: [{ label: 'time', labelSize: 16, values: (_u: uPlot, splits: number[]) => splits.map(clock), space: 100, size: 30 },
        ...scales.map((k, i) => ({ scale: k, label: spec.axes[k] ?? k, labelSize: 16, side: i === 0 ? 3 : 1, grid: { show: i === 0 }, size: 48 }))],
      // with the pointer off the plot the legend shows the latest sample, not "--"
      hooks: { setCursor: [(u: uPlot) => this.legendAtLatest(u)] },
      // points on: a value between two empty seconds (one request's TTFT) has no line to draw
      series: [{}, ...spec.series.map((s) => ({
        label: s.label, stroke: s.color, width: 1.5, scale: s.scale ?? 'y', spanGaps: false,
        value: (_u: uPlot, v: number | null): string => (v == null ? '—' : v.toFixed(v !== 0 && Math.abs(v) < 10 ? 2 : 1)),
        points: { show: true, size: 4, fill: s.color },
      }))],
    }, [[], ...spec.series.map(() => [])], plotEl);
    // the axis titles uPlot draws on its canvas, for tests and assistive tools
    this.box.setAttribute('data-axes', this.plot.axes.map((a) => a.label ?? '').join('|'));
    plotEl.setAttribute('aria-label', `${spec.title}: ${this.plot.axes.map((a) => a.label).join(', ')}`);
  }

  /** Point the legend at the newest sample that has a value, unless the pointer is on the plot. */
  private legendAtLatest(u: uPlot): void {
    if (u.cursor.idx != null) return;
    const xs = u.data[0];
    let idx = xs.length - 1;
    while (idx > 0 && u.data.slice(1).every((ys) => ys[idx] == null)) idx--;
    if (idx >= 0) u.setLegend({ idx });
  }

  resize(width: number): void {
    this.plot.setSize({ width, height: 180 });
  }

  update(samples: readonly Sample[]): void {
    const xs = samples.map((s) => s.t / 1000);
    const ys = this.spec.series.map((s) => samples.map((x) => {
      const v = x[s.field];
      return v === null ? null : v * (s.scaleBy ?? 1);
    }));
    this.plot.setData([xs, ...ys] as uPlot.AlignedData);
    this.legendAtLatest(this.plot);
    this.box.setAttribute('data-points', String(samples.length));
    const first = ys[0]!;
    let last: number | null = null;
    let at = -1;
    for (let i = first.length - 1; i >= 0 && last === null; i--) {
      last = first[i] ?? null;
      at = i;
    }
    this.readout.textContent = last === null ? '—' : `${last.toFixed(this.spec.digits)}${this.spec.unit}`;
    // the last measured value and its sample time (ms), for tests and tooltips
    this.box.setAttribute('data-last', last === null ? '' : String(last));
    this.box.setAttribute('data-last-t', last === null ? '' : String(samples[at]!.t));
  }
}

/** Bytes in decimal units (GB = 1e9), as the server's memory plan writes them. */
const fmtBytes = (n: number): string => {
  if (n >= 1e12) return `${(n / 1e12).toFixed(2)} TB`;
  if (n >= 1e9) return `${(n / 1e9).toFixed(2)} GB`;
  if (n >= 1e6) return `${(n / 1e6).toFixed(1)} MB`;
  if (n >= 1e3) return `${(n / 1e3).toFixed(1)} kB`;
  return `${n} B`;
};

/** The model card's `images`: null for a text-only model. */
function imagesRow(images: { max_images: number; max_image_pixels: number } | null | undefined): string {
  if (!images) return 'none (text-only model)';
  return `vision tower: up to ${images.max_images} per request, ${images.max_image_pixels.toLocaleString('en-US')} pixels each`;
}

function modelRows(m: Record<string, unknown>): [string, string][] {
  const plan = m['memory_plan'] as Record<string, number | string> | null;
  const weights = Object.entries((m['weights_by_type'] ?? {}) as Record<string, number>)
    .sort((a, b) => b[1] - a[1]).map(([t, b]) => `${t} ${fmtBytes(b)}`).join(', ');
  const rows: [string, string][] = [
    ['Model', String(m['id'])],
    ['Architecture', `${m['model_type']}: ${m['layers']} layers (${m['linear_attention_layers']} Gated DeltaNet + ${m['full_attention_layers']} gated attention), ` +
      `hidden ${m['hidden_size']}, ${m['attention_heads']} heads / ${m['kv_heads']} KV × ${m['head_dim']}, vocab ${m['vocab_size']}, MLP ${m['mlp']}`],
    ['MTP', Number(m['mtp_layers']) > 0 ? `${m['mtp_layers']} layer(s), ${m['spec_tokens']} draft tokens per round` : 'none'],
    ['Context', `${m['context']} tokens`],
    ['Quantization (weights)', weights || '—'],
    ['Kernels', `${m['kernels']}, ${m['threads']} thread(s)`],
    ['Prefix cache', m['prefix_cache'] ? 'on' : 'off'],
    ['Images', imagesRow(m['images'] as { max_images: number; max_image_pixels: number } | null | undefined)],
  ];
  if (plan) {
    rows.push(['Memory plan', `budget ${fmtBytes(Number(plan['budgetBytes']))} (${plan['budgetFrom']}); weights ${fmtBytes(Number(plan['weightBytes']))}`]);
    rows.push(['KV pool', `${plan['kvTokens']} tokens, ${fmtBytes(Number(plan['kvBytes']))}`]);
    rows.push(['State pool', `${plan['maxRunning']} running ${fmtBytes(Number(plan['runningStateBytes']))} + ${plan['cacheSlots']} cached ${fmtBytes(Number(plan['cacheStateBytes']))}`]);
  }
  return rows;
}

class Dashboard {
  private samples: Sample[] = [];
  private readonly charts: Chart[];
  private ring = 300;
  private failures = 0;

  constructor() {
    const parent = byId('charts');
    this.charts = CHARTS.map((c) => new Chart(c, parent));
    const fit = (): void => {
      for (const c of this.charts) c.resize(Math.max(240, c.box.clientWidth - 24));
    };
    window.addEventListener('resize', fit);
    fit();
  }

  async poll(): Promise<void> {
    const since = this.samples.length > 0 ? this.samples[this.samples.length - 1]!.t : 0;
    try {
      const s = await getJson<Stats>(`/metrics.json?since=${since}`);
      this.failures = 0;
      this.ring = s.ring_seconds;
      this.samples = [...this.samples, ...s.samples].slice(-this.ring);
      for (const c of this.charts) c.update(this.samples);
      byId('model-name').textContent = String(s.model['id']);
      replaceChildren(byId('model-card'), ...modelRows(s.model).map(([k, v]) => h('tr', {}, h('th', {}, k), h('td', {}, v))));
      byId('status').textContent = `live · ${this.samples.length} s of samples`;
      byId('status').className = 'status ok';
    } catch (e) {
      this.failures++;
      byId('status').textContent = `server unreachable (${(e as Error).message}); retrying`;
      byId('status').className = 'status bad';
    }
  }

  run(): void {
    const tick = (): void => {
      void this.poll().finally(() => setTimeout(tick, this.failures > 0 ? 3000 : 1000));
    };
    tick();
  }
}

new Dashboard().run();
