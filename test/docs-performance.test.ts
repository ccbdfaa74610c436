// Fast tier. The committed docs/performance.md and the README's performance table are exactly what
// `npm run docs:perf` (scripts/render-performance.mjs) renders from bench/results/*.json, so the
// tables cannot drift from the result files; malformed result files are refused by name.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { REPO_ROOT } from './paths.js';

interface ResultFile {
  file: string;
  readme?: unknown;
  rows: Record<string, unknown>[];
  [field: string]: unknown;
}
interface Renderer {
  README_START: string;
  README_END: string;
  SUMMARY_START: string;
  SUMMARY_END: string;
  renderReadmeSummaries(results: ResultFile[]): string;
  loadResults(dir: string): ResultFile[];
  renderPerformanceDoc(results: ResultFile[]): string;
  renderReadmeTable(results: ResultFile[]): string;
  spliceReadme(readme: string, block: string, startMarker?: string, endMarker?: string): string;
  formatCell(key: string, cell: unknown): string;
}

const render = (await import(pathToFileURL(join(REPO_ROOT, 'scripts', 'render-performance.mjs')).href)) as Renderer;
const RESULTS = join(REPO_ROOT, 'bench', 'results');
const readme = (): string => readFileSync(join(REPO_ROOT, 'README.md'), 'utf8');

test('docs/performance.md is what bench/results renders (run `npm run docs:perf` after editing a result)', () => {
  const committed = readFileSync(join(REPO_ROOT, 'docs', 'performance.md'), 'utf8');
  assert.equal(committed, render.renderPerformanceDoc(render.loadResults(RESULTS)));
});

test("the README's performance table is what bench/results renders", () => {
  const text = readme();
  const block = text.slice(text.indexOf(render.README_START) + render.README_START.length + 1, text.indexOf(render.README_END) - 1);
  assert.equal(block, render.renderReadmeTable(render.loadResults(RESULTS)));
  assert.equal(render.spliceReadme(text, render.renderReadmeTable(render.loadResults(RESULTS))), text);
});

test("the README's summaries (result files with readme_summary) are what bench/results renders", () => {
  const text = readme();
  const results = render.loadResults(RESULTS);
  const block = render.renderReadmeSummaries(results);
  assert.ok(results.some((r) => r['readme_summary']), 'at least one result file carries readme_summary');
  assert.match(block, /\| on ÷ off \|/, 'the MTP sweep is among them');
  assert.equal(render.spliceReadme(text, block, render.SUMMARY_START, render.SUMMARY_END), text);
  const changed = results.map((r) => (r['readme_summary'] ? { ...r, rows: r.rows.map((row) => ({ ...row, speedup: 9.99 })) } : r));
  assert.notEqual(render.spliceReadme(text, render.renderReadmeSummaries(changed), render.SUMMARY_START, render.SUMMARY_END), text);
});

test('a changed figure changes both renderings (the comparison above can fail)', () => {
  const results = render.loadResults(RESULTS);
  const source = results.find((r) => r.readme !== undefined);
  assert.ok(source, 'one result file feeds the README table');
  const before = { doc: render.renderPerformanceDoc(results), table: render.renderReadmeTable(results) };
  const row = source.rows[0];
  assert.ok(row && typeof row['decode_tok_s'] === 'object', `${source.file}: first row has decode_tok_s`);
  row['decode_tok_s'] = { deltaserve: 99.9, peer: 11.1 };
  const table = render.renderReadmeTable(results);
  assert.notEqual(table, before.table);
  assert.match(table, /\| 99\.9 \/ 11\.1 \|/);
  assert.notEqual(render.renderPerformanceDoc(results), before.doc);
});

test('cells keep their precision: fixed decimals for ratios and tok/s, ranges and rounds', () => {
  assert.equal(render.formatCell('decode_ratio', { median: 1.2, range: [1.12, 1.4] }), '1.20 (1.12–1.40)');
  assert.equal(render.formatCell('verify4_over_decode', { median: 2, rounds: [1.8, 2, 2.1] }), '2.0 (1.8, 2.0, 2.1)');
  assert.equal(render.formatCell('decode_tok_s', { deltaserve: 28, peer: 23.6 }), '28.0 / 23.6');
  assert.equal(render.formatCell('peak_rss', '16.63 GB'), '16.63 GB');
});

test('a result file without machine, peer or a valid date is refused, naming the file and the field', () => {
  const dir = mkdtempSync(join(tmpdir(), 'bench-results-'));
  try {
    const good = JSON.parse(readFileSync(join(RESULTS, '2026-12-04-zen4-llamacpp.json'), 'utf8')) as Record<string, unknown>;
    const cases: [string, (r: Record<string, unknown>) => void, RegExp][] = [
      ['no-peer.json', (r) => delete r['peer'], /no-peer\.json: "peer" is required/],
      ['bad-date.json', (r) => (r['date'] = '4 Dec 2026'), /bad-date\.json: "date" must be YYYY-MM-DD/],
      ['no-machine.json', (r) => delete r['machine'], /no-machine\.json: needs "machine"/],
      ['stray-cell.json', (r) => ((r['rows'] as Record<string, unknown>[])[0]!['surprise'] = 1), /stray-cell\.json: rows\[0\] has "surprise"/],
    ];
    for (const [name, spoil, message] of cases) {
      const r = structuredClone(good);
      spoil(r);
      writeFileSync(join(dir, name), JSON.stringify(r));
      assert.throws(() => render.loadResults(dir), message);
      rmSync(join(dir, name));
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
