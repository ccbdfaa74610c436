// The chat page's history-to-request builder (webui/src/chat/history.ts, pure, run here in
// node): a long chat with images sends at most the server's --max-images, the newest ones,
// with a short note where each older one was; the cut moves in batches so earlier turns stay
// byte-identical from turn to turn (the server's prefix cache); the images of the message
// just written are always sent; the view marks exactly the images the request leaves out.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { apiMessages, batchOf, earlierImagesCut, imageNote, imagePlan, imageView, type ImageLimit, planNote,
  sendsEarlierImages, sentCount } from '../webui/src/chat/history.js';
import type { ImageAttachment, Message } from '../webui/src/chat/types.js';

const image = (n: number): ImageAttachment => ({ url: `data:image/png;base64,SU1H${n}`, name: `shot-${n}.png` });

/** A chat of `turns` turns; turn t's user message carries `perTurn(t)` new images, then an answer. */
function chat(turns: number, perTurn: (t: number) => number = () => 1, answerLast = false): Message[] {
  const out: Message[] = [];
  let n = 0;
  for (let t = 0; t < turns; t++) {
    const images = Array.from({ length: perTurn(t) }, () => image(n++));
    out.push({ role: 'user', content: `question ${t}`, ...(images.length > 0 ? { images } : {}) });
    if (t < turns - 1 || answerLast) out.push({ role: 'assistant', content: `answer ${t}`, reasoning: '' });
  }
  return out;
}

type Part = { type: string; text?: string; image_url?: { url: string } };
const partsOf = (m: Record<string, unknown>): Part[] => (Array.isArray(m['content']) ? (m['content'] as Part[]) : [{ type: 'text', text: String(m['content']) }]);
const sentUrls = (req: Record<string, unknown>[]): string[] => req.flatMap(partsOf).flatMap((p) => (p.type === 'image_url' ? [p.image_url!.url] : []));
const allImages = (msgs: readonly Message[]): ImageAttachment[] => msgs.flatMap((m) => (m.role === 'user' ? m.images ?? [] : []));
/** The request's text as the server joins it (parts are concatenated). */
const textOf = (m: Record<string, unknown>): string => partsOf(m).map((p) => (p.type === 'text' ? p.text : '<image>')).join('');

test('at most --max-images are sent, the newest ones, in conversation order; the older ones become notes in place', () => {
  for (const limit of [1, 2, 3, 5, 16]) {
    const b = batchOf(limit);
    for (let turns = 1; turns <= 40; turns++) {
      const msgs = chat(turns);
      const plan = imagePlan(msgs, limit);
      const req = apiMessages('', msgs, plan);
      const urls = sentUrls(req);
      const images = allImages(msgs);
      assert.equal(urls.length, sentCount(plan));
      assert.ok(urls.length <= limit, `limit ${limit}, ${turns} images: ${urls.length} sent`);
      if (turns >= limit) assert.ok(urls.length >= limit - b + 1, `limit ${limit}, ${turns} images: only ${urls.length} sent`);
      else assert.equal(urls.length, turns, 'under the limit every image is sent');
      assert.deepEqual(urls, images.slice(images.length - urls.length).map((im) => im.url), 'the newest images, in order');
      // every older image is a note naming it, in its own message, before that message's text
      for (const [i, im] of images.slice(0, plan.cut).entries()) {
        assert.equal(textOf(req[2 * i]!), `${imageNote(im)}question ${i}`);
      }
    }
  }
});

test('the cut moves in batches of ceil(limit / 2): between moves each request starts with the previous one, byte for byte', () => {
  const limit = 16;
  const turns = 60;
  let previous: Record<string, unknown>[] = [];
  let moves = 0;
  for (let t = 1; t <= turns; t++) {
    const req = apiMessages('be brief', chat(t), imagePlan(chat(t), limit));
    const kept = JSON.stringify(req.slice(0, previous.length)) === JSON.stringify(previous);
    if (!kept) moves++;
    previous = req;
  }
  // 60 images over a limit of 16: a one-image rule would change the prefix 44 times
  assert.equal(moves, Math.ceil((turns - limit) / batchOf(limit)));
  assert.equal(moves, 6);
});

test('the images of the message just written are always sent (over the limit the server refuses, naming --max-images)', () => {
  const msgs = chat(4, (t) => (t === 3 ? 3 : 1));
  const plan = imagePlan(msgs, 2);
  assert.equal(plan.current, 3);
  assert.equal(plan.cut, 3, 'every earlier image is left out');
  assert.deepEqual(sentUrls(apiMessages('', msgs, plan)), allImages(msgs).slice(3).map((im) => im.url));
  // a turn with more images than the earlier ones can spare: the cut stops at the current message
  const big = chat(3, (t) => (t === 2 ? 16 : 3));
  const p = imagePlan(big, 16);
  assert.equal(p.cut, 6);
  assert.equal(sentCount(p), 16);
});

test('limit unknown sends every image; a text-only model (limit 0) gets notes for every earlier image', () => {
  const msgs = chat(30);
  assert.equal(sentUrls(apiMessages('', msgs, imagePlan(msgs, null))).length, 30);
  assert.deepEqual(apiMessages('', msgs, imagePlan(msgs, null)), apiMessages('', msgs), 'no limit known = no plan');
  const zero = imagePlan(msgs, 0);
  assert.equal(zero.cut, 29);
  assert.match(planNote(zero), /^29 older images are not sent: this model is text-only/);
});

test('a cut kept on the conversation (the prompt was over the context) holds, within the conversation', () => {
  const msgs = chat(6, () => 2);
  const plan = imagePlan(msgs, 16);
  assert.equal(plan.cut, 0);
  assert.ok(sendsEarlierImages(plan));
  const floor = earlierImagesCut(plan);
  assert.equal(floor, 10);
  const after = imagePlan(msgs, 16, floor);
  assert.equal(after.cut, 10);
  assert.ok(!sendsEarlierImages(after), 'a second overflow is not retried');
  assert.match(planNote(after), /^10 older images are no longer sent to the model: with them the conversation was longer than the model's context/);
  // the next turn keeps the cut: the request starts with the one before it
  const next = [...msgs, { role: 'assistant', content: 'a', reasoning: '' } as Message, { role: 'user', content: 'q', images: [image(99)] } as Message];
  const nextReq = apiMessages('', next, imagePlan(next, 16, floor));
  assert.deepEqual(nextReq.slice(0, 11), apiMessages('', msgs, after));
  assert.equal(sentUrls(nextReq).length, 3);
  // a floor past the conversation's images never hides the current message's
  assert.equal(imagePlan(chat(2), 16, 50).cut, 1);
});

test('the view marks exactly the images the request leaves out, and places its note after the last of them', () => {
  const msgs = chat(9, (t) => (t % 3 === 0 ? 0 : 2));
  const limit: ImageLimit = 4;
  const plan = imagePlan(msgs, limit);
  const view = imageView(msgs, plan);
  const req = apiMessages('', msgs, plan);
  msgs.forEach((m, i) => {
    if (m.role !== 'user') return;
    const parts = partsOf(req[i]!);
    (m.images ?? []).forEach((im, k) => {
      const asImage = parts.some((p) => p.image_url?.url === im.url);
      assert.equal(view.sent(i, k), asImage, `message ${i} image ${k}`);
    });
  });
  const withUnsent = msgs.flatMap((m, i) => (m.role === 'user' && (m.images ?? []).some((_, k) => !view.sent(i, k)) ? [i] : []));
  const lastUnsent = withUnsent.at(-1);
  assert.equal(view.noteAfter, lastUnsent);
  assert.match(view.note, /^8 older images are no longer sent to the model: this server takes at most 4 images per request \(serve --max-images\), so the newest are sent\. A short note stands in for each older one/);
  assert.equal(imageView(chat(3), imagePlan(chat(3), 16)).noteAfter, -1);
  assert.equal(imageView(chat(3), imagePlan(chat(3), 16)).note, '');
});

test('messages: system prompt first, a failed empty answer left out, tool calls and results as OpenAI sends them', () => {
  const msgs: Message[] = [
    { role: 'user', content: 'hi' },
    { role: 'assistant', content: '', reasoning: '', error: 'boom' },
    { role: 'user', content: 'again', images: [image(1)] },
    { role: 'assistant', content: '', reasoning: 'r', tool_calls: [{ id: 'c1', name: 'f', arguments: '{}' }] },
    { role: 'tool', tool_call_id: 'c1', name: 'f', content: '42' },
  ];
  assert.deepEqual(apiMessages(' sys ', msgs), [
    { role: 'system', content: ' sys ' },
    { role: 'user', content: 'hi' },
    { role: 'user', content: [{ type: 'image_url', image_url: { url: image(1).url } }, { type: 'text', text: 'again' }] },
    { role: 'assistant', content: '', tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } }] },
    { role: 'tool', tool_call_id: 'c1', name: 'f', content: '42' },
  ]);
  // a message whose only image is left out is plain text: the note, then its text
  const two: Message[] = [{ role: 'user', content: '', images: [image(1)] }, { role: 'assistant', content: 'x', reasoning: '' }, { role: 'user', content: 'b', images: [image(2)] }];
  assert.equal(apiMessages('', two, imagePlan(two, 1))[0]!['content'], '[earlier image not shown: shot-1.png]\n');
});
