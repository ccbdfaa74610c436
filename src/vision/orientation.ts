// EXIF orientation, applied as transformers' load_image does (PIL.ImageOps.exif_transpose
// before convert("RGB")): a photo stored sideways with an Orientation tag is turned upright.
// The tag (0x0112 in IFD0 of the EXIF TIFF block) is read from a JPEG's APP1 "Exif" segment,
// a PNG's eXIf chunk or a WebP's EXIF chunk; an absent, unreadable or out-of-range tag means
// orientation 1 (as Pillow, which ignores broken EXIF here).
import type { ImageFormat } from './image-probe.js';

/** 1 (upright) … 8, as EXIF numbers them. */
export type Orientation = 1 | 2 | 3 | 4 | 5 | 6 | 7 | 8;

const u16 = (b: Uint8Array, i: number, le: boolean): number => (le ? b[i]! | (b[i + 1]! << 8) : (b[i]! << 8) | b[i + 1]!);
const u32 = (b: Uint8Array, i: number, le: boolean): number =>
  (le ? (b[i]! | (b[i + 1]! << 8) | (b[i + 2]! << 16) | (b[i + 3]! << 24)) : ((b[i]! << 24) | (b[i + 1]! << 16) | (b[i + 2]! << 8) | b[i + 3]!)) >>> 0;
const tag = (b: Uint8Array, at: number, s: string): boolean => [...s].every((c, i) => b[at + i] === c.charCodeAt(0));

/** The Orientation of a TIFF block (optionally behind "Exif\0\0"), else 1. */
function tiffOrientation(t: Uint8Array): Orientation {
  if (tag(t, 0, 'Exif\0\0')) t = t.subarray(6);
  if (t.length < 8) return 1;
  const le = tag(t, 0, 'II');
  if (!le && !tag(t, 0, 'MM')) return 1;
  const ifd = u32(t, 4, le);
  if (ifd + 2 > t.length) return 1;
  const n = u16(t, ifd, le);
  for (let e = 0; e < n; e++) {
    const at = ifd + 2 + 12 * e;
    if (at + 12 > t.length) return 1;
    if (u16(t, at, le) !== 0x0112) continue;
    const type = u16(t, at + 2, le);
    const v = type === 3 ? u16(t, at + 8, le) : type === 4 ? u32(t, at + 8, le) : 0; // SHORT (or LONG)
    return v >= 1 && v <= 8 ? (v as Orientation) : 1;
  }
  return 1;
}

function jpegExif(b: Uint8Array): Uint8Array | null {
  let i = 2;
  while (i + 4 <= b.length && b[i] === 0xff) {
    const marker = b[i + 1]!;
    if (marker === 0xda || marker === 0xd9) return null; // image data: no more metadata
    const len = (b[i + 2]! << 8) | b[i + 3]!;
    if (marker === 0xe1 && tag(b, i + 4, 'Exif\0\0')) return b.subarray(i + 4, Math.min(b.length, i + 2 + len));
    i += 2 + len;
  }
  return null;
}

/** A RIFF (WebP) or PNG chunk's payload by name. */
function chunk(b: Uint8Array, format: 'png' | 'webp', name: string): Uint8Array | null {
  let i = format === 'png' ? 8 : 12;
  while (i + 8 <= b.length) {
    const len = format === 'png' ? u32(b, i, false) : u32(b, i + 4, true);
    const id = format === 'png' ? i + 4 : i;
    if (tag(b, id, name)) return b.subarray(i + 8, Math.min(b.length, i + 8 + len));
    i += format === 'png' ? 12 + len : 8 + len + (len & 1);
  }
  return null;
}

/** The EXIF orientation of an encoded image (1 for GIF and for images without the tag). */
export function exifOrientation(b: Uint8Array, format: ImageFormat): Orientation {
  const exif = format === 'jpeg' ? jpegExif(b) : format === 'png' ? chunk(b, 'png', 'eXIf') : format === 'webp' ? chunk(b, 'webp', 'EXIF') : null;
  return exif ? tiffOrientation(exif) : 1;
}

/** The pixels (`channels` bytes each) turned upright: out(x, y) = in(source(x, y)), with the
 * output size swapped for orientations 5–8 (transpose, rotate 270°, transverse, rotate 90°,
 * as Pillow's exif_transpose maps them). */
export function orient<T extends { width: number; height: number; data: Uint8Array }>(img: T, o: Orientation, channels: number): T {
  if (o === 1) return img;
  const { width: w, height: h, data } = img;
  const swap = o >= 5;
  const ow = swap ? h : w;
  const oh = swap ? w : h;
  const out = new Uint8Array(data.length);
  for (let y = 0; y < oh; y++) {
    for (let x = 0; x < ow; x++) {
      let sx: number, sy: number;
      switch (o) {
        case 2: sx = w - 1 - x; sy = y; break; // mirror left-right
        case 3: sx = w - 1 - x; sy = h - 1 - y; break; // rotate 180°
        case 4: sx = x; sy = h - 1 - y; break; // mirror top-bottom
        case 5: sx = y; sy = x; break; // transpose
        case 6: sx = y; sy = h - 1 - x; break; // rotate 90° clockwise
        case 7: sx = w - 1 - y; sy = h - 1 - x; break; // transverse
        default: sx = w - 1 - y; sy = x; break; // 8: rotate 90° counter-clockwise
      }
      out.set(data.subarray((sy * w + sx) * channels, (sy * w + sx + 1) * channels), (y * ow + x) * channels);
    }
  }
  return { ...img, width: ow, height: oh, data: out };
}
