// `deltaserve serve` as a process: prints the URL and model summary when ready, takes the
// API key from DELTASERVE_API_KEY, and on SIGTERM lets in-flight requests run for the
// grace period, aborts the rest (finish_reason "abort") and exits 0.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { REPO_ROOT, TINY_THINK } from './paths.js';
import { joinChat, KERNELS, postStream } from './server-helpers.js';

test('serve: ready line, API key from the environment, SIGTERM drains and exits 0', { timeout: 60_000 }, async () => {
  const proc = spawn(process.execPath, [join(REPO_ROOT, 'dist', 'src', 'cli', 'main.js'), 'serve', '--port', '0',
    '--model', TINY_THINK(), '--shutdown-grace-ms', '300', '--served-model-name', 'tt'], {
    env: { ...process.env, DELTASERVE_KERNELS: KERNELS, DELTASERVE_API_KEY: 'k1' }, stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  proc.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
  const exited = new Promise<number | null>((resolve) => proc.on('exit', (code) => resolve(code)));
  const url = await new Promise<string>((resolve, reject) => {
    proc.stdout.on('data', (b: Buffer) => {
      stdout += b.toString();
      const m = /serving tt at (http:\/\/127\.0\.0\.1:\d+)\/v1\n/.exec(stdout);
      if (m && /model qwen3_5_text, 8 layers/.test(stdout)) resolve(m[1]!);
    });
    void exited.then((code) => reject(new Error(`serve exited (${code}) before it was ready: ${stderr}`)));
  });
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
  proc.kill('SIGTERM');
  const r = await long;
  assert.ok(r.sawDone);
  assert.equal(joinChat(r.events)[0]!.finish, 'abort');
  assert.equal(await exited, 0, stderr);
  assert.match(stderr, /SIGTERM: shutting down/);
});
