// `deltaserve serve` as a process: prints the URL and model summary when ready, takes the
// API key from DELTASERVE_API_KEY, and on SIGTERM lets in-flight requests run for the
// grace period, aborts the rest (finish_reason "abort") and exits 0.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnServe } from './serve-process.js';
import { joinChat, postStream } from './server-helpers.js';

test('serve: ready line, API key from the environment, SIGTERM drains and exits 0', { timeout: 60_000 }, async () => {
  const server = await spawnServe(['--shutdown-grace-ms', '300', '--served-model-name', 'tt'],
    { env: { DELTASERVE_API_KEY: 'k1' }, readyWhen: /model qwen3_5_text, 8 layers/ });
  const { url } = server;
  assert.equal((await fetch(`${url}/health`)).status, 200);
  assert.equal((await fetch(`${url}/v1/models`)).status, 401);
  const auth = { authorization: 'Bearer k1' };
  const models = (await (await fetch(`${url}/v1/models`, { headers: auth })).json()) as { data: { id: string }[] };
  assert.deepEqual(models.data.map((m) => m.id), ['tt']);
  const long = postStream(`${url}/v1/chat/completions`, {
    model: 'tt', messages: [{ role: 'user', content: 'What is 1 + 1?' }], max_tokens: 3000, ignore_eos: true, stream: true,
  }, Infinity, auth);
  // wait until the stream has started
  for (let i = 0; i < 500; i++) {
    const m = await (await fetch(`${url}/metrics`, { headers: auth })).text();
    if (/deltaserve_running_requests 1/.test(m)) break;
    await new Promise((r) => setTimeout(r, 10));
  }
  const exitCode = server.stop();
  const r = await long;
  assert.ok(r.sawDone);
  assert.equal(joinChat(r.events)[0]!.finish, 'abort');
  assert.equal(await exitCode, 0, server.stderr());
  assert.match(server.stderr(), /SIGTERM: shutting down/);
});
