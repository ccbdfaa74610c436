// Encoded image bytes → 8-bit RGB pixels. JPEG, PNG and WebP decode with the jSquash wasm
// builds of libjpeg-turbo (mozjpeg), the Rust png crate and libwebp; GIF (first frame) with
// omggif (pure JS); an animated WebP gives its first frame (webp-anim.ts). Pixels with alpha
// are composited over white, as HF's convert_to_rgb does; then the EXIF orientation is
// applied (orientation.ts), as transformers' load_image does with ImageOps.exif_transpose.
//
// Invariants:
// - Every failure is a DeltaserveError('bad_request') whose message starts with the caller's
//   label and names the problem (unsupported format, truncated, corrupt, too large).
// - The header is probed first: nothing is decoded beyond `maxPixels`.
// - A decoded size must equal the header's size (before the EXIF orientation swaps it).
// - Decodes run one at a time (the wasm decoders report warnings through a shared hook).
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { DeltaserveError } from '../util/errors.js';
import { type ImageFormat, imageError, probeImage, webpAnimated } from './image-probe.js';
import { exifOrientation, orient } from './orientation.js';
import { placeOnCanvas, webpFirstFrame } from './webp-anim.js';

export interface RgbImage {
  readonly width: number;
  readonly height: number;
  /** Row-major RGB, 3 bytes per pixel. */
  readonly data: Uint8Array;
}

export interface DecodeOptions {
  /** Names the image in error messages (e.g. "messages[1].content[2]"). */
  readonly label?: string;
  /** Refuse images with more pixels than this (default: Pillow's decompression-bomb limit). */
  readonly maxPixels?: number;
}

/** Pillow's Image.MAX_IMAGE_PIXELS (≈ 89.5 Mpx): the largest image decoded by default. */
export const DEFAULT_MAX_DECODE_PIXELS = 89_478_485;

interface Rgba { readonly width: number; readonly height: number; readonly data: ArrayLike<number> }
type Decoder = (bytes: Uint8Array) => Promise<Rgba>;

const require = createRequire(import.meta.url);
/** Messages the wasm decoders printed during the current decode. */
let printed: string[] = [];
const quiet = { print: (s: string) => printed.push(s), printErr: (s: string) => printed.push(s) };

async function wasm(path: string): Promise<WebAssembly.Module> {
  return WebAssembly.compile(await readFile(require.resolve(path)));
}

/** A fresh ArrayBuffer holding exactly b (a Node Buffer's slice() is a view into its pool). */
const copyBuffer = (b: Uint8Array): ArrayBuffer => new Uint8Array(b).buffer;

async function loadDecoders(): Promise<Record<ImageFormat, Decoder>> {
  const [jpeg, png, webp] = await Promise.all([
    import('@jsquash/jpeg/decode.js'), import('@jsquash/png/decode.js'), import('@jsquash/webp/decode.js'),
  ]);
  // the emscripten decoders take (wasm module, module options); their .d.ts lists only one
  type EmInit = (module: WebAssembly.Module, options: typeof quiet) => Promise<void>;
  await (jpeg.init as unknown as EmInit)(await wasm('@jsquash/jpeg/codec/dec/mozjpeg_dec.wasm'), quiet);
  await png.init(await wasm('@jsquash/png/codec/pkg/squoosh_png_bg.wasm'));
  await (webp.init as unknown as EmInit)(await wasm('@jsquash/webp/codec/dec/webp_dec.wasm'), quiet);
  const omggif = require('omggif') as { GifReader: new (b: Uint8Array) => GifReader };
  return {
    jpeg: (b) => jpeg.default(copyBuffer(b)),
    png: (b) => png.default(copyBuffer(b)),
    webp: (b) => webp.default(copyBuffer(b)),
    gif: async (b) => {
      const reader = new omggif.GifReader(b);
      const data = new Uint8Array(reader.width * reader.height * 4);
      reader.decodeAndBlitFrameRGBA(0, data);
      return { width: reader.width, height: reader.height, data };
    },
  };
}

interface GifReader { readonly width: number; readonly height: number; decodeAndBlitFrameRGBA(frame: number, out: Uint8Array): void }

let decoders: Promise<Record<ImageFormat, Decoder>> | undefined;
let queue: Promise<unknown> = Promise.resolve();

/** One decode at a time: `printed` belongs to the decode in flight. */
function serial<T>(fn: () => Promise<T>): Promise<T> {
  const run = queue.then(fn, fn);
  queue = run.catch(() => undefined);
  return run;
}

function describe(e: unknown): string {
  if (e instanceof Error) return e.message;
  return typeof e === 'string' ? e : '';
}

/** RGBA → RGB composited over white: c' = round((c·a + 255·(255 − a)) / 255). */
function toRgb(img: Rgba): RgbImage {
  const n = img.width * img.height;
  const out = new Uint8Array(n * 3);
  const src = img.data;
  for (let i = 0; i < n; i++) {
    const a = src[4 * i + 3]!;
    for (let c = 0; c < 3; c++) {
      const v = src[4 * i + c]!;
      out[3 * i + c] = a === 255 ? v : Math.round((v * a + 255 * (255 - a)) / 255);
    }
  }
  return { width: img.width, height: img.height, data: out };
}

/** Decode `bytes` (JPEG, PNG, WebP, or a GIF's first frame) to RGB. */
export async function decodeImage(bytes: Uint8Array, opts: DecodeOptions = {}): Promise<RgbImage> {
  const label = opts.label ?? 'image';
  const info = probeImage(bytes, label);
  const max = opts.maxPixels ?? DEFAULT_MAX_DECODE_PIXELS;
  const kind = info.format.toUpperCase();
  if (info.width * info.height > max) {
    throw imageError(label, `${kind} image of ${info.width}×${info.height} = ${info.width * info.height} pixels exceeds the limit of ${max} pixels`);
  }
  decoders ??= loadDecoders();
  const table = await decoders;
  return serial(async () => {
    printed = [];
    let rgba: Rgba;
    try {
      rgba = info.format === 'webp' && webpAnimated(bytes) ? await firstWebpFrame(table.webp, bytes, label) : await table[info.format](bytes);
    } catch (e) {
      if (e instanceof DeltaserveError) throw e;
      // emscripten throws opaque objects: libjpeg's / libwebp's printed messages say more
      const detail = (printed.length > 0 ? printed : [describe(e)]).filter((s) => s && !s.includes('unwrap_throw'));
      throw imageError(label, `corrupt or truncated ${kind} image${detail.length ? ` (${detail.join('; ')})` : ''}`);
    }
    // libjpeg only warns on a cut-off file and fills the rest with gray: refuse it, as Pillow does
    const truncated = printed.find((s) => /premature end/i.test(s));
    if (truncated) throw imageError(label, `truncated ${kind} image (${truncated})`);
    if (rgba.width !== info.width || rgba.height !== info.height || rgba.data.length !== rgba.width * rgba.height * 4) {
      throw imageError(label, `corrupt ${kind} image: decoded ${rgba.width}×${rgba.height}, header says ${info.width}×${info.height}`);
    }
    return orient(toRgb(rgba), exifOrientation(bytes, info.format), 3);
  });
}

/** An animated WebP's first frame on its canvas (RGBA). */
async function firstWebpFrame(decode: Decoder, bytes: Uint8Array, label: string): Promise<Rgba> {
  const frame = webpFirstFrame(bytes, label);
  const rgba = await decode(frame.still);
  if (rgba.width !== frame.width || rgba.height !== frame.height) {
    throw imageError(label, `corrupt animated WebP: first frame decoded ${rgba.width}×${rgba.height}, its header says ${frame.width}×${frame.height}`);
  }
  return placeOnCanvas(frame, rgba.data);
}
