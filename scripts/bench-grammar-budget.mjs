// Compile-budget benchmark (issue 48): the nested allOf/anyOf shapes of
// test/nested-combinators.ts posted to a `deltaserve serve` child process (wasm kernels,
// tiny-think) on chat (response_format and a forced tool), Messages (forced tool) and
// Responses (text.format and a forced tool), one at a time, while this process polls /health
// every 5 ms. Prints one JSON object: per shape its bytes, compile units (or the units at
// which it was refused), each answer's status and time, and /health p50 / p99 / max while
// the refused shapes were in flight (the accepted ones really run: their prompt holds the
// schema as tool text, and prefilling it on the event loop is the engine's step, not the
// grammar's, so their /health figures are reported apart).
// Usage: node scripts/bench-grammar-budget.mjs [--model DIR] [--repeat N] [-- serve flags...]
// Run `npx tsc -p tsconfig.json` first (it runs dist/).
import { cpus, loadavg } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { spawnServe } from './serve-child.mjs';

const ROOT = resolve(fileURLToPath(new URL('.', import.meta.url)), '..');
const { NESTED_SHAPES, nestedCombinators, schemaBytes } = await import(join(ROOT, 'dist', 'test', 'nested-combinators.js'));
const { runGrammarJob } = await import(join(ROOT, 'dist', 'src', 'constrain', 'compile-job.js'));
const { DEFAULT_LIMITS } = await import(join(ROOT, 'dist', 'src', 'server', 'http', 'limits.js'));
const { values: v, positionals } = parseArgs({
  allowPositionals: true,
  options: { model: { type: 'string', default: join(ROOT, '..', 'shared', 'models', 'tiny-think') }, repeat: { type: 'string', default: '3' } },
});

function startServer() {
  return spawnServe(ROOT, v.model, positionals);
}

const ask = [{ role: 'user', content: 'hi' }];
const ROUTES = {
  chat_format: (s) => ['/v1/chat/completions', { messages: ask, max_tokens: 4, response_format: { type: 'json_schema', json_schema: { name: 'n', schema: s } } }],
  chat_tool: (s) => ['/v1/chat/completions', { messages: ask, max_tokens: 4, tools: [{ type: 'function', function: { name: 'f', parameters: s } }], tool_choice: 'required' }],
  messages_tool: (s) => ['/v1/messages', { messages: ask, max_tokens: 4, tools: [{ name: 'f', input_schema: s }], tool_choice: { type: 'tool', name: 'f' } }],
  responses_format: (s) => ['/v1/responses', { input: 'hi', max_output_tokens: 4, text: { format: { type: 'json_schema', name: 'n', schema: s } } }],
  responses_tool: (s) => ['/v1/responses', { input: 'hi', max_output_tokens: 4, tools: [{ type: 'function', name: 'f', parameters: s }], tool_choice: 'required' }],
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))];

const { url, proc } = await startServer();
try {
  for (let i = 0; i < 10; i++) await (await fetch(`${url}/health`)).text();
  const health = { refused: [], accepted: [] };
  let phase = 'refused';
  let stop = false;
  const poller = (async () => {
    while (!stop) {
      const t0 = performance.now();
      const during = phase;
      await (await fetch(`${url}/health`)).text();
      health[during].push(performance.now() - t0);
      await sleep(5);
    }
  })();
  const shapes = {};
  const allAnswers = [];
  const jobs = Object.entries(NESTED_SHAPES).map(([name, spec]) => {
    const schema = nestedCombinators(spec);
    return [name, schema, runGrammarJob({ op: 'grammar', schema, param: 'x', lenient: false, units: DEFAULT_LIMITS.grammarUnits })];
  });
  // refused shapes first (the grammar's own cost), then the accepted ones
  jobs.sort((a, b) => Number('error' in b[2]) - Number('error' in a[2]));
  for (const [name, schema, job] of jobs) {
    phase = 'error' in job ? 'refused' : 'accepted';
    await sleep(50);
    const answers = {};
    for (let rep = 0; rep < Number(v.repeat); rep++) {
      for (const [route, make] of Object.entries(ROUTES)) {
        const [path, body] = make(schema);
        const t0 = performance.now();
        const r = await fetch(`${url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
        await r.text();
        const ms = performance.now() - t0;
        if (phase === 'refused') allAnswers.push(ms);
        (answers[route] ??= []).push(`${r.status} ${ms.toFixed(0)}ms`);
      }
    }
    shapes[name] = { bytes: schemaBytes(schema), units: job.units, refused: 'error' in job, answers };
  }
  stop = true;
  await poller;
  console.log(JSON.stringify({ node: process.version, cpus: cpus().length, loadavg: loadavg().map((x) => +x.toFixed(2)),
    budget_units: DEFAULT_LIMITS.grammarUnits, extra_flags: positionals,
    refused_answer_ms: { n: allAnswers.length, p50: +pct(allAnswers, 0.5).toFixed(1), p99: +pct(allAnswers, 0.99).toFixed(1), max: +Math.max(...allAnswers).toFixed(1) },
    ...Object.fromEntries(Object.entries(health).filter(([, h]) => h.length > 0).map(([k, h]) => [`health_ms_${k}`,
      { probes: h.length, p50: +pct(h, 0.5).toFixed(1), p99: +pct(h, 0.99).toFixed(1), max: +Math.max(...h).toFixed(1) }])),
    shapes }, null, 1));
} finally {
  proc.kill('SIGTERM');
}
