// Bad images over all three APIs (issue #49 item 7): a corrupt, truncated or unsupported
// image, a malformed data: URL, an http URL on a server without --allow-image-urls, one
// image too many, an image over --max-image-pixels, and an image sent to a text-only model
// are each a 400 whose message names the message and the part — in the Chat Completions,
// Responses and Anthropic Messages shapes alike — while a good image request streaming on
// the same server meanwhile finishes with the answer it gives alone. Image payloads do not
// count against --max-prompt-chars.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Engine } from '../src/engine/engine.js';
import { startServer, type RunningServer } from '../src/server/index.js';
import { DEFAULT_SERVER_IMAGES } from '../src/server/api/images.js';
import { Rng } from '../src/util/rng.js';
import { REPO_ROOT, TINY_THINK } from './paths.js';
import { post } from './server-helpers.js';
import { TINY_VISION } from './vision-helpers.js';
import { encodePng } from './vision-encode.js';

const JPG = new Uint8Array(readFileSync(join(REPO_ROOT, 'test', 'fixtures', 'vision-images', 'rgb-q90.jpg')));
const MAX_IMAGES = 2;
/** Small enough that a 128×128 image (16384 pixels) is over it, large enough for the JPEG fixture. */
const MAX_PIXELS = 12_000;
/** --max-prompt-chars: image payloads past it are still served (they are not prompt text). */
const PROMPT_CHARS = 20_000;

let vision: Engine;
let textOnly: Engine;
let server: RunningServer;
let textServer: RunningServer;
let png: Uint8Array;
let bigPng: Uint8Array;

async function patternPng(w: number, h: number, seed: number): Promise<Uint8Array> {
  const rng = new Rng(seed);
  return encodePng(Uint8Array.from({ length: w * h * 4 }, (_, i) => (i % 4 === 3 ? 255 : rng.nextU32() & 255)), w, h);
}

before(async () => {
  vision = await Engine.load({ model: TINY_VISION, kernels: 'ref', maxRunning: 4 });
  server = await startServer(vision, {
    port: 0, images: { ...DEFAULT_SERVER_IMAGES, maxImages: MAX_IMAGES, maxImagePixels: MAX_PIXELS }, limits: { promptChars: PROMPT_CHARS },
  });
  textOnly = await Engine.load({ model: TINY_THINK(), kernels: 'ref', maxRunning: 2 });
  textServer = await startServer(textOnly, { port: 0 });
  png = await patternPng(40, 30, 1);
  bigPng = await patternPng(128, 128, 2);
  const probe = new Uint8Array(png);
  assert.equal(probe[0], 0x89, 'the encoder wrote a PNG');
});

after(async () => {
  await server?.close();
  await textServer?.close();
  await vision?.close();
  await textOnly?.close();
});

const b64 = (b: Uint8Array): string => Buffer.from(b).toString('base64');
const dataUrl = (b: Uint8Array, type = 'image/png'): string => `data:${type};base64,${b64(b)}`;

/** A PNG whose header is intact and whose compressed pixel data is garbage. */
function corruptPng(src: Uint8Array): Uint8Array {
  const out = src.slice();
  const idat = Buffer.from(out).indexOf('IDAT');
  for (let i = idat + 6; i < out.length - 16; i++) out[i] = (out[i]! * 31 + 7) & 255;
  return out;
}

function crc32(bytes: Uint8Array): number {
  let c = ~0;
  for (const b of bytes) {
    c ^= b;
    for (let k = 0; k < 8; k++) c = (c >>> 1) ^ (0xedb88320 & -(c & 1));
  }
  return ~c >>> 0;
}

/** `src` with a private ancillary chunk of `n` bytes before IEND: the same pixels, a bigger file. */
function paddedPng(src: Uint8Array, n: number): Uint8Array {
  const iend = src.length - 12;
  const chunk = new Uint8Array(12 + n);
  const view = new DataView(chunk.buffer);
  view.setUint32(0, n);
  chunk.set(new TextEncoder().encode('prVt'), 4);
  for (let i = 0; i < n; i++) chunk[8 + i] = (i * 131) & 255;
  view.setUint32(8 + n, crc32(chunk.subarray(4, 8 + n)));
  return Uint8Array.from([...src.subarray(0, iend), ...chunk, ...src.subarray(iend)]);
}

type Api = 'chat' | 'responses' | 'messages';
const APIS: Api[] = ['chat', 'responses', 'messages'];
const ROUTE: Record<Api, string> = { chat: '/v1/chat/completions', responses: '/v1/responses', messages: '/v1/messages' };
/** Where the image parts go: after a first turn (message 2), after a text part (part 1). */
const AT = (api: Api, part: number): string => `${api === 'responses' ? 'input' : 'messages'}\\[2\\]\\.content\\[${part}\\]`;

/** One image part in `api`'s shape for a URL (data: or http). Anthropic takes a well-formed
 * base64 data: URL as a base64 source (media type and data), anything else as a url source. */
function imagePart(api: Api, url: string): Record<string, unknown> {
  if (api === 'chat') return { type: 'image_url', image_url: { url } };
  if (api === 'responses') return { type: 'input_image', image_url: url };
  const m = /^data:(image\/[\w.+-]+);base64,(.*)$/s.exec(url);
  return { type: 'image', source: m ? { type: 'base64', media_type: m[1], data: m[2] } : { type: 'url', url } };
}

/** A request with a first turn, then a user message of a text part and `urls` as image parts. */
function bodyOf(api: Api, urls: string[], maxTokens = 4): Record<string, unknown> {
  const text = api === 'responses' ? { type: 'input_text', text: 'what is this?' } : { type: 'text', text: 'what is this?' };
  const turns = [{ role: 'user', content: 'hi' }, { role: 'assistant', content: 'hello' }, { role: 'user', content: [text, ...urls.map((u) => imagePart(api, u))] }];
  if (api === 'responses') return { input: turns, max_output_tokens: maxTokens, temperature: 0 };
  return { messages: turns, max_tokens: maxTokens, temperature: 0 };
}

interface Case { readonly what: string; readonly urls: () => string[]; readonly part: number; readonly why: RegExp; readonly on?: 'text' }
const CASES: Case[] = [
  { what: 'corrupt PNG data', urls: () => [dataUrl(corruptPng(png))], part: 1, why: /corrupt|truncated/ },
  { what: 'truncated PNG', urls: () => [dataUrl(png.subarray(0, Math.floor(png.length / 2)))], part: 1, why: /truncated|corrupt/ },
  { what: 'truncated JPEG', urls: () => [dataUrl(JPG.subarray(0, Math.floor(JPG.length * 0.6)), 'image/jpeg')], part: 1, why: /truncated|corrupt/ },
  { what: 'BMP', urls: () => [dataUrl(new Uint8Array([0x42, 0x4d, 70, 0, 0, 0, 0, 0, 0, 0, 54, 0]), 'image/bmp')], part: 1, why: /unsupported image format \(BMP\)/ },
  { what: 'TIFF', urls: () => [dataUrl(new Uint8Array([0x49, 0x49, 0x2a, 0, 8, 0, 0, 0]), 'image/tiff')], part: 1, why: /unsupported image format \(TIFF\)/ },
  { what: 'SVG', urls: () => [dataUrl(new TextEncoder().encode('<svg xmlns="http://www.w3.org/2000/svg" width="9" height="9"/>'), 'image/svg+xml')], part: 1, why: /unsupported image format \(SVG\)/ },
  { what: 'empty image', urls: () => ['data:image/png;base64,'], part: 1, why: /the image data is empty/ },
  { what: 'data: URL not base64', urls: () => ['data:image/png,rawbytes'], part: 1, why: /must be base64/ },
  { what: 'data: URL with bad base64', urls: () => ['data:image/png;base64,@@not*base64@@'], part: 1, why: /not valid base64/ },
  { what: 'data: URL of a non-image type', urls: () => [`data:text/plain;base64,${b64(png)}`], part: 1, why: /not an image|image type/ },
  { what: 'http URL without --allow-image-urls', urls: () => ['http://127.0.0.1:9/cat.png'], part: 1, why: /--allow-image-urls/ },
  { what: 'one image too many', urls: () => [dataUrl(png), dataUrl(png), dataUrl(png)], part: 1 + MAX_IMAGES, why: new RegExp(`at most ${MAX_IMAGES} images`) },
  { what: 'an image over --max-image-pixels', urls: () => [dataUrl(png), dataUrl(bigPng)], part: 2, why: new RegExp(`128×128 = 16384 pixels exceeds the limit of ${MAX_PIXELS}`) },
  { what: 'an image to a text-only model', urls: () => [dataUrl(png)], part: 1, why: /text-only/, on: 'text' },
];

/** The error message of a 400 in any of the three shapes. */
function errorMessage(api: Api, json: Record<string, unknown>): string {
  const err = json['error'] as { message?: string } | undefined;
  assert.ok(err?.message, `${api}: an error object with a message: ${JSON.stringify(json)}`);
  if (api === 'messages') assert.equal(json['type'], 'error', 'Anthropic\'s error envelope');
  return err.message;
}

/** The answer text of a finished request in `api`'s shape (non-streaming). */
function answerOf(api: Api, json: Record<string, unknown>): string {
  if (api === 'chat') return JSON.stringify((json['choices'] as { message: unknown }[])[0]!.message);
  if (api === 'responses') return JSON.stringify(json['output']);
  return JSON.stringify(json['content']);
}

/** POST a streaming request and wait for its first SSE event; `rest` reads it to the end
 * and gives every event's JSON. */
async function startStream(url: string, body: unknown): Promise<{ eventsBefore: number; rest(): Promise<Record<string, unknown>[]> }> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  assert.equal(res.status, 200);
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = '';
  const events = (): Record<string, unknown>[] => text.split('\n\n').filter((b) => b.startsWith('data: ') && !b.startsWith('data: [DONE]'))
    .map((b) => JSON.parse(b.slice(6)) as Record<string, unknown>);
  while (!text.includes('\n\n')) {
    const { value, done } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
  }
  const eventsBefore = text.split('\n\n').length - 1;
  return {
    eventsBefore,
    async rest() {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return events();
        text += decoder.decode(value, { stream: true });
      }
    },
  };
}

test('every bad image is a 400 naming the message and part on all three APIs; a concurrent good request is unaffected', async () => {
  const good = bodyOf('chat', [dataUrl(png)], 24);
  const alone = await post(`${server.url}/v1/chat/completions`, good);
  assert.equal(alone.status, 200, JSON.stringify(alone.json));
  // the good request is streaming (its first event arrived) when every bad one is sent, all at once
  const streaming = await startStream(`${server.url}/v1/chat/completions`, { ...good, stream: true });
  const refusals = await Promise.all(APIS.flatMap((api) => CASES.map(async (c) => {
    const url = c.on === 'text' ? textServer.url : server.url;
    const r = await post(`${url}${ROUTE[api]}`, bodyOf(api, c.urls()));
    return { api, c, status: r.status, message: r.status === 400 ? errorMessage(api, r.json) : JSON.stringify(r.json) };
  })));
  const wrong = refusals.filter(({ api, c, status, message }) => status !== 400 || !new RegExp(`${AT(api, c.part)}`).test(message) || !c.why.test(message));
  assert.deepEqual(wrong.map(({ api, c, status, message }) => `${api} · ${c.what}: ${status} ${message}`), [],
    'each case is a 400 naming messages[2].content[part] (input[2]… on Responses) and the reason');
  const events = await streaming.rest();
  assert.ok(streaming.eventsBefore >= 1 && events.length > streaming.eventsBefore + 1, `the good request was mid-stream while the bad ones came (${streaming.eventsBefore} of ${events.length} events before)`);
  const text = events.map((e) => ((e as { choices?: { delta?: { content?: string; reasoning_content?: string } }[] }).choices?.[0]?.delta))
    .map((d) => `${d?.reasoning_content ?? ''}${d?.content ?? ''}`).join('');
  const msg = (alone.json['choices'] as { message: { content: string | null; reasoning_content?: string | null } }[])[0]!.message;
  assert.equal(text, `${msg.reasoning_content ?? ''}${msg.content ?? ''}`, 'the good request streamed the answer it gives alone');
  // and the same good image is still answered, identically, on every API afterwards
  for (const api of APIS) {
    const a = await post(`${server.url}${ROUTE[api]}`, bodyOf(api, [dataUrl(png)]));
    const b = await post(`${server.url}${ROUTE[api]}`, bodyOf(api, [dataUrl(png)]));
    assert.equal(a.status, 200, `${api}: ${JSON.stringify(a.json)}`);
    assert.equal(answerOf(api, a.json).replace(/"(id|created_at)":"?[\w-]+"?/g, ''), answerOf(api, b.json).replace(/"(id|created_at)":"?[\w-]+"?/g, ''), api);
  }
});

test('image payloads do not count as prompt text (--max-prompt-chars): a PNG padded past the limit is answered as the plain one', async () => {
  const padded = paddedPng(png, 3 * PROMPT_CHARS);
  assert.ok(dataUrl(padded).length > 3 * PROMPT_CHARS);
  const strip = (t: string): string => t.replace(/"(id|created_at)":"?[\w-]+"?/g, '');
  for (const api of APIS) {
    const plain = await post(`${server.url}${ROUTE[api]}`, bodyOf(api, [dataUrl(png)]));
    const big = await post(`${server.url}${ROUTE[api]}`, bodyOf(api, [dataUrl(padded)]));
    assert.equal(big.status, 200, `${api}: ${JSON.stringify(big.json)}`);
    assert.equal(strip(answerOf(api, big.json)), strip(answerOf(api, plain.json)), `${api}: the same pixels, the same answer`);
  }
  const text = await post(`${server.url}/v1/chat/completions`, { messages: [{ role: 'user', content: 'x'.repeat(PROMPT_CHARS + 1) }], max_tokens: 1 });
  assert.equal(text.status, 413, 'prompt text past the limit is still refused');
  assert.match(JSON.stringify(text.json), /--max-prompt-chars/);
});
