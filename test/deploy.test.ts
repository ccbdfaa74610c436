// deploy/: the Dockerfile's HEALTHCHECK command passes against a serving deltaserve and
// fails while it drains (so an orchestrator stops routing to it); the image is node:24-slim,
// runs as a non-root user, takes models from a volume and is stopped with SIGTERM. (Its RUN
// steps are checked in a plain shell by `node deploy/dockerfile-dry-run.mjs`: slow, not
// part of the suite.) compose.yaml wires the nginx config and two replicas.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Engine } from '../src/engine/engine.js';
import { startServer } from '../src/server/index.js';
import { REPO_ROOT, TINY_THINK } from './paths.js';
import { KERNELS, postStream } from './server-helpers.js';

const dockerfile = readFileSync(join(REPO_ROOT, 'deploy', 'Dockerfile'), 'utf8');

test('Dockerfile: node:24-slim, non-root, /models volume, SIGTERM, exec-form entrypoint', () => {
  assert.match(dockerfile, /^FROM node:24-slim AS build$/m);
  const stages = dockerfile.split(/^FROM /m);
  const runtime = stages.at(-1)!;
  assert.match(runtime, /^node:24-slim\n/);
  assert.match(runtime, /^USER node$/m);
  assert.match(runtime, /^VOLUME \/models$/m);
  assert.match(runtime, /^STOPSIGNAL SIGTERM$/m);
  assert.match(runtime, /^ENTRYPOINT \["deltaserve"\]$/m);
  assert.match(runtime, /^CMD \["serve", "--host", "0\.0\.0\.0", "--port", "8000"\]$/m);
  const compose = readFileSync(join(REPO_ROOT, 'deploy', 'compose.yaml'), 'utf8');
  assert.match(compose, /dockerfile: deploy\/Dockerfile/);
  assert.match(compose, /\.\/nginx\.conf:\/etc\/nginx\/nginx\.conf:ro/);
  for (const r of ['replica-1', 'replica-2']) assert.match(compose, new RegExp(`^  ${r}:$`, 'm'));
});

test('Dockerfile HEALTHCHECK passes while serving and fails while draining', { timeout: 60_000 }, async () => {
  const m = /^HEALTHCHECK .*\\\n\s+CMD (\[.*\])$/m.exec(dockerfile);
  assert.ok(m, 'HEALTHCHECK ... CMD [exec form]');
  const cmd = JSON.parse(m[1]!) as string[];
  assert.equal(cmd[0], 'node');
  const engine = await Engine.load({ model: TINY_THINK(), kernels: KERNELS, maxRunning: 2 });
  const server = await startServer(engine, { port: 0 });
  // Asynchronously: the server runs in this process.
  const check = (): Promise<number | null> => new Promise((resolve) => {
    const p = spawn(process.execPath, cmd.slice(1).map((a) => a.replaceAll(':8000/', `:${server.port}/`)), { stdio: 'ignore' });
    p.on('exit', (code) => resolve(code));
  });
  try {
    assert.equal(await check(), 0, 'healthy while serving');
    const long = postStream(`${server.url}/v1/completions`, { prompt: 'hi', max_tokens: 3000, ignore_eos: true, stream: true });
    while (engine.stats().running < 1) await new Promise((r) => setTimeout(r, 10));
    const closing = server.close(60_000);
    assert.equal(await check(), 1, 'unhealthy while draining');
    await server.close(0);
    await closing;
    await long;
    assert.equal(await check(), 1, 'unhealthy once stopped');
  } finally {
    await server.close(0);
    await engine.close();
  }
});
