// Images over HTTP on the tiny-vision fixture: Chat Completions image_url (data: URL),
// Responses input_image, Anthropic image blocks (base64) answer; the same image in turn 2
// hits the prefix cache bit-exact with a cold server (logprobs equal); bad images, too many
// images, a URL on a server without --allow-image-urls and an image sent to a text-only
// model are 400s naming the message and part, and the server keeps serving.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Engine } from '../src/engine/engine.js';
import { startServer, type RunningServer } from '../src/server/index.js';
import { REPO_ROOT, TINY_THINK } from './paths.js';
import { TINY_VISION } from './vision-helpers.js';
import { post } from './server-helpers.js';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

const JPG = readFileSync(join(REPO_ROOT, 'test', 'fixtures', 'vision-images', 'rgb-q90.jpg'));
const B64 = JPG.toString('base64');
const DATA_URL = `data:image/jpeg;base64,${B64}`;
type Up = { engine: Engine; server: RunningServer };
const ups: Up[] = [];
let warm: Up;
let cold: Up;
let text: Up;
let host: Server;
let hostUrl: string;

async function up(model: string, prefixCache: boolean, allowUrls = false): Promise<Up> {
  const engine = await Engine.load({ model, kernels: 'ref', maxRunning: 4, prefixCache });
  const u = { engine, server: await startServer(engine, { port: 0, images: { maxImages: 2, allowUrls, urlMaxBytes: 100_000, urlTimeoutMs: 1500 } }) };
  ups.push(u);
  return u;
}

before(async () => {
  warm = await up(TINY_VISION, true, true);
  // a loopback image host: the JPEG, a body over the size limit, and one that never answers
  host = createServer((req, res) => {
    if (req.url === '/cat.jpg') res.end(JPG);
    else if (req.url === '/big.jpg') res.end(Buffer.alloc(200_000, 1));
    else if (req.url === '/slow.jpg') setTimeout(() => res.end(JPG), 20_000).unref();
    else res.writeHead(404).end();
  });
  await new Promise<void>((ok) => host.listen(0, '127.0.0.1', ok));
  hostUrl = `http://127.0.0.1:${(host.address() as AddressInfo).port}`;
  cold = await up(TINY_VISION, false);
  text = await up(TINY_THINK(), true);
});
after(async () => {
  host.closeAllConnections();
  host.close();
  for (const u of ups) {
    await u.server.close();
    await u.engine.close();
  }
});

const imagePart = (url = DATA_URL) => ({ type: 'image_url', image_url: { url } });
const chatBody = (content: unknown[], extra: unknown[] = []) => ({
  messages: [{ role: 'user', content }, ...extra], max_tokens: 6, temperature: 0, logprobs: true, top_logprobs: 3,
});

test('Chat Completions image_url: answered; turn 2 with the same image hits, bit-exact with a cold server', async () => {
  const t1 = chatBody([{ type: 'text', text: 'what is this?' }, imagePart()]);
  const a = await post(`${warm.server.url}/v1/chat/completions`, t1);
  assert.equal(a.status, 200, JSON.stringify(a.json));
  const choice = (a.json['choices'] as Record<string, unknown>[])[0]!;
  const answer = (choice['message'] as Record<string, string>)['content'] ?? '';
  const usage = a.json['usage'] as Record<string, number>;
  assert.ok(usage['prompt_tokens']! > 20, 'the image pads count as prompt tokens');
  const t2 = chatBody([{ type: 'text', text: 'what is this?' }, imagePart()], [
    { role: 'assistant', content: answer }, { role: 'user', content: [imagePart(), { type: 'text', text: 'and now?' }] },
  ]);
  const hot = await post(`${warm.server.url}/v1/chat/completions`, t2);
  const fresh = await post(`${cold.server.url}/v1/chat/completions`, t2);
  assert.equal(hot.status, 200);
  const cached = (hot.json['usage'] as { prompt_tokens_details: { cached_tokens: number } }).prompt_tokens_details.cached_tokens;
  assert.ok(cached > usage['prompt_tokens']! / 2, `turn 2 hits the cache past the first image (${cached})`);
  const lp = (r: typeof hot) => (r.json['choices'] as Record<string, unknown>[])[0]!['logprobs'];
  assert.deepEqual(lp(hot), lp(fresh), 'hit == cold: the same logprobs, bit for bit');
});

test('Responses input_image and Anthropic image blocks are answered', async () => {
  const r = await post(`${warm.server.url}/v1/responses`, {
    input: [{ role: 'user', content: [{ type: 'input_text', text: 'describe' }, { type: 'input_image', image_url: DATA_URL }] }], max_output_tokens: 4,
  });
  assert.equal(r.status, 200, JSON.stringify(r.json));
  assert.ok((r.json['usage'] as Record<string, number>)['input_tokens']! > 20);
  const m = await post(`${warm.server.url}/v1/messages`, {
    max_tokens: 4, messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/jpeg', data: B64 } }, { type: 'text', text: 'describe' }] }],
  });
  assert.equal(m.status, 200, JSON.stringify(m.json));
  assert.ok((m.json['usage'] as Record<string, number>)['input_tokens']! > 20);
});

test('bad images are 400s naming the message and part; the server keeps serving', async () => {
  const cases: [unknown, RegExp][] = [
    [chatBody([{ type: 'text', text: 'x' }, imagePart(`data:image/jpeg;base64,${JPG.subarray(0, 400).toString('base64')}`)]), /messages\[0\]\.content\[1\]/],
    [chatBody([imagePart('data:image/png;base64,AAAA')]), /messages\[0\]\.content\[0\]/],
    [chatBody([imagePart('data:text/plain;base64,AAAA')]), /messages\[0\]\.content\[0\].*not an image/],
    [chatBody([imagePart(`${hostUrl}/big.jpg`)]), /messages\[0\]\.content\[0\].*over 100000 bytes/],
    [chatBody([imagePart(`${hostUrl}/slow.jpg`)]), /messages\[0\]\.content\[0\].*over 1500 ms/],
    [chatBody([imagePart(`${hostUrl}/none.jpg`)]), /messages\[0\]\.content\[0\].*HTTP 404/],
    [chatBody([imagePart(), imagePart(), imagePart()]), /messages\[0\]\.content\[2\].*at most 2 images/],
  ];
  for (const [body, re] of cases) {
    const r = await post(`${warm.server.url}/v1/chat/completions`, body);
    assert.equal(r.status, 400, JSON.stringify(r.json));
    assert.match(JSON.stringify(r.json), re);
  }
  const m = await post(`${warm.server.url}/v1/messages`, {
    max_tokens: 4, messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AAAA' } }] }],
  });
  assert.equal(m.status, 400);
  assert.match(JSON.stringify(m.json), /messages\[0\]\.content\[0\]/);
  const ok = await post(`${warm.server.url}/v1/chat/completions`, chatBody([imagePart()]));
  assert.equal(ok.status, 200, 'still serving');
});

test('http(s) image URLs: fetched with --allow-image-urls (same answer as the data: URL), refused without', async () => {
  const byUrl = await post(`${warm.server.url}/v1/chat/completions`, chatBody([imagePart(`${hostUrl}/cat.jpg`)]));
  const byData = await post(`${warm.server.url}/v1/chat/completions`, chatBody([imagePart()]));
  assert.equal(byUrl.status, 200, JSON.stringify(byUrl.json));
  const lp = (r: typeof byUrl) => (r.json['choices'] as Record<string, unknown>[])[0]!['logprobs'];
  assert.deepEqual(lp(byUrl), lp(byData));
  const m = await post(`${warm.server.url}/v1/messages`, { max_tokens: 4, messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'url', url: `${hostUrl}/cat.jpg` } }] }] });
  assert.equal(m.status, 200, JSON.stringify(m.json));
  const off = await post(`${cold.server.url}/v1/chat/completions`, chatBody([imagePart(`${hostUrl}/cat.jpg`)]));
  assert.equal(off.status, 400);
  assert.match(JSON.stringify(off.json), /messages\[0\]\.content\[0\].*--allow-image-urls/);
});

test('a text-only model refuses an image with a 400 naming the part', async () => {
  const r = await post(`${text.server.url}/v1/chat/completions`, chatBody([{ type: 'text', text: 'x' }, imagePart()]));
  assert.equal(r.status, 400);
  assert.match(JSON.stringify(r.json), /messages\[0\]\.content\[1\]: this model is text-only/);
});
