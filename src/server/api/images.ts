// Image parts of the chat APIs (Chat Completions `image_url`, Responses `input_image`,
// Anthropic `image` blocks) → the frontend's image inputs. A part's bytes come from a
// base64 `data:` URL (or Anthropic's base64 source) at parse time; an http(s) URL is
// fetched in the prompt stage, only when the server allows it (--allow-image-urls), under a
// size and a time limit. Every refusal is a 400 naming the message and part.
import { DEFAULT_IMAGE_LIMITS, type ImageInput, type ImageLimits, tooManyImages } from '../../frontend/images.js';
import type { PromptImages } from '../../frontend/prompt.js';
import { randomBytes } from 'node:crypto';
import { invalid } from '../http/errors.js';

/** The server's image settings (serve flags). */
export interface ServerImageOptions extends ImageLimits {
  /** Fetch http(s) image URLs (--allow-image-urls; default off). */
  readonly allowUrls: boolean;
  /** Bytes of one fetched image at most. */
  readonly urlMaxBytes: number;
  /** Milliseconds for one fetch at most. */
  readonly urlTimeoutMs: number;
}

export const DEFAULT_SERVER_IMAGES: ServerImageOptions = Object.freeze({
  ...DEFAULT_IMAGE_LIMITS, allowUrls: false, urlMaxBytes: 20 * 1024 * 1024, urlTimeoutMs: 10_000,
});

type Source = { readonly bytes: Uint8Array } | { readonly url: string };

/** The image parts of one request, in prompt order; `add` returns the text that stands for
 * the image in its message. */
export class TurnImages {
  readonly sentinel = `qimg${randomBytes(12).toString('hex')}i`;
  private readonly parts: { readonly label: string; readonly src: Source }[] = [];

  get count(): number {
    return this.parts.length;
  }

  /** An image given as a URL (`data:` or http(s)). */
  addUrl(url: unknown, label: string): string {
    if (typeof url !== 'string' || url.length === 0) throw invalid(label, `${label}: the image URL must be a non-empty string`);
    if (url.startsWith('data:')) return this.add({ bytes: dataUrlBytes(url, label) }, label);
    if (/^https?:\/\//i.test(url)) return this.add({ url }, label);
    throw invalid(label, `${label}: the image URL must be a data: URL (base64) or an http(s) URL`);
  }

  /** An image given as base64 bytes (Anthropic's `source.type: "base64"`). */
  addBase64(data: unknown, label: string): string {
    if (typeof data !== 'string') throw invalid(label, `${label}: the image data must be a base64 string`);
    return this.add({ bytes: base64Bytes(data, label) }, label);
  }

  private add(src: Source, label: string): string {
    this.parts.push({ label, src });
    return this.sentinel;
  }

  /** The images' bytes (URLs fetched), for the frontend. */
  async resolve(opts: ServerImageOptions, signal?: AbortSignal): Promise<PromptImages> {
    if (this.parts.length > opts.maxImages) {
      const label = this.parts[opts.maxImages]!.label;
      throw invalid(label, tooManyImages(label, opts.maxImages, this.parts.length));
    }
    const inputs: ImageInput[] = [];
    for (const p of this.parts) inputs.push({ label: p.label, bytes: 'bytes' in p.src ? p.src.bytes : await fetchImage(p.src.url, p.label, opts, signal) });
    return { sentinel: this.sentinel, inputs };
  }
}

/** `{ images }` when the request has image parts, else nothing (an image-less prompt is
 * the same object as before images were served). */
export function withImages(images: TurnImages): { images?: TurnImages } {
  return images.count > 0 ? { images } : {};
}

function base64Bytes(data: string, label: string): Uint8Array {
  const clean = data.replace(/\s+/g, '');
  if (clean.length === 0) throw invalid(label, `${label}: the image data is empty`);
  if (!/^[A-Za-z0-9+/_-]*={0,2}$/.test(clean)) throw invalid(label, `${label}: the image data is not valid base64`);
  return new Uint8Array(Buffer.from(clean, 'base64'));
}

/** Bytes of `data:[<mime>][;base64],<data>` (base64 only: images are binary). */
function dataUrlBytes(url: string, label: string): Uint8Array {
  const comma = url.indexOf(',');
  const head = comma < 0 ? '' : url.slice(5, comma);
  if (comma < 0 || !head.endsWith(';base64')) throw invalid(label, `${label}: a data: image URL must be base64 (data:image/png;base64,...)`);
  const mime = head.slice(0, -7).split(';')[0]!.toLowerCase();
  if (mime !== '' && !mime.startsWith('image/')) throw invalid(label, `${label}: the data: URL's type is ${JSON.stringify(mime)}, not an image`);
  return base64Bytes(url.slice(comma + 1), label);
}

/** An http(s) image, at most opts.urlMaxBytes, within opts.urlTimeoutMs. */
async function fetchImage(url: string, label: string, opts: ServerImageOptions, signal?: AbortSignal): Promise<Uint8Array> {
  if (!opts.allowUrls) throw invalid(label, `${label}: http(s) image URLs are off on this server (start it with --allow-image-urls); send the image as a data: URL`);
  const timeout = AbortSignal.timeout(opts.urlTimeoutMs);
  const both = signal ? AbortSignal.any([signal, timeout]) : timeout;
  let res: Response;
  try {
    res = await fetch(url, { signal: both, redirect: 'follow' });
  } catch (e) {
    throw invalid(label, `${label}: fetching the image failed${timeout.aborted ? ` (over ${opts.urlTimeoutMs} ms)` : ''}: ${(e as Error).message}`);
  }
  if (!res.ok || !res.body) throw invalid(label, `${label}: fetching the image gave HTTP ${res.status}`);
  const chunks: Uint8Array[] = [];
  let total = 0;
  try {
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      total += chunk.length;
      if (total > opts.urlMaxBytes) throw invalid(label, `${label}: the image at the URL is over ${opts.urlMaxBytes} bytes`);
      chunks.push(chunk);
    }
  } catch (e) {
    if ((e as { status?: number }).status === 400) throw e;
    throw invalid(label, `${label}: reading the image failed${timeout.aborted ? ` (over ${opts.urlTimeoutMs} ms)` : ''}: ${(e as Error).message}`);
  }
  return new Uint8Array(Buffer.concat(chunks));
}
