// Hostile HTTP, over raw sockets (fetch would normalize what is tested here): path spellings
// (`//metrics`, `/v1//chat/completions`, absolute-form, dot segments) reach exactly their
// route and its key check; without the key a client learns only the open routes; every
// error — connection-level ones too (slow body 408, 20,000-character URL 431, garbage 400) —
// is JSON in its route's dialect; Anthropic `stop_sequences` must be an array.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { Engine } from '../src/engine/engine.js';
import { startServer, type RunningServer } from '../src/server/index.js';
import { TINY_THINK } from './paths.js';
import { KERNELS } from './server-helpers.js';

let engine: Engine;
let server: RunningServer;
const KEY = 'sekret';
const AUTH = `authorization: Bearer ${KEY}\r\n`;

before(async () => {
  engine = await Engine.load({ model: TINY_THINK(), kernels: KERNELS, maxRunning: 4, prefixCache: false });
  server = await startServer(engine, { port: 0, apiKey: KEY, requestTimeoutMs: 1000 });
});
after(async () => {
  await server.close();
  await engine.close();
});

interface RawReply {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Send `text` on a fresh connection and read the reply until the server closes it. */
function rawSend(text: string): Promise<RawReply> {
  return new Promise((resolve, reject) => {
    const sock = connect(server.port, '127.0.0.1', () => sock.write(text));
    const chunks: Buffer[] = [];
    sock.on('data', (d: Buffer) => chunks.push(d));
    sock.on('error', () => undefined);
    const timer = setTimeout(() => sock.destroy(), 30_000);
    sock.on('close', () => {
      clearTimeout(timer);
      const all = Buffer.concat(chunks).toString('utf8');
      const head = all.slice(0, all.indexOf('\r\n\r\n'));
      const m = /^HTTP\/1\.1 (\d{3})/.exec(head);
      if (!m) return reject(new Error(`no HTTP reply: ${JSON.stringify(all.slice(0, 200))}`));
      const headers: Record<string, string> = {};
      for (const line of head.split('\r\n').slice(1)) {
        const i = line.indexOf(':');
        headers[line.slice(0, i).toLowerCase()] = line.slice(i + 1).trim();
      }
      let body = all.slice(head.length + 4);
      if (headers['transfer-encoding'] === 'chunked') body = dechunk(body);
      resolve({ status: Number(m[1]), headers, body });
    });
  });
}

function dechunk(s: string): string {
  let out = '';
  for (let at = 0; ;) {
    const eol = s.indexOf('\r\n', at);
    const n = parseInt(s.slice(at, eol), 16);
    if (!(n > 0)) return out;
    out += s.slice(eol + 2, eol + 2 + n);
    at = eol + 2 + n + 2;
  }
}

/** A whole request with `connection: close`. */
function request(method: string, target: string, opts: { key?: boolean; body?: unknown } = {}): Promise<RawReply> {
  const body = opts.body === undefined ? '' : typeof opts.body === 'string' ? opts.body : JSON.stringify(opts.body);
  const head = `${method} ${target} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n${opts.key ? AUTH : ''}` +
    (body ? `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n` : '');
  return rawSend(`${head}\r\n${body}`);
}

/** The reply is an OpenAI-style error: {error: {message, type, param, code}}. */
function openAiError(r: RawReply, status: number, code?: string): { message: string; code: string | null } {
  assert.equal(r.status, status, r.body);
  assert.match(r.headers['content-type'] ?? '', /application\/json/);
  const e = (JSON.parse(r.body) as { error: { message: string; type: string; param: unknown; code: string | null } }).error;
  assert.ok(typeof e.message === 'string' && e.message.length > 0 && typeof e.type === 'string' && 'param' in e && 'code' in e, r.body);
  if (code !== undefined) assert.equal(e.code, code, r.body);
  return e;
}

/** The reply is an Anthropic-style error: {type: "error", error: {type, message}}. */
function anthropicError(r: RawReply, status: number, type?: string): { message: string } {
  assert.equal(r.status, status, r.body);
  assert.match(r.headers['content-type'] ?? '', /application\/json/);
  const j = JSON.parse(r.body) as { type: string; error: { type: string; message: string } };
  assert.equal(j.type, 'error', r.body);
  assert.ok(typeof j.error.message === 'string' && j.error.message.length > 0, r.body);
  if (type !== undefined) assert.equal(j.error.type, type, r.body);
  return j.error;
}

const CHAT = { messages: [{ role: 'user', content: 'hi' }], max_tokens: 1 };
const MSG = { messages: [{ role: 'user', content: 'hi' }], max_tokens: 1 };

test('every spelling of a protected route needs the key; open routes stay open; dot segments are refused', async () => {
  for (const target of ['//metrics', '///metrics', '/metrics/', '//metrics?x=//y', 'http://evil.example/metrics', '//version', '/v1//models']) {
    const r = await request('GET', target);
    openAiError(r, 401, 'invalid_api_key');
    assert.doesNotMatch(r.body, /<html/i);
  }
  assert.match((await request('GET', '//metrics', { key: true })).body, /^# HELP /m);
  assert.equal(JSON.parse((await request('GET', '/v1//models', { key: true })).body).object, 'list');
  for (const target of ['//health', '///health/', 'http://evil.example/health']) {
    const r = await request('GET', target);
    assert.equal(r.status, 200, target);
    assert.deepEqual(JSON.parse(r.body), { status: 'ok' });
  }
  for (const target of ['/v1//chat/completions', '//v1/chat//completions/']) {
    openAiError(await request('POST', target, { body: CHAT }), 401, 'invalid_api_key');
    const ok = await request('POST', target, { key: true, body: CHAT });
    assert.equal(ok.status, 200, ok.body);
    assert.equal(JSON.parse(ok.body).object, 'chat.completion');
  }
  anthropicError(await request('POST', '//v1//messages', { body: MSG }), 401, 'authentication_error');
  for (const target of ['/v1/../metrics', '/v1/%2e%2E/metrics', '/./health', '/v1/models/..', '*']) {
    const e = openAiError(await request('GET', target), 400, 'invalid_url');
    assert.match(e.message, /malformed request URL/);
  }
  // a target node:http cannot parse at all
  openAiError(await request('GET', 'metrics'), 400, 'bad_http');
});

test('without the key only the open routes answer 404/405; everything else is 401 first', async () => {
  const cases: [method: string, target: string, withKey: number][] = [
    ['GET', '/no/such/route', 404], ['GET', '/v1/chat/completions', 405], ['DELETE', '/v1/models', 405],
    ['GET', '/v1/responses/%ZZ', 400], ['PUT', '/v1/responses/resp_1', 405], ['GET', '/v1/models/other', 404],
  ];
  for (const [method, target, withKey] of cases) {
    openAiError(await request(method, target), 401, 'invalid_api_key');
    assert.equal((await request(method, target, { key: true })).status, withKey, `${method} ${target}`);
  }
  anthropicError(await request('GET', '/v1/messages'), 401, 'authentication_error');
  anthropicError(await request('GET', '/v1/messages', { key: true }), 405);
  // an open route tells its methods to anyone
  openAiError(await request('POST', '/health', { body: {} }), 405, 'method_not_allowed');
});

test('a slow request body gets 408 with a JSON body in the route\'s dialect; slow headers too', async () => {
  const partial = (target: string): string => `POST ${target} HTTP/1.1\r\nhost: x\r\n${AUTH}content-type: application/json\r\ncontent-length: 1000\r\n\r\n{"messages": [`;
  const chat = openAiError(await rawSend(partial('/v1/chat/completions')), 408, 'request_timeout');
  assert.match(chat.message, /1000 ms \(--request-timeout-ms\)/);
  anthropicError(await rawSend(partial('/v1/messages')), 408, 'invalid_request_error');
  openAiError(await rawSend('POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n'), 408, 'request_timeout');
  assert.equal((await request('GET', '/health')).status, 200);
});

test('a 20,000-character URL gets 431 as JSON in its route\'s dialect; unparsable HTTP gets 400 JSON', async () => {
  const id = 'r'.repeat(20_000);
  openAiError(await request('GET', `/v1/responses/${id}`, { key: true }), 431, 'headers_too_large');
  anthropicError(await request('POST', `/v1/messages?pad=${id}`, { key: true, body: MSG }), 431, 'request_too_large');
  openAiError(await rawSend('THIS IS NOT HTTP\r\n\r\n'), 400, 'bad_http');
  openAiError(await rawSend(`GET /health HTTP/1.1\r\nhost: x\r\nbad header line\r\n\r\n`), 400, 'bad_http');
  anthropicError(await rawSend(`POST /v1/messages HTTP/1.1\r\nhost: x\r\nexpect: teapot\r\ncontent-length: 2\r\n\r\n{}`), 417);
  openAiError(await rawSend(`POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nexpect: teapot\r\ncontent-length: 2\r\n\r\n{}`), 417, 'expectation_failed');
  // unknown paths under /v1/messages speak Anthropic too
  anthropicError(await request('GET', '/v1/messages/nope', { key: true }), 404, 'not_found_error');
});

test('Anthropic stop_sequences must be an array of strings', async () => {
  const post = (stop: unknown): Promise<RawReply> => request('POST', '/v1/messages', { key: true, body: { ...MSG, stop_sequences: stop } });
  assert.match(anthropicError(await post('END'), 400, 'invalid_request_error').message, /stop_sequences must be an array of strings \(got a string\)/);
  assert.match(anthropicError(await post(['END', 3]), 400).message, /stop_sequences\[1\] must be a string/);
  assert.match(anthropicError(await post({ a: 'END' }), 400).message, /stop_sequences must be an array/);
  for (const ok of [['END'], [], null]) {
    const r = await post(ok);
    assert.equal(r.status, 200, r.body);
    assert.equal(JSON.parse(r.body).type, 'message');
  }
});

test('every error of every API route is JSON in the route\'s dialect', async () => {
  const openai = ['/v1/chat/completions', '/v1/completions', '/v1/responses', '/tokenize', '/detokenize'];
  const anthropic = ['/v1/messages', '/v1/messages/count_tokens'];
  const bad: [body: string, status: number][] = [['{not json', 400], ['[1]', 400], ['', 400], ['{"model": "nope"}', 0]];
  for (const [target, check] of [...openai.map((t) => [t, openAiError] as const), ...anthropic.map((t) => [t, anthropicError] as const)]) {
    check(await request('POST', target, { body: CHAT }), 401);
    check(await request('GET', target, { key: true }), 405);
    for (const [body, status] of bad) {
      const r = await request('POST', target, { key: true, body: body || undefined });
      check(r, status || r.status);
      assert.ok(r.status >= 400 && r.status < 500, `${target} ${body}: ${r.status}`);
    }
  }
});
