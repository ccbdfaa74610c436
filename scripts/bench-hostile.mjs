// Hostile-payload benchmark: /health latency (as an orchestrator would see it) while each
// of the hardening issue's payloads is in flight: a 7.2 MB chat message, 2,000 tools of
// 3 KB, a response_format enum of 100k strings, a 7.2 MB /tokenize (and 1.5M ids to
// /detokenize). The server runs in a child process (`deltaserve serve`, wasm kernels,
// tiny-think), the probes from this process, one every 10 ms, from the moment the payload
// starts uploading until its answer arrives. Prints one JSON object.
// Usage: node scripts/bench-hostile.mjs [--raised] [--model DIR] [--repeat N] [-- serve flags...]
//   --raised: raise the limits so every payload is accepted and really prepared (the
//   default limits refuse all four with a 413/400).
// Run `npm run build` first (it runs dist/).
import { cpus, loadavg } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { spawnServe } from './serve-child.mjs';

const ROOT = resolve(fileURLToPath(new URL('.', import.meta.url)), '..');
const { values: v, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    raised: { type: 'boolean', default: false },
    model: { type: 'string', default: join(ROOT, '..', 'shared', 'models', 'tiny-think') },
    repeat: { type: 'string', default: '1' },
  },
});
const RAISED = ['--max-body-bytes', String(16 << 20), '--max-prompt-chars', '10000000', '--max-tools', '5000',
  '--max-tools-bytes', String(16 << 20), '--max-enum', '200000', '--max-schema-bytes', String(16 << 20),
  '--prepare-timeout-ms', '3000'];

/** Start `deltaserve serve` on a free port; resolves with its base URL and the process. */
function startServer() {
  return spawnServe(ROOT, v.model, [...(v.raised ? RAISED : []), ...positionals]);
}

const ASK = [{ role: 'user', content: 'What is 12 + 30?' }];
const HUGE = 'hello world '.repeat(600_000);
const PAYLOADS = {
  chat_7mb: ['/v1/chat/completions', { messages: [{ role: 'user', content: HUGE }], max_tokens: 4 }],
  tools_2000: ['/v1/chat/completions', {
    messages: ASK, max_tokens: 4,
    tools: Array.from({ length: 2000 }, (_, i) => ({ type: 'function', function: { name: `tool_${i}`, description: 'd'.repeat(3000), parameters: { type: 'object', properties: {} } } })),
  }],
  enum_100k: ['/v1/chat/completions', {
    messages: ASK, max_tokens: 4,
    response_format: { type: 'json_schema', json_schema: { name: 'e', schema: { type: 'object', properties: { v: { enum: Array.from({ length: 100_000 }, (_, i) => `value ${i}`) } } } } },
  }],
  tokenize_7mb: ['/tokenize', { prompt: HUGE }],
  detokenize_1_5m: ['/detokenize', { tokens: Array.from({ length: 1_500_000 }, (_, i) => 100 + (i % 800)) }],
};

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const pct = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];

async function measure(url, path, body) {
  const text = JSON.stringify(body);
  let done = false;
  const t0 = performance.now();
  const hostile = fetch(`${url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: text })
    .then(async (r) => ({ status: r.status, ms: performance.now() - t0, text: (await r.text()).slice(0, 160) }))
    .finally(() => (done = true));
  const lat = [];
  while (!done || lat.length < 5) {
    const p0 = performance.now();
    const r = await fetch(`${url}/health`);
    await r.text();
    lat.push(performance.now() - p0);
    await sleep(10);
  }
  const r = await hostile;
  const s = [...lat].sort((a, b) => a - b);
  return { bytes: Buffer.byteLength(text), status: r.status, answer_ms: Math.round(r.ms), probes: s.length,
    health_median_ms: +pct(s, 0.5).toFixed(1), health_p99_ms: +pct(s, 0.99).toFixed(1), health_max_ms: +s[s.length - 1].toFixed(1),
    ...(r.status >= 400 ? { error: r.text } : {}) };
}

const { url, proc } = await startServer();
try {
  const results = {};
  for (let rep = 0; rep < Number(v.repeat); rep++) {
    for (const [name, [path, body]] of Object.entries(PAYLOADS)) {
      (results[name] ??= []).push(await measure(url, path, body));
      await sleep(200);
    }
  }
  console.log(JSON.stringify({ limits: v.raised ? 'raised' : 'default', extra_flags: positionals, node: process.version,
    cpus: cpus().length, loadavg: loadavg().map((x) => +x.toFixed(2)), results }, null, 1));
} finally {
  proc.kill('SIGTERM');
}
