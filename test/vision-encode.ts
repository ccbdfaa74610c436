// Test images written with the decoding libraries' own encoders (jSquash PNG / WebP, omggif).
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const wasm = (path: string): Promise<WebAssembly.Module> => WebAssembly.compile(readFileSync(require.resolve(path)));
const image = (rgba: Uint8Array, width: number, height: number): ImageDataLike =>
  ({ data: new Uint8ClampedArray(rgba.buffer, rgba.byteOffset, rgba.length), width, height, colorSpace: 'srgb' });
interface ImageDataLike { data: Uint8ClampedArray; width: number; height: number; colorSpace: 'srgb' }

let pngReady: Promise<unknown> | undefined;
export async function encodePng(rgba: Uint8Array, width: number, height: number): Promise<Uint8Array> {
  const png = await import('@jsquash/png/encode.js');
  pngReady ??= wasm('@jsquash/png/codec/pkg/squoosh_png_bg.wasm').then((m) => png.init(m));
  await pngReady;
  return new Uint8Array(await png.default(image(rgba, width, height) as unknown as ImageData));
}

let webpReady: Promise<unknown> | undefined;
export async function encodeWebpLossless(rgba: Uint8Array, width: number, height: number): Promise<Uint8Array> {
  const webp = await import('@jsquash/webp/encode.js');
  // Node has wasm SIMD, so the encoder's glue is the SIMD build
  const init = webp.init as unknown as (m: WebAssembly.Module) => Promise<unknown>;
  webpReady ??= wasm('@jsquash/webp/codec/enc/webp_enc_simd.wasm').then((m) => init(m));
  await webpReady;
  return new Uint8Array(await webp.default(image(rgba, width, height) as unknown as ImageData, { lossless: 1 }));
}

interface GifWriter { addFrame(x: number, y: number, w: number, h: number, indexed: number[]): void; end(): number }

/** A two-frame GIF (4-colour palette) and the RGB of its first frame. */
export function encodeGif(width: number, height: number): { bytes: Uint8Array; rgb: Uint8Array } {
  const omggif = require('omggif') as { GifWriter: new (buf: Uint8Array, w: number, h: number, o: object) => GifWriter };
  const palette = [0xff0000, 0x00ff00, 0x0000ff, 0xfedcba];
  const buf = new Uint8Array(64 * 1024);
  const writer = new omggif.GifWriter(buf, width, height, { palette, loop: 0 });
  const first = Array.from({ length: width * height }, (_, i) => (i * 7 + Math.floor(i / width)) % 4);
  writer.addFrame(0, 0, width, height, first);
  writer.addFrame(0, 0, width, height, first.map((v) => 3 - v));
  const rgb = Uint8Array.from({ length: width * height * 3 }, (_, i) => (palette[first[Math.floor(i / 3)]!]! >> (16 - 8 * (i % 3))) & 255);
  return { bytes: buf.slice(0, writer.end()), rgb };
}

export interface AnimFrame { readonly rgba: Uint8Array; readonly width: number; readonly height: number; readonly x: number; readonly y: number }

/** An animated WebP (VP8X + ANIM + one ANMF per frame, each frame libwebp's lossless VP8L
 * bitstream) on a canvas of canvasWidth × canvasHeight; `alpha` sets the VP8X alpha flag. */
export async function encodeAnimatedWebp(frames: readonly AnimFrame[], canvasWidth: number, canvasHeight: number, alpha: boolean): Promise<Uint8Array> {
  const le = (n: number, bytes: number): number[] => Array.from({ length: bytes }, (_, i) => (n >>> (8 * i)) & 255);
  const chunk = (id: string, payload: readonly number[] | Uint8Array): number[] =>
    [...[...id].map((c) => c.charCodeAt(0)), ...le(payload.length, 4), ...payload, ...(payload.length & 1 ? [0] : [])];
  const parts: number[] = [
    ...chunk('VP8X', [0x02 | (alpha ? 0x10 : 0), 0, 0, 0, ...le(canvasWidth - 1, 3), ...le(canvasHeight - 1, 3)]),
    ...chunk('ANIM', [0, 0, 0, 0, 0, 0]),
  ];
  for (const f of frames) {
    const still = await encodeWebpLossless(f.rgba, f.width, f.height);
    const vp8l = still.subarray(12); // the file's one chunk: "VP8L", size, bitstream
    if (String.fromCharCode(...vp8l.subarray(0, 4)) !== 'VP8L') throw new Error('expected a simple lossless WebP');
    parts.push(...chunk('ANMF', [...le(f.x / 2, 3), ...le(f.y / 2, 3), ...le(f.width - 1, 3), ...le(f.height - 1, 3), ...le(100, 3), 0, ...vp8l]));
  }
  return Uint8Array.from([...[...'RIFF'].map((c) => c.charCodeAt(0)), ...le(4 + parts.length, 4), ...[...'WEBP'].map((c) => c.charCodeAt(0)), ...parts]);
}
