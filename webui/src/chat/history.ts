// The conversation as the request sends it (pure: no DOM, unit-tested in node by
// test/webui-history.test.ts). The page resends the whole conversation every turn, so images
// attached in earlier turns pile up; the server refuses a request with more than its
// --max-images. The page therefore sends only the newest images and puts a short text note
// where each older one was (the stored chat keeps every image).
//
// Which images are sent: images are numbered in conversation order 0..total-1; those before
// `cut` are not sent. Over the limit L, the cut moves in batches of B = ceil(L / 2) images,
// not one image per turn: each move changes the request from the first newly dropped image
// on, so the server's prefix cache misses from there (the text before it still hits). A
// batch keeps the earlier turns byte-identical from turn to turn for B images at a time,
// at the price of sending between L - B + 1 and L images instead of always L.
import type { ImageAttachment, Message } from './types.js';

/** What the page knows of the server's image limit: a number (its --max-images), 0 for a
 * text-only model, or null when the model card is not read yet (everything is sent and
 * the server judges). */
export type ImageLimit = number | null;

export interface ImagePlan {
  /** Images in the conversation. */
  readonly total: number;
  /** Images before this conversation-order index are replaced by a note. */
  readonly cut: number;
  /** Images of the last user message (always sent). */
  readonly current: number;
  /** The limit the plan was made for (null: none known). */
  readonly limit: ImageLimit;
}

/** Images the cut moves by at a time, for limit `limit` (≥ 1). */
export function batchOf(limit: number): number {
  return Math.max(1, Math.ceil(limit / 2));
}

const imagesOf = (m: Message): readonly ImageAttachment[] => (m.role === 'user' ? m.images ?? [] : []);

/**
 * The plan for `messages` under `limit`. `floor`: a cut the conversation already reached for
 * another reason (the prompt was over the context with more images); the cut never goes
 * below it. The images of the last user message are always sent, whatever the cut: they
 * are what the user just attached, and over the limit the server's refusal (which names
 * --max-images) sends them back to the composer rather than dropping them unseen.
 */
export function imagePlan(messages: readonly Message[], limit: ImageLimit, floor = 0): ImagePlan {
  const total = messages.reduce((n, m) => n + imagesOf(m).length, 0);
  const lastUser = messages.map((m) => m.role).lastIndexOf('user');
  const current = lastUser < 0 ? 0 : imagesOf(messages[lastUser]!).length;
  let cut = Math.max(0, Math.min(floor, total));
  if (limit !== null && total > limit) {
    const over = total - limit;
    const b = batchOf(limit);
    cut = Math.max(cut, Math.ceil(over / b) * b);
  }
  return { total, cut: Math.min(cut, total - current), current, limit };
}

/** The images of `plan` that are sent. */
export const sentCount = (plan: ImagePlan): number => plan.total - plan.cut;

/** Whether `plan` sends images from before the last user message (dropping them could make
 * a prompt that is over the context fit). */
export const sendsEarlierImages = (plan: ImagePlan): boolean => plan.total - plan.current > plan.cut;

/** The cut that leaves out every image before the last user message. */
export const earlierImagesCut = (plan: ImagePlan): number => plan.total - plan.current;

/** What the model reads where an image is no longer sent. */
export function imageNote(im: ImageAttachment): string {
  return `[earlier image not shown: ${im.name}]\n`;
}

/** A user message's content: its text, or with images, image_url parts (data: URLs) and
 * then the text. `sent(k)`: whether image k goes as an image or as its note. */
function userContent(text: string, images: readonly ImageAttachment[], sent: (k: number) => boolean): string | Record<string, unknown>[] {
  if (images.length === 0) return text;
  if (!images.some((_, k) => sent(k))) return images.map(imageNote).join('') + text;
  const parts: Record<string, unknown>[] = images.map((im, k) =>
    sent(k) ? { type: 'image_url', image_url: { url: im.url } } : { type: 'text', text: imageNote(im) });
  if (text !== '') parts.push({ type: 'text', text });
  return parts;
}

/** OpenAI messages of a conversation (the system prompt first when set), images as `plan`
 * says (no plan: every image is sent). */
export function apiMessages(systemPrompt: string, messages: readonly Message[], plan: ImagePlan | null = null): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = systemPrompt.trim() !== '' ? [{ role: 'system', content: systemPrompt }] : [];
  let seen = 0;
  for (const m of messages) {
    if (m.role === 'user') {
      const first = seen;
      const images = m.images ?? [];
      seen += images.length;
      out.push({ role: 'user', content: userContent(m.content, images, (k) => plan === null || first + k >= plan.cut) });
    } else if (m.role === 'tool') out.push({ role: 'tool', tool_call_id: m.tool_call_id, name: m.name, content: m.content });
    else if (m.error === undefined || m.content !== '' || (m.tool_calls?.length ?? 0) > 0) {
      const a: Record<string, unknown> = { role: 'assistant', content: m.content };
      if (m.tool_calls && m.tool_calls.length > 0) {
        a['tool_calls'] = m.tool_calls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } }));
      }
      out.push(a);
    }
  }
  return out;
}

/** What the view needs of a plan: whether image `k` of message `index` is sent, and the
 * note shown once, after the message holding the last image not sent (-1: none). */
export interface ImageView {
  sent(index: number, k: number): boolean;
  readonly noteAfter: number;
  readonly note: string;
}

export function imageView(messages: readonly Message[], plan: ImagePlan): ImageView {
  const firstOf: number[] = [];
  let seen = 0;
  let noteAfter = -1;
  messages.forEach((m, i) => {
    firstOf.push(seen);
    seen += imagesOf(m).length;
    if (plan.cut > 0 && noteAfter < 0 && seen >= plan.cut) noteAfter = i;
  });
  return { sent: (index, k) => (firstOf[index] ?? 0) + k >= plan.cut, noteAfter, note: planNote(plan) };
}

/** The line the page shows once, where the images stop being sent ('' when all are sent). */
export function planNote(plan: ImagePlan): string {
  if (plan.cut === 0) return '';
  const n = plan.cut === 1 ? '1 older image is' : `${plan.cut} older images are`;
  if (plan.limit === 0) return `${n} not sent: this model is text-only. The images stay in this chat.`;
  const why = plan.limit !== null && plan.total > plan.limit
    ? `this server takes at most ${plan.limit} images per request (serve --max-images), so the newest are sent`
    : 'with them the conversation was longer than the model\'s context';
  return `${n} no longer sent to the model: ${why}. A short note stands in for each older one; every image stays in this chat.`;
}
