// Format and dimensions of an encoded image from its header alone, before any pixel is
// decoded: so an unsupported format or an image too large to decode is refused cheaply,
// with a message naming the problem. Supported: JPEG, PNG, WebP, GIF.
import { DeltaserveError } from '../util/errors.js';

export type ImageFormat = 'jpeg' | 'png' | 'webp' | 'gif';

export interface ImageInfo {
  readonly format: ImageFormat;
  readonly width: number;
  readonly height: number;
}

export const SUPPORTED_FORMATS = 'JPEG, PNG, WebP, GIF';

export function imageError(label: string, message: string): DeltaserveError {
  return new DeltaserveError('bad_request', `${label}: ${message}`);
}

function startsWith(b: Uint8Array, sig: readonly number[], at = 0): boolean {
  return b.length >= at + sig.length && sig.every((v, i) => b[at + i] === v);
}

const ascii = (s: string): number[] => [...s].map((c) => c.charCodeAt(0));
const u16be = (b: Uint8Array, i: number): number => (b[i]! << 8) | b[i + 1]!;
const u16le = (b: Uint8Array, i: number): number => b[i]! | (b[i + 1]! << 8);
const u24le = (b: Uint8Array, i: number): number => b[i]! | (b[i + 1]! << 8) | (b[i + 2]! << 16);
const u32be = (b: Uint8Array, i: number): number => ((b[i]! << 24) >>> 0) + (b[i + 1]! << 16) + (b[i + 2]! << 8) + b[i + 3]!;

/** A recognisable format we do not decode, for the error message. */
function otherFormat(b: Uint8Array): string | null {
  if (startsWith(b, ascii('BM'))) return 'BMP';
  if (startsWith(b, [0x49, 0x49, 0x2a, 0]) || startsWith(b, [0x4d, 0x4d, 0, 0x2a])) return 'TIFF';
  if (startsWith(b, ascii('ftyp'), 4)) return 'HEIF/AVIF';
  if (startsWith(b, ascii('<svg')) || startsWith(b, ascii('<?xml'))) return 'SVG';
  if (startsWith(b, [0xff, 0x0a]) || startsWith(b, [0, 0, 0, 0x0c, 0x4a, 0x58, 0x4c, 0x20])) return 'JPEG XL';
  return null;
}

function jpegSize(b: Uint8Array, label: string): { width: number; height: number } {
  let i = 2;
  while (i + 4 <= b.length) {
    if (b[i] !== 0xff) throw imageError(label, `corrupt JPEG: expected a marker at byte ${i}`);
    const marker = b[i + 1]!;
    if (marker === 0xff) { i++; continue; } // fill byte
    if (marker === 0xd8 || marker === 0x01 || (marker >= 0xd0 && marker <= 0xd7)) { i += 2; continue; }
    if (marker === 0xd9 || marker === 0xda) break; // end of image / start of scan before any frame header
    const len = u16be(b, i + 2);
    const isFrame = marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc;
    if (isFrame) {
      if (i + 9 > b.length) break;
      return { height: u16be(b, i + 5), width: u16be(b, i + 7) };
    }
    i += 2 + len;
  }
  throw imageError(label, 'truncated or corrupt JPEG: no frame header (SOF) before the image data');
}

function webpSize(b: Uint8Array, label: string): { width: number; height: number } {
  const chunk = String.fromCharCode(...b.subarray(12, 16));
  if (chunk === 'VP8 ' && b.length >= 30 && startsWith(b, [0x9d, 0x01, 0x2a], 23)) {
    return { width: u16le(b, 26) & 0x3fff, height: u16le(b, 28) & 0x3fff };
  }
  if (chunk === 'VP8L' && b.length >= 25 && b[20] === 0x2f) {
    const bits = (b[21]! | (b[22]! << 8) | (b[23]! << 16) | (b[24]! << 24)) >>> 0;
    return { width: (bits & 0x3fff) + 1, height: ((bits >>> 14) & 0x3fff) + 1 };
  }
  if (chunk === 'VP8X' && b.length >= 30) {
    // the canvas size (of an animation too: its first frame is decoded onto it)
    return { width: u24le(b, 24) + 1, height: u24le(b, 27) + 1 };
  }
  throw imageError(label, `truncated or corrupt WebP: unreadable "${chunk.replace(/[^ -~]/g, '?')}" header`);
}

/** A WebP whose VP8X header sets the animation flag (bit 1 of its flags byte). */
export function webpAnimated(b: Uint8Array): boolean {
  return b.length >= 30 && String.fromCharCode(...b.subarray(12, 16)) === 'VP8X' && (b[20]! & 0x02) !== 0;
}

/** Format and size from the header; throws a bad_request naming `label` when the bytes are
 * not a supported image or the header is cut short. */
export function probeImage(b: Uint8Array, label = 'image'): ImageInfo {
  if (b.length === 0) throw imageError(label, 'empty image data');
  let info: ImageInfo;
  if (startsWith(b, [0xff, 0xd8, 0xff])) {
    info = { format: 'jpeg', ...jpegSize(b, label) };
  } else if (startsWith(b, [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])) {
    if (b.length < 24 || !startsWith(b, ascii('IHDR'), 12)) throw imageError(label, 'truncated or corrupt PNG: no IHDR header');
    info = { format: 'png', width: u32be(b, 16), height: u32be(b, 20) };
  } else if (startsWith(b, ascii('GIF87a')) || startsWith(b, ascii('GIF89a'))) {
    if (b.length < 10) throw imageError(label, 'truncated GIF: no screen descriptor');
    info = { format: 'gif', width: u16le(b, 6), height: u16le(b, 8) };
  } else if (startsWith(b, ascii('RIFF')) && startsWith(b, ascii('WEBP'), 8)) {
    if (b.length < 8 + u32le(b, 4)) throw imageError(label, `truncated WebP: ${b.length} of ${8 + u32le(b, 4)} bytes`);
    info = { format: 'webp', ...webpSize(b, label) };
  } else {
    const other = otherFormat(b);
    throw imageError(label, `unsupported image format${other ? ` (${other})` : ''}; supported: ${SUPPORTED_FORMATS}`);
  }
  if (info.width < 1 || info.height < 1) throw imageError(label, `corrupt ${info.format.toUpperCase()}: size ${info.width}×${info.height}`);
  return info;
}

function u32le(b: Uint8Array, i: number): number {
  return (b[i]! | (b[i + 1]! << 8) | (b[i + 2]! << 16) | (b[i + 3]! << 24)) >>> 0;
}
