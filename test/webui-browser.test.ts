/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
// The web UI in a real browser: Debian's headless Chromium (/usr/bin/chromium, installed by
// `npm run test:setup`) driven by puppeteer-core, against a live server on
// tiny-think. Chat: reasoning block and answer stream in and equal the API's answer; stop
// a long answer; reload and find the conversation; a forced tool call answered by hand;
// structured output validated; a settings field that does not parse; model HTML in an
// imported conversation shown as text; export → import; rename / delete; the API-key prompt. Dashboard: plots update after a few requests.
// Screenshots go to test-artifacts/webui/. Any console error on a page fails the test.
import { test, before, after, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import puppeteer, { type Browser, type ConsoleMessage, type Page } from 'puppeteer-core';
import type { LogFields, Logger } from '../src/util/log.js';
import { Engine } from '../src/engine/engine.js';
import { startServer, type RunningServer } from '../src/server/index.js';
import { WEBUI_DIR } from '../src/server/http/webui.js';
import { REPO_ROOT } from './paths.js';
import { KERNELS, post } from './server-helpers.js';

const CHROMIUM = '/usr/bin/chromium';
const ARTIFACTS = join(REPO_ROOT, 'test-artifacts', 'webui');
const KEY = 'sesame';
const ASK = 'What is 23 + 45?';
/** tiny-think's end-of-text ids: biased away, answers run to max_tokens (a long answer to stop). */
const NO_EOS = JSON.stringify({ logit_bias: { 995: -100, 996: -100, 997: -100 } });

let engine: Engine;
let server: RunningServer;
let keyed: RunningServer;
/** API key required, but /metrics.json open: the page learns of the key at its first chat request. */
let keyedOpenMetrics: RunningServer;
let browser: Browser;
let page: Page;
let userData: string;
const consoleErrors: string[] = [];
/** The main server's access log (one entry per request). */
const accessLog: LogFields[] = [];
const captureLog: Logger = {
  level: 'info', debug() {}, warn() {}, error() {},
  info(msg, fields) {
    if (msg === 'request' && fields) accessLog.push(fields);
  },
};
/** Chat requests the browser reported as failed (an abort included) or as loaded to their end. */
const chatRequests = { failed: [] as string[], finished: 0 };

function watch(p: Page, allow: (m: ConsoleMessage) => boolean = () => false): void {
  p.on('console', (m) => {
    if (m.type() === 'error' && !allow(m)) consoleErrors.push(`${m.text()} at ${m.location().url ?? '?'}`);
  });
  p.on('pageerror', (e) => consoleErrors.push(`uncaught: ${(e as Error).message}`));
}

before(async () => {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`${CHROMIUM} is missing: the web UI test needs Debian's chromium: run \`npm run test:setup\` ` +
      '(scripts/install-test-deps.sh: apt-get, as root); otherwise: apt-get install -y chromium');
  }
  if (!existsSync(join(WEBUI_DIR, 'index.html'))) throw new Error(`the web UI is not built (${WEBUI_DIR} is missing): run \`npm run build\``);
  mkdirSync(ARTIFACTS, { recursive: true });
  engine = await Engine.load({ model: join(REPO_ROOT, 'models', 'tiny-think'), kernels: KERNELS, maxRunning: 4, specAdaptive: false });
  server = await startServer(engine, { port: 0, logger: captureLog });
  keyed = await startServer(engine, { port: 0, apiKey: KEY });
  keyedOpenMetrics = await startServer(engine, { port: 0, apiKey: KEY, metricsNoAuth: true });
  userData = mkdtempSync(join(tmpdir(), 'deltaserve-chromium-'));
  browser = await puppeteer.launch({
    executablePath: CHROMIUM, headless: true, userDataDir: userData,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
  });
  page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 800 });
  watch(page);
  page.on('requestfailed', (r) => {
    if (r.url().endsWith('/v1/chat/completions')) chatRequests.failed.push(r.failure()?.errorText ?? '?');
  });
  page.on('requestfinished', (r) => {
    if (r.url().endsWith('/v1/chat/completions')) chatRequests.finished++;
  });
});

after(async () => {
  await browser?.close();
  await keyed?.close();
  await keyedOpenMetrics?.close();
  await server?.close();
  await engine?.close();
  if (userData) rmSync(userData, { recursive: true, force: true });
});

afterEach(() => {
  assert.deepEqual(consoleErrors.splice(0), [], 'no console errors on the page');
});

const shot = (p: Page, name: string): Promise<unknown> => p.screenshot({ path: join(ARTIFACTS, `${name}.png`) });
const texts = (p: Page, sel: string): Promise<string[]> => p.$$eval(sel, (els) => els.map((e) => e.textContent ?? ''));

async function openChat(): Promise<void> {
  await page.goto(`${server.url}/`);
  await page.waitForSelector('body.ready');
}

/** Type into a settings field (the panel is opened if needed), replacing its value. */
async function setField(id: string, value: string): Promise<void> {
  if (!(await page.$eval('body', (b) => b.classList.contains('settings-open')))) await page.click('#toggle-settings');
  await page.$eval(`#${id}`, (el) => {
    (el as HTMLInputElement).value = '';
    el.dispatchEvent(new Event('input'));
  });
  await page.type(`#${id}`, value);
}

async function send(text: string): Promise<void> {
  await page.type('#input', text);
  await page.keyboard.press('Enter');
}

/** Wait for the n-th assistant message (1-based) to finish; returns its finish reason.
 * A request just started by a click may not have marked the page busy yet: wait up to 3 s
 * for that first (a finished state seen before it would be the previous answer's), then
 * read the finish reason in the same evaluation that sees it (the list re-renders). */
async function finished(n: number, timeout = 60_000): Promise<string> {
  await page.waitForFunction(() => document.body.classList.contains('busy'), { timeout: 3000 }).catch(() => undefined);
  const handle = await page.waitForFunction((k) => {
    const a = document.querySelectorAll('.msg.assistant:not(.streaming)');
    const done = a.length >= k && !document.body.classList.contains('busy') ? a[k - 1]!.querySelector('.s-finish') : null;
    return done ? done.textContent ?? '' : false;
  }, { timeout }, n);
  return String(await handle.jsonValue()).replace(/^finish\s*/, '');
}

test('chat: the reasoning block and the answer stream in, equal the API answer, with per-message stats', async () => {
  await openChat();
  // record what the live message shows at each DOM change while it streams
  await page.evaluate(() => {
    const seen: { reasoning: string; answer: string; waiting: string | null; summary: string }[] = [];
    (window as unknown as { seen: typeof seen }).seen = seen;
    new MutationObserver(() => {
      const m = document.querySelector('.msg.assistant.streaming');
      const waiting = m?.querySelector<HTMLElement>('.waiting');
      if (m) {
        seen.push({ reasoning: m.querySelector('.reasoning-text')?.textContent ?? '', answer: m.querySelector('.answer')?.textContent ?? '',
          waiting: waiting && !waiting.hidden ? waiting.textContent : null, summary: m.querySelector('.reasoning summary')?.textContent ?? '' });
      }
    }).observe(document.getElementById('messages')!, { subtree: true, childList: true, characterData: true });
  });
  // Pace the answer's server-sent events 20 ms apart in the page (the app still reads one
  // stream): on a quiet machine tiny-think writes its whole reasoning within one frame, and
  // what this test checks is what the page shows between tokens.
  await page.evaluate(() => {
    const w = window as unknown as { fetch: typeof fetch; unpacedFetch?: typeof fetch };
    const original = w.fetch.bind(window);
    w.unpacedFetch = original;
    w.fetch = async (input, init) => {
      const res = await original(input, init);
      if (!String(input).endsWith('/v1/chat/completions') || !res.body) return res;
      const reader = res.body.getReader();
      const enc = new TextEncoder();
      const dec = new TextDecoder();
      let buf = '';
      const paced = new ReadableStream<Uint8Array>({
        async pull(ctl) {
          for (;;) {
            const end = buf.indexOf('\n\n');
            if (end >= 0) {
              const event = buf.slice(0, end + 2);
              buf = buf.slice(end + 2);
              await new Promise((r) => setTimeout(r, 20));
              ctl.enqueue(enc.encode(event));
              return;
            }
            const { value, done } = await reader.read();
            if (done) {
              if (buf !== '') ctl.enqueue(enc.encode(buf));
              ctl.close();
              return;
            }
            buf += dec.decode(value, { stream: true });
          }
        },
      });
      return new Response(paced, { status: res.status, headers: res.headers });
    };
  });
  const finishedBefore = chatRequests.finished;
  await send(ASK);
  assert.equal(await finished(1), 'stop');
  await page.evaluate(() => {
    const w = window as unknown as { fetch: typeof fetch; unpacedFetch?: typeof fetch };
    if (w.unpacedFetch) w.fetch = w.unpacedFetch;
  });
  const seen = await page.evaluate(() => (window as unknown as { seen: { reasoning: string; answer: string; waiting: string | null; summary: string }[] }).seen);
  const reasoningSteps = new Set(seen.map((s) => s.reasoning).filter((r) => r !== ''));
  assert.ok(reasoningSteps.size >= 2, `the reasoning grew while streaming (${reasoningSteps.size} distinct states)`);
  assert.ok(seen.some((s) => s.reasoning !== '' && s.answer === ''), 'reasoning was shown before the answer began');
  assert.ok(seen.some((s) => s.reasoning === '' && /^Waiting for the model… \d+\.\d s$/.test(s.waiting ?? '')), 'a waiting indicator before the first token');
  assert.ok(seen.every((s) => s.reasoning === '' || s.waiting === null), 'the waiting indicator goes once text arrives');
  assert.ok(seen.some((s) => s.answer === '' && /^Thinking… \d+\.\d s$/.test(s.summary)), 'elapsed time while reasoning streams');
  const summary = await page.$eval('.msg.assistant .reasoning summary', (e) => e.textContent ?? '');
  const tokens = /^Thought for \d+\.\d s · (\d+) tokens?$/.exec(summary);
  assert.ok(tokens && Number(tokens[1]) >= 1, `the folded reasoning shows its duration and length: "${summary}"`);
  // the stream is read to its end: the request is neither cancelled at [DONE] nor logged as a client abort
  const deadline = Date.now() + 5000;
  while (chatRequests.finished === finishedBefore && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  assert.equal(chatRequests.finished, finishedBefore + 1, 'the browser loaded the answer to its end');
  assert.deepEqual(chatRequests.failed, [], 'no chat request failed or was aborted');
  const logged = accessLog.filter((e) => e['route'] === '/v1/chat/completions');
  assert.ok(logged.length >= 1 && logged.every((e) => e['client_abort'] === false), `no client abort in the access log: ${JSON.stringify(logged)}`);

  const api = await post(`${server.url}/v1/chat/completions`, { messages: [{ role: 'user', content: ASK }] });
  const msg = (api.json['choices'] as { message: { content: string; reasoning_content: string } }[])[0]!.message;
  assert.equal((await texts(page, '.msg.assistant .answer'))[0], msg.content, 'the page shows the API answer');
  assert.equal((await texts(page, '.msg.assistant .reasoning-text'))[0], msg.reasoning_content);
  assert.equal(await page.$eval('.msg.assistant .reasoning', (d) => (d as HTMLDetailsElement).hidden), false);
  const stats = (await texts(page, '.msg.assistant .stats'))[0]!;
  for (const label of [/prompt \d+/, /cached \d+/, /TTFT \d+ ms/, /speed [\d.]+ tok\/s/, /MTP accept [\d.]+/, /finish stop/]) {
    assert.match(stats, label);
  }
  assert.equal(await page.$eval('#title', (e) => e.textContent), ASK, 'the conversation is named after its first message');
  await page.click('.msg.assistant .reasoning summary'); // open the folded reasoning for the screenshot
  await shot(page, 'chat');
});

test('chat: stop a long answer (the server request is aborted), then reload and find the conversation kept', async () => {
  await setField('set-extra', NO_EOS);
  await setField('set-max-tokens', '3000');
  await page.click('#toggle-settings');
  await send('What is 7 + 8?');
  await page.waitForFunction(() => {
    const m = document.querySelector('.msg.assistant.streaming');
    return m !== null && (m.querySelector('.reasoning-text')?.textContent ?? '').length + (m.querySelector('.answer')?.textContent ?? '').length > 40;
  }, { timeout: 30_000 });
  await page.click('#stop');
  assert.equal(await finished(2), 'stopped');
  const deadline = Date.now() + 10_000;
  while (engine.stats().running > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  assert.equal(engine.stats().running, 0, 'the engine request ended when the page stopped');
  await shot(page, 'chat-stopped');
  const before = { user: await texts(page, '.msg.user .text'), answers: await texts(page, '.msg.assistant .answer') };
  assert.equal(before.user.length, 2);
  await setField('set-extra', '');
  await setField('set-max-tokens', '');

  await page.reload();
  await page.waitForSelector('body.ready');
  assert.deepEqual(await texts(page, '.msg.user .text'), before.user, 'the messages are kept across a reload');
  assert.deepEqual(await texts(page, '.msg.assistant .answer'), before.answers);
  assert.match((await texts(page, '.msg.assistant .s-finish'))[1]!, /stopped/);
  assert.deepEqual(await texts(page, '#conversations .conv-title'), [ASK]);
  assert.equal(await page.$eval('#set-extra', (e) => (e as HTMLTextAreaElement).value), '', 'settings are kept too');
});

test('chat: regenerate replaces the last answer; edit-and-resend drops what followed', async () => {
  await page.click('.regenerate');
  await finished(2);
  assert.equal((await texts(page, '.msg.assistant')).length, 2, 'regenerate replaced the stopped answer');
  assert.match((await texts(page, '.msg.assistant .s-finish'))[1]!, /stop/);
  await page.click('.msg.user .edit');
  await page.$eval('.edit-box', (e) => ((e as HTMLTextAreaElement).value = 'What is 20 + 22?'));
  await page.click('.msg.user .save');
  await finished(1);
  assert.deepEqual(await texts(page, '.msg.user .text'), ['What is 20 + 22?']);
  assert.equal((await texts(page, '.msg.assistant')).length, 1);
});

test('chat: a forced tool call is shown as a card, answered by hand, and the model continues', async () => {
  await page.click('#new-chat');
  const tools = [{ name: 'add', description: 'Add two integers', parameters: {
    type: 'object', properties: { a: { type: 'integer' }, b: { type: 'integer' } }, required: ['a', 'b'] } }];
  await setField('set-tools', JSON.stringify(tools));
  await setField('set-tool-choice', 'add');
  const bodies: Record<string, unknown>[] = [];
  page.on('request', (r) => {
    if (r.url().endsWith('/v1/chat/completions')) bodies.push(JSON.parse(r.postData() ?? '{}') as Record<string, unknown>);
  });
  await send(ASK);
  assert.equal(await finished(1), 'tool_calls');
  assert.deepEqual(bodies[0]!['tool_choice'], { type: 'function', function: { name: 'add' } });
  assert.deepEqual(await texts(page, '.tool-call .card-head code'), ['add']);
  const args = JSON.parse((await texts(page, '.tool-call .args'))[0]!) as Record<string, unknown>;
  assert.ok(Number.isInteger(args['a']) && Number.isInteger(args['b']), `arguments follow the schema: ${JSON.stringify(args)}`);
  await setField('set-tool-choice', 'none');
  await page.type('.tool-input', '42');
  await shot(page, 'chat-tool-call');
  await page.click('.tool-send');
  await finished(2);
  assert.deepEqual(await texts(page, '.msg.tool-result pre'), ['42']);
  const sent = bodies[1]!['messages'] as { role: string; tool_call_id?: string; tool_calls?: { id: string }[] }[];
  const callId = sent.find((m) => m.role === 'assistant')?.tool_calls?.[0]?.id;
  assert.ok(callId);
  assert.deepEqual(sent.map((m) => m.role), ['user', 'assistant', 'tool']);
  assert.equal(sent[2]!.tool_call_id, callId, 'the typed result answers that call');
  await setField('set-tools', '');
  await setField('set-tool-choice', 'auto');
});

test('chat: a JSON-schema answer is parsed and validated', async () => {
  await page.click('#new-chat');
  // additionalProperties: false, as strict structured-output clients send it: without it the
  // grammar admits any extra keys, and a small model may write them until max_tokens cuts it
  const schema = { type: 'object', properties: { answer: { type: 'integer' } }, required: ['answer'], additionalProperties: false };
  await setField('set-schema', JSON.stringify(schema));
  await setField('set-max-tokens', '400');
  await send(ASK);
  await finished(1);
  const content = (await texts(page, '.msg.assistant .answer'))[0]!;
  const value = JSON.parse(content) as { answer: unknown };
  assert.ok(Number.isInteger(value.answer), content);
  assert.deepEqual(await texts(page, '.verdict'), ['✓ Valid JSON that follows the schema']);
  await shot(page, 'chat-structured');
  await setField('set-schema', '');
  await setField('set-max-tokens', '');
});

test('settings: a field that does not parse is named, and nothing is sent until it is fixed', async () => {
  const before = (await page.$$('.msg')).length;
  await setField('set-temperature', 'warm');
  assert.match((await page.$eval('#notice', (e) => e.textContent)) ?? '', /Temperature must be a number \(got "warm"\)/);
  await send('What is 1 + 2?');
  assert.equal((await page.$$('.msg')).length, before, 'the message was not added');
  assert.equal(await page.$eval('#input', (e) => (e as HTMLTextAreaElement).value), 'What is 1 + 2?', 'the draft is kept');
  await setField('set-temperature', '');
  assert.equal(await page.$eval('#notice', (e) => (e as HTMLElement).hidden), true);
  await page.$eval('#input', (e) => ((e as HTMLTextAreaElement).value = ''));
});

test('chat: model HTML in an imported conversation is shown as text, never run; export → import round trip', async () => {
  const evil = '<img src=x onerror="window.pwned=1"><script>window.pwned=2</script> [click](javascript:window.pwned=3) **bold** `<b>code</b>`';
  const file = join(ARTIFACTS, 'import.json');
  writeFileSync(file, JSON.stringify({ conversations: [{ title: 'Imported', messages: [
    { role: 'user', content: 'hi' }, { role: 'assistant', content: evil, reasoning: '<b>think</b>' },
    { role: 'user', content: 'json' },
    { role: 'assistant', content: '{"answer": "x"}', reasoning: '', schema: '{"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}' },
  ] }] }));
  const input = await page.$('#import-file');
  await (input as unknown as { uploadFile(p: string): Promise<void> }).uploadFile(file);
  await page.waitForFunction(() => [...document.querySelectorAll('.conv-title')].some((e) => e.textContent === 'Imported'));
  const convs = await page.$$('.conv-title');
  for (const c of convs) if ((await c.evaluate((e) => e.textContent)) === 'Imported') await c.click();
  await page.waitForSelector('.msg.assistant .answer strong');
  const answer = await page.$eval('.msg.assistant .answer', (e) => ({
    text: e.textContent ?? '', imgs: e.querySelectorAll('img').length, scripts: e.querySelectorAll('script').length,
    links: [...e.querySelectorAll('a')].map((a) => a.getAttribute('href')), bold: e.querySelector('strong')?.textContent,
    code: e.querySelector('code')?.textContent,
  }));
  assert.equal(answer.imgs, 0);
  assert.equal(answer.scripts, 0);
  assert.deepEqual(answer.links, [], 'a javascript: link is not made a link');
  assert.match(answer.text, /<img src=x onerror=/);
  assert.equal(answer.bold, 'bold');
  assert.equal(answer.code, '<b>code</b>');
  assert.equal(await page.$eval('.msg.assistant .reasoning-text', (e) => e.textContent), '<b>think</b>');
  assert.equal(await page.evaluate(() => (window as unknown as { pwned?: number }).pwned), undefined);
  assert.deepEqual(await texts(page, '.verdict'), ['✗ Does not follow the schema: $.answer: expected integer, got string'],
    'an answer that breaks its schema is named as such');

  const downloads = mkdtempSync(join(tmpdir(), 'deltaserve-dl-'));
  const cdp = await page.createCDPSession();
  await cdp.send('Browser.setDownloadBehavior', { behavior: 'allow', downloadPath: downloads });
  const count = (await page.$$('.conv')).length;
  await page.click('#export');
  // the file can appear before Chromium has finished writing it: wait until it parses
  const deadline = Date.now() + 10_000;
  let exported: string | undefined;
  let data: { format: string; conversations: unknown[] } | null = null;
  while (data === null && Date.now() < deadline) {
    exported = readdirSync(downloads).find((f) => f.endsWith('.json'));
    try {
      if (exported) data = JSON.parse(readFileSync(join(downloads, exported), 'utf8')) as { format: string; conversations: unknown[] };
    } catch { /* still being written */ }
    if (data === null) await new Promise((r) => setTimeout(r, 100));
  }
  assert.ok(exported && data, 'the export downloaded a complete JSON file');
  assert.equal(data.format, 'deltaserve-conversations');
  assert.equal(data.conversations.length, count);
  await (input as unknown as { uploadFile(p: string): Promise<void> }).uploadFile(join(downloads, exported));
  await page.waitForFunction((n) => document.querySelectorAll('.conv').length === n, {}, 2 * count);
  rmSync(downloads, { recursive: true, force: true });
});

test('conversations: rename and delete are kept across a reload', async () => {
  const titles = await texts(page, '#conversations .conv-title');
  await page.click('#conversations .conv.active .conv-rename');
  await page.$eval('.conv-input', (e) => ((e as HTMLInputElement).value = ''));
  await page.type('.conv-input', 'Renamed chat');
  await page.keyboard.press('Enter');
  await page.waitForFunction(() => document.querySelector('#title')?.textContent === 'Renamed chat');
  await page.waitForFunction(() => [...document.querySelectorAll('#conversations .conv-title')].some((e) => e.textContent === 'Renamed chat'));
  page.once('dialog', (d) => void d.accept());
  // click inside the page: the list re-renders, so an element handle can go stale
  await page.$$eval('#conversations .conv', (convs, i) => (convs[i]!.querySelector('.conv-delete') as HTMLElement).click(), titles.length - 1);
  await page.waitForFunction((n) => document.querySelectorAll('#conversations .conv').length === n, {}, titles.length - 1);
  const after = await texts(page, '#conversations .conv-title');
  await page.reload();
  await page.waitForSelector('body.ready');
  assert.deepEqual((await texts(page, '#conversations .conv-title')).sort(), [...after].sort());
  assert.ok(after.includes('Renamed chat'));
});

test('layout: Send and Stop sit inside the composer, which keeps its size; edit buttons show on hover', async () => {
  await openChat();
  await page.click('#new-chat');
  const box = (): Promise<{ w: number; h: number; inside: boolean }> => page.evaluate(() => {
    const c = document.querySelector('.composer-box')!.getBoundingClientRect();
    const visible = [...document.querySelectorAll<HTMLElement>('#send, #stop')].find((b) => b.offsetParent !== null)!.getBoundingClientRect();
    return { w: c.width, h: c.height, inside: visible.left >= c.left && visible.right <= c.right && visible.top >= c.top && visible.bottom <= c.bottom };
  });
  const idle = await box();
  assert.ok(idle.inside, 'Send is inside the composer box');
  await setField('set-extra', NO_EOS);
  await setField('set-max-tokens', '400');
  await page.click('#toggle-settings');
  await send('What is 2 + 2?');
  await page.waitForFunction(() => document.body.classList.contains('busy'));
  const busy = await box();
  assert.ok(busy.inside, 'Stop is inside the composer box');
  assert.deepEqual([busy.w, busy.h], [idle.w, idle.h], 'the composer keeps its size when Send becomes Stop');
  // the reply may end between the measurement and this click (400 tokens of a tiny model): Stop
  // itself is tested above, here it only ends the reply sooner, so click it while it is shown
  await page.evaluate(() => { if (document.body.classList.contains('busy')) document.querySelector<HTMLButtonElement>('#stop')?.click(); });
  await finished(1);
  await setField('set-extra', '');
  await setField('set-max-tokens', '');
  await page.click('#toggle-settings');
  await page.mouse.move(0, 0);
  const opacity = (): Promise<string> => page.$eval('.msg.user .hover-actions', (e) => getComputedStyle(e).opacity);
  await page.waitForFunction(() => getComputedStyle(document.querySelector('.msg.user .hover-actions')!).opacity === '0');
  assert.equal(await opacity(), '0', 'no edit button until hover or focus');
  await page.hover('.msg.user');
  await page.waitForFunction(() => getComputedStyle(document.querySelector('.msg.user .hover-actions')!).opacity === '1');
  await page.mouse.move(0, 0);
  await page.focus('.msg.user .edit');
  await page.waitForFunction(() => getComputedStyle(document.querySelector('.msg.user .hover-actions')!).opacity === '1');
});

test('markdown: code blocks are highlighted as text-only spans and have a copy button', async () => {
  const file = join(ARTIFACTS, 'import-code.json');
  const code = 'def add(a, b):\n    # the sum\n    return a + b  # <b>not html</b>\n';
  writeFileSync(file, JSON.stringify({ conversations: [{ title: 'Code', messages: [
    { role: 'user', content: 'Write add in Python' },
    { role: 'assistant', content: `Here:\n\n\`\`\`python\n${code}\`\`\`\n\nand a plain one:\n\n\`\`\`\nx = 1\n\`\`\``, reasoning: 'easy' },
  ] }] }));
  const input = await page.$('#import-file');
  await (input as unknown as { uploadFile(p: string): Promise<void> }).uploadFile(file);
  await page.waitForFunction(() => [...document.querySelectorAll('.conv-title')].some((e) => e.textContent === 'Code'));
  await page.$$eval('.conv-title', (els) => (els.find((e) => e.textContent === 'Code') as HTMLElement).click());
  await page.waitForSelector('.code code[data-lang="python"] .tok');
  const blocks = await page.$$eval('.code', (els) => els.map((e) => ({
    text: e.querySelector('code')!.textContent, kinds: [...e.querySelectorAll('.tok')].map((t) => t.className),
    elements: [...e.querySelectorAll('code *')].map((t) => t.tagName), copy: e.querySelector('button.copy') !== null,
  })));
  assert.equal(blocks.length, 2);
  assert.equal(blocks[0]!.text, code.replace(/\n$/, ''), 'highlighting keeps the code text exactly');
  for (const kind of ['tok-keyword', 'tok-comment', 'tok-function']) assert.ok(blocks[0]!.kinds.some((k) => k.includes(kind)), kind);
  assert.deepEqual([...new Set(blocks[0]!.elements)], ['SPAN'], 'tokens are spans only (the <b> in a comment stays text)');
  assert.deepEqual(blocks[1]!.elements, [], 'a block without a language stays plain text');
  assert.ok(blocks.every((b) => b.copy), 'every block has a copy button');
  await page.setViewport({ width: 1280, height: 800 });
  await page.screenshot({ path: join(ARTIFACTS, 'chat-1280.png') }); // docs/webui-chat.png
});

test('narrow screen (390 px): a toggle opens the sidebar with new chat, history, export and the dashboard', async () => {
  await page.setViewport({ width: 390, height: 844, isMobile: true, hasTouch: true });
  try {
    await openChat();
    const shown = (sel: string): Promise<boolean> => page.$eval(sel, (e) => (e as HTMLElement).offsetParent !== null || getComputedStyle(e).position === 'fixed' && getComputedStyle(e).display !== 'none');
    assert.equal(await shown('#sidebar'), false, 'the sidebar is folded away');
    assert.equal(await shown('#toggle-sidebar'), true, 'a toggle is in the header');
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert.ok(overflow <= 0, `nothing sticks out sideways (${overflow} px)`);
    await page.click('#toggle-sidebar');
    assert.equal(await shown('#sidebar'), true);
    for (const sel of ['#new-chat', '#export', '#conversations .conv-title', 'a.nav[href="/dashboard"]']) {
      const box = await page.$eval(sel, (e) => { const r = e.getBoundingClientRect(); return r.width > 0 && r.right <= window.innerWidth; });
      assert.ok(box, `${sel} is reachable`);
    }
    assert.equal(await page.$eval('#toggle-sidebar', (e) => e.getAttribute('aria-expanded')), 'true');
    await page.screenshot({ path: join(ARTIFACTS, 'chat-390-sidebar.png') });
    await page.mouse.click(375, 420); // on the scrim, beside the 280 px sidebar
    assert.equal(await shown('#sidebar'), false, 'a tap beside the sidebar folds it');
    await page.click('#toggle-sidebar');
    await page.click('#new-chat');
    assert.equal(await shown('#sidebar'), false, 'choosing a chat folds it');
    await page.$$eval('.conv-title', (els) => (els.find((e) => e.textContent === 'Code') as HTMLElement | undefined)?.click());
    await page.screenshot({ path: join(ARTIFACTS, 'chat-390.png') }); // docs/webui-chat-390.png
  } finally {
    await page.setViewport({ width: 1280, height: 800 });
  }
});

test('dashboard: the plots update after a few requests; model card shown', async () => {
  await page.goto(`${server.url}/dashboard`);
  await page.waitForSelector('.status.ok');
  assert.equal((await page.$$('#charts .chart canvas')).length, 6, 'six plots');
  const points0 = Number(await page.$eval('#chart-tps', (e) => e.getAttribute('data-points')));
  const start = Date.now();
  // a shared system prompt longer than a 64-token cache chunk: the 2nd and 3rd request hit the prefix cache
  const system = { role: 'system', content: 'You add numbers. '.repeat(40) };
  const ask = (i: number): Promise<unknown> => post(`${server.url}/v1/chat/completions`, {
    messages: [system, { role: 'user', content: `What is ${i} + ${10 * i}?` }], max_tokens: 200,
  });
  await ask(1);
  await Promise.all([ask(2), ask(3)]);
  // plotted samples taken after the requests began carry their TTFT, MTP and cache numbers
  await page.waitForFunction((t0) => ['tps', 'ttft', 'mtp', 'cache'].every((id) => {
    const el = document.getElementById(`chart-${id}`);
    return el !== null && Number(el.getAttribute('data-last-t')) >= t0 && Number(el.getAttribute('data-last')) > 0;
  }), { timeout: 20_000 }, start);
  const points1 = Number(await page.$eval('#chart-tps', (e) => e.getAttribute('data-points')));
  assert.ok(points1 > points0, `more samples plotted (${points0} → ${points1})`);
  const card = await texts(page, '#model-card th');
  for (const row of ['Architecture', 'Quantization (weights)', 'Memory plan', 'Kernels']) assert.ok(card.includes(row), row);
  assert.match((await texts(page, '#model-card td')).join('\n'), /6 Gated DeltaNet \+ 2 gated attention/);
  await new Promise((r) => setTimeout(r, 1500));
  await page.mouse.move(0, 0);
  // legends show the latest value without hovering, and every axis has a title
  const legends = await page.$$eval('#charts .u-legend .u-series:not(:first-child) .u-value', (els) => els.map((e) => e.textContent ?? ''));
  assert.ok(legends.length >= 6 && legends.some((v) => /\d/.test(v)), `legend values: ${JSON.stringify(legends)}`);
  assert.ok(legends.filter((v) => v === '--').length < legends.length, 'the legends are not all "--" off hover');
  const tpsLegend = await page.$eval('#chart-tps .u-legend .u-series:nth-child(2) .u-value', (e) => e.textContent ?? '');
  assert.notEqual(tpsLegend, '--', 'the tokens/s legend shows its latest value');
  const axisTitles = (await page.$$eval('#charts .chart', (els) => els.map((e) => e.getAttribute('data-axes') ?? ''))).join('|').split('|');
  assert.ok(axisTitles.includes('time') && axisTitles.includes('tokens / s') && axisTitles.includes('ms'), `axis titles: ${axisTitles}`);
  assert.doesNotMatch((await texts(page, '#model-card td')).join('\n'), /iB\b/, 'one kind of unit: decimal bytes, as the server writes them');
  await page.screenshot({ path: join(ARTIFACTS, 'dashboard.png'), fullPage: true });
  await page.screenshot({ path: join(ARTIFACTS, 'dashboard-1280.png') }); // docs/webui-dashboard.png
});

test('api key: the page asks for it, keeps it in sessionStorage, and then works', async () => {
  const p = await browser.newPage();
  // the first, key-less request is expected to be refused
  watch(p, (m) => /401/.test(m.text()) && (m.location().url ?? '').startsWith(keyed.url));
  try {
    await p.goto(`${keyed.url}/`);
    await p.waitForSelector('#key-dialog[open]');
    await p.type('#key-input', KEY);
    await p.click('#key-dialog button[type=submit]');
    await p.waitForFunction(() => document.getElementById('model-name')?.textContent === 'tiny-think');
    assert.equal(await p.evaluate(() => sessionStorage.getItem('deltaserve.apiKey')), KEY);
    await p.type('#input', ASK);
    await p.keyboard.press('Enter');
    await p.waitForSelector('.msg.assistant .s-finish', { timeout: 60_000 });
    assert.match((await p.$eval('.msg.assistant .s-finish', (e) => e.textContent)) ?? '', /stop/);
  } finally {
    await p.close();
  }
});

test('api key: a chat request refused with 401 asks for the key and is sent again', async () => {
  const p = await browser.newPage();
  watch(p, (m) => /401/.test(m.text()) && (m.location().url ?? '').startsWith(keyedOpenMetrics.url));
  try {
    await p.goto(`${keyedOpenMetrics.url}/`);
    await p.waitForFunction(() => document.getElementById('model-name')?.textContent === 'tiny-think');
    assert.equal(await p.$('#key-dialog[open]'), null, 'no key asked for while nothing needed one');
    await p.type('#input', ASK);
    await p.keyboard.press('Enter');
    await p.waitForSelector('#key-dialog[open]');
    await p.type('#key-input', KEY);
    await p.click('#key-dialog button[type=submit]');
    await p.waitForSelector('.msg.assistant .s-finish', { timeout: 60_000 });
    assert.match((await p.$eval('.msg.assistant .s-finish', (e) => e.textContent)) ?? '', /stop/);
    assert.equal((await p.$$('.msg.assistant .error:not([hidden])')).length, 0);
  } finally {
    await p.close();
  }
});
