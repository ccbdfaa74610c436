/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
// Images through the chat page in a real browser (Debian's headless Chromium driven by
// puppeteer-core, as webui-browser.test.ts does) against a live server on the tiny-vision
// fixture: a real PNG attached through the file input (CDP DOM.setFileInputFiles), and
// images pasted (a ClipboardEvent carrying a File) and dropped (a DragEvent) on the
// composer. The request the page sent carries the image as an image_url data: URL; the
// prompt counted the image's tokens; the answer the page kept equals the greedy answer of
// the same request sent over HTTP directly; the thumbnail is in the history and survives a
// reload; editing the text keeps the images; an imported conversation shows its images (and
// one that is not a data: image URL is refused by name). A corrupt image comes back as the
// server's 400 shown under the message box, with the message returned to the composer; one
// image too many is refused by the page itself (the model card's max_images). Over
// --max-images across turns, the oldest image goes as a note and the page says so; over
// the context with an earlier image, the page answers again without it. A text-only model
// offers no attach button. Screenshots go to test-artifacts/webui/.
import { test, before, after, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import puppeteer, { type Browser, type ElementHandle, type Page } from 'puppeteer-core';
import { Engine } from '../src/engine/engine.js';
import { startServer, type RunningServer } from '../src/server/index.js';
import { DEFAULT_SERVER_IMAGES } from '../src/server/api/images.js';
import { WEBUI_DIR } from '../src/server/http/webui.js';
import { REPO_ROOT, TINY_THINK } from './paths.js';
import { KERNELS, post } from './server-helpers.js';
import { TINY_VISION } from './vision-helpers.js';
import { encodePng } from './vision-encode.js';
import { Rng } from '../src/util/rng.js';

const CHROMIUM = '/usr/bin/chromium';
const ARTIFACTS = join(REPO_ROOT, 'test-artifacts', 'webui');
const MAX_IMAGES = 2;

let vision: Engine;
let textOnly: Engine;
let server: RunningServer;
let textServer: RunningServer;
let browser: Browser;
let page: Page;
let tmp: string;
const consoleErrors: string[] = [];
/** Bodies of the chat requests the page sent, in order. */
const sent: Record<string, unknown>[] = [];
const pngs: { path: string; bytes: Uint8Array }[] = [];

async function patternPng(w: number, h: number, seed: number): Promise<Uint8Array> {
  const rng = new Rng(seed);
  return encodePng(Uint8Array.from({ length: w * h * 4 }, (_, i) => (i % 4 === 3 ? 255 : rng.nextU32() & 255)), w, h);
}

before(async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: run \`npm run test:setup\` (or apt-get install -y chromium)`);
  if (!existsSync(join(WEBUI_DIR, 'index.html'))) throw new Error(`the web UI is not built (${WEBUI_DIR} is missing): run \`npm run build\``);
  if (!existsSync(join(TINY_VISION, 'config.json'))) throw new Error(`the tiny-vision fixture is missing at ${TINY_VISION}`);
  mkdirSync(ARTIFACTS, { recursive: true });
  tmp = mkdtempSync(join(tmpdir(), 'deltaserve-webui-vision-'));
  for (const [i, [w, h]] of [[40, 30], [24, 48], [32, 32]].entries()) {
    const bytes = await patternPng(w!, h!, i + 1);
    const path = join(tmp, `pattern-${i}.png`);
    writeFileSync(path, bytes);
    pngs.push({ path, bytes });
  }
  vision = await Engine.load({ model: TINY_VISION, kernels: KERNELS, maxRunning: 4, specAdaptive: false });
  server = await startServer(vision, { port: 0, images: { ...DEFAULT_SERVER_IMAGES, maxImages: MAX_IMAGES } });
  textOnly = await Engine.load({ model: TINY_THINK(), kernels: KERNELS, maxRunning: 2 });
  textServer = await startServer(textOnly, { port: 0 });
  browser = await puppeteer.launch({
    executablePath: CHROMIUM, headless: true, userDataDir: join(tmp, 'profile'),
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
  });
  page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 800 });
  // a 400 is logged by Chromium as a failed resource load: that one is expected here
  page.on('console', (m) => {
    if (m.type() === 'error' && !/status of 400/.test(m.text())) consoleErrors.push(`${m.text()} at ${m.location().url ?? '?'}`);
  });
  page.on('pageerror', (e) => consoleErrors.push(`uncaught: ${(e as Error).message}`));
  page.on('request', (r) => {
    if (r.url().endsWith('/v1/chat/completions') && r.method() === 'POST') sent.push(JSON.parse(r.postData() ?? '{}') as Record<string, unknown>);
  });
});

after(async () => {
  await browser?.close();
  await server?.close();
  await textServer?.close();
  await vision?.close();
  await textOnly?.close();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

afterEach(() => {
  assert.deepEqual(consoleErrors.splice(0), [], 'no console errors on the page');
});

const shot = (name: string): Promise<unknown> => page.screenshot({ path: join(ARTIFACTS, `${name}.png`) });
const dataUrl = (bytes: Uint8Array): string => `data:image/png;base64,${Buffer.from(bytes).toString('base64')}`;

/** A fresh chat on `url` with short greedy answers (max tokens 12 in the settings). */
async function openChat(url: string): Promise<void> {
  await page.goto(`${url}/`);
  await page.evaluate(() => localStorage.setItem('deltaserve.settings', JSON.stringify({ maxTokens: '12' })));
  await page.reload();
  await page.waitForSelector('body.ready');
  await page.waitForFunction(() => document.getElementById('model-name')!.textContent !== '');
  await page.click('#new-chat');
}

async function send(text: string): Promise<void> {
  await page.type('#input', text);
  await page.keyboard.press('Enter');
}

/** Wait until `n` assistant messages are finished and nothing runs. A request just started
 * may not have marked the page busy yet: wait up to 3 s for that first (the state before it
 * would be the previous answer's). */
async function answered(n: number): Promise<void> {
  await page.waitForFunction(() => document.body.classList.contains('busy'), { timeout: 3000 }).catch(() => undefined);
  await page.waitForFunction((k) => document.querySelectorAll('.msg.assistant:not(.streaming)').length >= k
    && !document.body.classList.contains('busy'), { timeout: 120_000 }, n);
}

/** Hand `files` (name, type, base64) to the page as a paste into the message box or a drop on the composer. */
async function pasteOrDrop(how: 'paste' | 'drop', files: { name: string; type: string; b64: string }[]): Promise<void> {
  await page.evaluate((kind, list) => {
    const dt = new DataTransfer();
    for (const f of list) dt.items.add(new File([Uint8Array.from(atob(f.b64), (c) => c.charCodeAt(0))], f.name, { type: f.type }));
    if (kind === 'paste') document.getElementById('input')!.dispatchEvent(new ClipboardEvent('paste', { clipboardData: dt, bubbles: true, cancelable: true }));
    else {
      const target = document.querySelector('.composer-box')!;
      target.dispatchEvent(new DragEvent('dragover', { dataTransfer: dt, bubbles: true, cancelable: true }));
      target.dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
    }
  }, how, files);
}

const pending = (): Promise<string[]> => page.$$eval('#attachments img', (els) => els.map((e) => (e as HTMLImageElement).src));
const composerError = (): Promise<string | null> => page.$eval('#composer-error', (e) => ((e as HTMLElement).hidden ? null : e.textContent));

/** The open conversation's messages as the page stored them (IndexedDB). */
async function storedMessages(): Promise<Record<string, unknown>[]> {
  return page.evaluate(async () => {
    const db = await new Promise<IDBDatabase>((ok, no) => {
      const r = indexedDB.open('deltaserve');
      r.onsuccess = () => ok(r.result);
      r.onerror = () => no(r.error);
    });
    const all = await new Promise<{ updated: number; messages: Record<string, unknown>[] }[]>((ok, no) => {
      const r = db.transaction('conversations').objectStore('conversations').getAll();
      r.onsuccess = () => ok(r.result as { updated: number; messages: Record<string, unknown>[] }[]);
      r.onerror = () => no(r.error);
    });
    db.close();
    return all.sort((a, b) => b.updated - a.updated)[0]!.messages;
  });
}

/** The page's last request sent again over HTTP without streaming: its message, and its prompt tokens. */
async function direct(body: Record<string, unknown>): Promise<{ content: string; reasoning: string; promptTokens: number }> {
  const { stream: _s, stream_options: _o, ...rest } = body;
  const r = await post(`${server.url}/v1/chat/completions`, rest);
  assert.equal(r.status, 200, JSON.stringify(r.json));
  const msg = (r.json['choices'] as { message: { content: string | null; reasoning_content?: string | null } }[])[0]!.message;
  return { content: msg.content ?? '', reasoning: msg.reasoning_content ?? '', promptTokens: (r.json['usage'] as { prompt_tokens: number }).prompt_tokens };
}

const userParts = (body: Record<string, unknown>): Record<string, unknown>[] => {
  const msgs = body['messages'] as { role: string; content: unknown }[];
  return msgs[msgs.length - 1]!.content as Record<string, unknown>[];
};

test('a PNG attached through the file input is sent as an image_url; the answer equals the direct greedy answer; the thumbnail stays', async () => {
  await openChat(server.url);
  assert.equal(await page.$eval('#attach', (b) => (b as HTMLButtonElement).hidden), false, 'a vision model offers the attach button');
  const input = (await page.$('#attach-file')) as ElementHandle<HTMLInputElement>;
  await input.uploadFile(pngs[0]!.path);
  await page.waitForFunction(() => document.querySelectorAll('#attachments img').length === 1);
  assert.deepEqual(await pending(), [dataUrl(pngs[0]!.bytes)], 'the preview shows the file as read');
  await shot('vision-attached');
  const before = sent.length;
  await send('What is in this picture?');
  await answered(1);
  assert.deepEqual(await pending(), [], 'the previews clear once sent');
  const body = sent[before]!;
  assert.deepEqual(userParts(body), [
    { type: 'image_url', image_url: { url: dataUrl(pngs[0]!.bytes) } }, { type: 'text', text: 'What is in this picture?' },
  ], 'the image went as an image_url data: URL, before the text');
  const stored = await storedMessages();
  const answer = stored[1] as { content: string; reasoning: string; stats: { prompt_tokens: number } };
  const again = await direct(body);
  assert.deepEqual([answer.reasoning, answer.content], [again.reasoning, again.content], 'the page kept the direct greedy answer');
  assert.equal(answer.stats.prompt_tokens, again.promptTokens);
  const textOnlyBody = { ...body, messages: [{ role: 'user', content: 'What is in this picture?' }] };
  const withoutImage = await direct(textOnlyBody);
  // a 40×30 image is resized up to the processor's 65536-pixel minimum: 256 patches → 64 tokens
  assert.ok(answer.stats.prompt_tokens >= withoutImage.promptTokens + 64, `the prompt counted the image's tokens (${answer.stats.prompt_tokens} vs ${withoutImage.promptTokens} without)`);
  const thumbs = (): Promise<string[]> => page.$$eval('.msg.user .thumbs img', (els) => els.map((e) => `${(e as HTMLImageElement).alt}|${(e as HTMLImageElement).src}`));
  assert.deepEqual(await thumbs(), [`pattern-0.png|${dataUrl(pngs[0]!.bytes)}`], 'the thumbnail is in the history');
  assert.ok(await page.$eval('.msg.user .thumbs img', (e) => (e as HTMLImageElement).complete && (e as HTMLImageElement).naturalWidth === 40), 'the thumbnail decoded');
  await shot('vision-answered');
  await page.reload();
  await page.waitForSelector('body.ready');
  assert.deepEqual(await thumbs(), [`pattern-0.png|${dataUrl(pngs[0]!.bytes)}`], 'the thumbnail is still there after a reload');
});

test('images pasted and dropped on the composer are sent in order; the answer equals the direct one', async () => {
  await openChat(server.url);
  const file = (i: number) => ({ name: `pattern-${i}.png`, type: 'image/png', b64: Buffer.from(pngs[i]!.bytes).toString('base64') });
  await pasteOrDrop('paste', [file(1)]);
  await page.waitForFunction(() => document.querySelectorAll('#attachments img').length === 1);
  await pasteOrDrop('drop', [file(2), { name: 'notes.txt', type: 'text/plain', b64: Buffer.from('hello').toString('base64') }]);
  await page.waitForFunction(() => document.querySelectorAll('#attachments img').length === 2);
  assert.match((await composerError()) ?? '', /Not an image: notes\.txt \(text\/plain\)/, 'a dropped non-image file is named');
  assert.deepEqual(await pending(), [dataUrl(pngs[1]!.bytes), dataUrl(pngs[2]!.bytes)]);
  const before = sent.length;
  await page.click('#send'); // images alone, no text
  await answered(1);
  assert.equal(await composerError(), null, 'sending clears the message');
  const body = sent[before]!;
  assert.deepEqual(userParts(body).map((p) => (p['image_url'] as { url: string }).url), [dataUrl(pngs[1]!.bytes), dataUrl(pngs[2]!.bytes)]);
  const stored = await storedMessages();
  const answer = stored[1] as { content: string; reasoning: string };
  const again = await direct(body);
  assert.deepEqual([answer.reasoning, answer.content], [again.reasoning, again.content]);
  assert.equal(await page.$eval('#title', (e) => e.textContent), 'Image', 'an image-only chat is titled "Image"');
  assert.equal((await page.$$('.msg.user .thumbs img')).length, 2);
  // editing the message's text keeps its images
  await page.hover('.msg.user');
  await page.click('.msg.user button.edit');
  await page.type('.edit-box', 'and these?');
  const beforeEdit = sent.length;
  await page.click('.msg.user button.save');
  await answered(1);
  assert.equal(sent.length, beforeEdit + 1, 'the edit sent one request');
  const edited = userParts(sent[beforeEdit]!);
  assert.deepEqual(edited.map((p) => p['type']), ['image_url', 'image_url', 'text']);
  assert.deepEqual(edited[2], { type: 'text', text: 'and these?' });
  assert.equal((await page.$$('.msg.user .thumbs img')).length, 2, 'the thumbnails stay after the edit');
});

test('import: images of a user message are shown; an image that is not a data: image URL is refused by name', async () => {
  await openChat(server.url);
  const file = join(tmp, 'import.json');
  const user = { role: 'user', content: 'look', images: [{ url: dataUrl(pngs[1]!.bytes), name: 'kept.png' }] };
  writeFileSync(file, JSON.stringify({ conversations: [{ title: 'With image', messages: [user, { role: 'assistant', content: 'ok', reasoning: '' }] }] }));
  const input = (await page.$('#import-file')) as ElementHandle<HTMLInputElement>;
  await input.uploadFile(file);
  await page.waitForFunction(() => [...document.querySelectorAll('.conv-title')].some((e) => e.textContent === 'With image'));
  for (const c of await page.$$('.conv-title')) if ((await c.evaluate((e) => e.textContent)) === 'With image') await c.click();
  await page.waitForSelector('.msg.user .thumbs img');
  assert.equal(await page.$eval('.msg.user .thumbs img', (e) => `${(e as HTMLImageElement).alt}|${(e as HTMLImageElement).src}`), `kept.png|${dataUrl(pngs[1]!.bytes)}`);
  writeFileSync(file, JSON.stringify({ conversations: [{ messages: [{ role: 'user', content: 'x', images: [{ url: 'http://example.invalid/x.png' }] }] }] }));
  await input.uploadFile(file);
  await page.waitForFunction(() => /Import failed/.test(document.getElementById('notice')!.textContent ?? ''));
  assert.match(await page.$eval('#notice', (e) => e.textContent ?? ''), /conversations\[0\]\.messages\[0\]\.images\[0\] must be \{url: "data:image/);
});

test('the server\'s 400 (corrupt image) and the page\'s own --max-images check show under the box; the message returns to the composer', async () => {
  await openChat(server.url);
  const cut = join(tmp, 'truncated.png');
  writeFileSync(cut, pngs[0]!.bytes.subarray(0, Math.floor(pngs[0]!.bytes.length / 2)));
  const input = (await page.$('#attach-file')) as ElementHandle<HTMLInputElement>;
  await input.uploadFile(cut);
  await page.waitForFunction(() => document.querySelectorAll('#attachments img').length === 1);
  const chats = (await page.$$('#conversations .conv')).length;
  await send('describe');
  await page.waitForFunction(() => !(document.getElementById('composer-error') as HTMLElement).hidden, { timeout: 60_000 });
  assert.match((await composerError()) ?? '', /^Not sent: messages\[0\]\.content\[0\]: .*(truncated|corrupt)/);
  assert.equal(await page.$eval('#composer-error', (e) => e.getAttribute('role')), 'alert');
  assert.equal((await page.$$('.msg')).length, 0, 'no message stays in the history');
  assert.equal((await page.$$('#conversations .conv')).length, chats, 'no empty conversation is left in the list');
  assert.equal(await page.$eval('#input', (e) => (e as HTMLTextAreaElement).value), 'describe', 'the text is back in the box');
  assert.equal((await pending()).length, 1, 'the image is back in the previews');
  await shot('vision-refused');
  // remove it from the keyboard, then send one image too many
  await page.focus('#attachments button.remove');
  assert.match(await page.$eval('#attachments button.remove', (b) => b.getAttribute('aria-label') ?? ''), /^Remove truncated\.png$/);
  await page.keyboard.press('Enter');
  await page.waitForFunction(() => document.querySelectorAll('#attachments img').length === 0);
  await input.uploadFile(...pngs.map((p) => p.path));
  await page.waitForFunction((n) => document.querySelectorAll('#attachments img').length === n, {}, pngs.length);
  await page.focus('#input');
  await page.keyboard.press('Enter');
  await page.waitForFunction(() => /at most/.test(document.getElementById('composer-error')!.textContent ?? ''), { timeout: 60_000 });
  assert.equal(await composerError(), `This server takes at most ${MAX_IMAGES} images per request (serve --max-images): remove 1.`);
  assert.equal((await page.$$('.msg')).length, 0, 'nothing was sent');
  // drop the last one: the rest is answered
  const removes = await page.$$('#attachments button.remove');
  await removes[removes.length - 1]!.click();
  await page.focus('#input');
  await page.keyboard.press('Enter');
  await answered(1);
  assert.equal((await page.$$('.msg.user .thumbs img')).length, MAX_IMAGES);
  // one image more in the next turn: the oldest is left out of the request, a note in its place
  const before = sent.length;
  await input.uploadFile(pngs[2]!.path);
  await page.waitForFunction(() => document.querySelectorAll('#attachments img').length === 1);
  await send('and this one?');
  await answered(2);
  assert.equal(sent.length, before + 1);
  const msgs = sent[before]!['messages'] as { content: unknown }[];
  assert.deepEqual(msgs[0]!.content, [{ type: 'text', text: '[earlier image not shown: pattern-0.png]\n' },
    { type: 'image_url', image_url: { url: dataUrl(pngs[1]!.bytes) } }, { type: 'text', text: 'describe' }]);
  assert.deepEqual(msgs[2]!.content, [{ type: 'image_url', image_url: { url: dataUrl(pngs[2]!.bytes) } }, { type: 'text', text: 'and this one?' }]);
  assert.deepEqual(await page.$$eval('.msg.assistant .error', (els) => els.map((e) => (e as HTMLElement).hidden)), [true, true], 'answered, no error');
  assert.deepEqual(await page.$$eval('.msg.user .thumbs img.unsent', (els) => els.map((e) => (e as HTMLImageElement).alt)), ['pattern-0.png']);
  assert.match(await page.$eval('.history-note', (e) => e.textContent ?? ''),
    new RegExp(`^1 older image is no longer sent to the model: this server takes at most ${MAX_IMAGES} images per request \\(serve --max-images\\)`));
  assert.equal((await storedMessages()).flatMap((m) => (m['images'] as unknown[] | undefined) ?? []).length, 3, 'the stored chat keeps every image');
  await shot('vision-older-image-left-out');
});

test('over the context with earlier images: the page answers again without them and says so', { timeout: 240_000 }, async () => {
  // turn 2 of a chat with one image per turn, as the page sends it, with and without turn 1's image
  const q1 = 'first picture';
  const q2 = 'second picture';
  const turn1 = { max_tokens: 12, messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: dataUrl(pngs[0]!.bytes) } }, { type: 'text', text: q1 }] }] };
  const a1 = await direct(turn1);
  const turn2 = (first: Record<string, unknown>): Record<string, unknown> => ({ ...turn1, messages: [
    { role: 'user', content: [first, { type: 'text', text: q1 }] }, { role: 'assistant', content: a1.content },
    { role: 'user', content: [{ type: 'image_url', image_url: { url: dataUrl(pngs[1]!.bytes) } }, { type: 'text', text: q2 }] }] });
  const withBoth = (await direct(turn2({ type: 'image_url', image_url: { url: dataUrl(pngs[0]!.bytes) } }))).promptTokens;
  const withNote = (await direct(turn2({ type: 'text', text: '[earlier image not shown: pattern-0.png]\n' }))).promptTokens;
  assert.ok(withBoth - withNote > 32, `an image is more tokens than its note (${withBoth} vs ${withNote})`);
  // a server whose context holds turn 2 with the note but not with both images
  const small = await Engine.load({ model: TINY_VISION, kernels: KERNELS, maxRunning: 2, specAdaptive: false, maxContext: Math.floor((withBoth + withNote) / 2) });
  const smallServer = await startServer(small, { port: 0 });
  try {
    await openChat(smallServer.url);
    const input = (await page.$('#attach-file')) as ElementHandle<HTMLInputElement>;
    for (const [i, q] of [q1, q2].entries()) {
      await input.uploadFile(pngs[i]!.path);
      await page.waitForFunction(() => document.querySelectorAll('#attachments img').length === 1);
      await send(q);
      await answered(i + 1);
    }
    const [refused, retried] = sent.slice(-2).map((b) => (b['messages'] as { content: unknown }[])[0]!.content);
    assert.deepEqual(refused, turn1.messages[0]!.content, 'refused with turn 1\'s image');
    assert.equal(retried, `[earlier image not shown: pattern-0.png]\n${q1}`, 'answered with its note');
    const stored = await storedMessages();
    assert.equal(stored.length, 4);
    assert.equal((stored[3] as { error?: string }).error, undefined, 'turn 2 was answered');
    assert.equal((stored[3] as { stats: { prompt_tokens: number } }).stats.prompt_tokens, withNote);
    assert.match(await page.$eval('.history-note', (e) => e.textContent ?? ''), /^1 older image is no longer sent to the model: with them the conversation was longer than the model's context/);
    await shot('vision-over-context');
  } finally {
    await smallServer.close();
    await small.close();
  }
});

test('the dashboard\'s model card names the image limits', async () => {
  await page.goto(`${server.url}/dashboard`);
  await page.waitForFunction(() => [...document.querySelectorAll('#model-card th')].some((e) => e.textContent === 'Images'));
  const row = await page.$$eval('#model-card tr', (trs) => trs.map((tr) => tr.textContent ?? '').find((t) => t.startsWith('Images')));
  assert.match(row ?? '', new RegExp(`vision tower: up to ${MAX_IMAGES} per request, ${DEFAULT_SERVER_IMAGES.maxImagePixels.toLocaleString('en-US')} pixels each`));
});

test('a text-only model: no attach button; a pasted image is refused with the reason', async () => {
  await openChat(textServer.url);
  assert.equal(await page.$eval('#attach', (b) => (b as HTMLButtonElement).hidden && (b as HTMLButtonElement).disabled), true);
  await pasteOrDrop('paste', [{ name: 'x.png', type: 'image/png', b64: Buffer.from(pngs[0]!.bytes).toString('base64') }]);
  await page.waitForFunction(() => !(document.getElementById('composer-error') as HTMLElement).hidden);
  assert.match((await composerError()) ?? '', /text-only/);
  assert.deepEqual(await pending(), []);
});
