// Image decoding and preprocessing: decoded pixels and bicubic resizes equal Pillow's
// (fixtures written by test/fixtures/vision-images/make.py), round trips through the codecs'
// own encoders are lossless, every bad input is a bad_request naming the problem, and the
// processor's smart resize and patch order hold.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { decodeImage } from '../src/vision/decode.js';
import { probeImage } from '../src/vision/image-probe.js';
import { preprocessImage, resizeBicubic, roundHalfEven, smartResize } from '../src/vision/preprocess.js';
import { DeltaserveError } from '../src/util/errors.js';
import { Rng } from '../src/util/rng.js';
import { fixtureVisionConfig } from './vision-helpers.js';
import { REPO_ROOT } from './paths.js';
import { encodePng, encodeWebpLossless, encodeGif, encodeAnimatedWebp } from './vision-encode.js';

const DIR = join(REPO_ROOT, 'test', 'fixtures', 'vision-images');
interface Expected {
  width: number; height: number; rgb: string; decoded: Record<string, string>; resizes: [number, number, number, number, string][];
  oriented: Record<string, [number, number, string]>;
}
const EXPECTED = JSON.parse(readFileSync(join(DIR, 'expected.json'), 'utf8')) as Expected;
const bytesOf = (b64: string): Uint8Array => new Uint8Array(Buffer.from(b64, 'base64'));

function maxDiff(a: Uint8Array, b: Uint8Array): number {
  assert.equal(a.length, b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!));
  return m;
}

test('decoded pixels equal Pillow\'s for JPEG, PNG, WebP and GIF (first frame)', async () => {
  for (const [name, b64] of Object.entries(EXPECTED.decoded)) {
    const img = await decodeImage(new Uint8Array(readFileSync(join(DIR, name))), { label: name });
    assert.equal(img.width, EXPECTED.width, name);
    assert.equal(img.height, EXPECTED.height, name);
    // alpha compositing rounds once here and twice in Pillow (alpha_composite, convert): ±1
    const tolerance = name.includes('alpha') || name.startsWith('rgba') ? 1 : 0;
    const d = maxDiff(img.data, bytesOf(b64));
    assert.ok(d <= tolerance, `${name}: max |Δ| ${d} vs Pillow`);
  }
});

test('Node Buffers (views into a shared pool) decode like plain arrays', async () => {
  for (const name of ['lossy.webp', 'rgb-q90.jpg', 'palette.png', 'anim.gif']) {
    const pooled = Buffer.from(readFileSync(join(DIR, name))); // small: allocated from the pool
    assert.deepEqual((await decodeImage(pooled)).data, bytesOf(EXPECTED.decoded[name]!), name);
  }
});

test('EXIF orientation 2–8 (JPEG), 6 (PNG eXIf), 8 (WebP EXIF): upright as Pillow\'s exif_transpose', async () => {
  assert.equal(Object.keys(EXPECTED.oriented).length, 9);
  for (const [name, [w, h, b64]] of Object.entries(EXPECTED.oriented)) {
    const img = await decodeImage(new Uint8Array(readFileSync(join(DIR, name))), { label: name });
    assert.deepEqual([img.width, img.height], [w, h], name);
    assert.equal(maxDiff(img.data, bytesOf(b64)), 0, name);
  }
  // the same pixels without the tag: an upright image is not turned
  const plain = await decodeImage(new Uint8Array(readFileSync(join(DIR, 'rgb-q90.jpg'))));
  const six = await decodeImage(new Uint8Array(readFileSync(join(DIR, 'exif-6.jpg'))));
  assert.deepEqual([plain.width, six.width], [40, 30]);
  // rotated 90° clockwise: the output's top-left pixel is the input's bottom-left
  assert.deepEqual([...six.data.subarray(0, 3)], [...plain.data.subarray(29 * 40 * 3, 29 * 40 * 3 + 3)]);
});

test('animated WebP and GIF written here (two frames): the first frame, placed on the canvas', async () => {
  const [w, h] = [10, 6];
  const first = pattern(w, h, 3);
  const second = pattern(w, h, 4);
  const rgbOf = (rgba: Uint8Array): number[] => [...rgba].filter((_, i) => i % 4 !== 3);
  for (const alpha of [true, false]) {
    // canvas 16×12, first frame at (4, 2), second at (0, 0): only the first is drawn
    const anim = await encodeAnimatedWebp([{ rgba: first, width: w, height: h, x: 4, y: 2 }, { rgba: second, width: w, height: h, x: 0, y: 0 }], 16, 12, alpha);
    assert.deepEqual(probeImage(anim), { format: 'webp', width: 16, height: 12 });
    const img = await decodeImage(anim);
    assert.deepEqual([img.width, img.height], [16, 12]);
    const outside = alpha ? 255 : 0; // transparent → white over white; no alpha: Pillow's RGB black
    for (let y = 0; y < 12; y++) {
      for (let x = 0; x < 16; x++) {
        const got = [...img.data.subarray((y * 16 + x) * 3, (y * 16 + x) * 3 + 3)];
        const inside = x >= 4 && x < 4 + w && y >= 2 && y < 2 + h;
        const want = inside ? rgbOf(first.subarray(((y - 2) * w + x - 4) * 4, ((y - 2) * w + x - 4) * 4 + 4)) : [outside, outside, outside];
        assert.deepEqual(got, want, `alpha ${alpha}: (${x}, ${y})`);
      }
    }
  }
  const gif = encodeGif(w, h); // two frames, the second the first's complement
  assert.equal(maxDiff((await decodeImage(gif.bytes)).data, gif.rgb), 0, 'gif: the first frame');
});

test('bicubic resize equals Pillow\'s Image.resize(BICUBIC), up, down and mixed', () => {
  const src = { width: EXPECTED.width, height: EXPECTED.height, data: bytesOf(EXPECTED.rgb) };
  for (const [, , w, h, b64] of EXPECTED.resizes) {
    const out = resizeBicubic(src, w, h);
    assert.equal(maxDiff(out.data, bytesOf(b64)), 0, `${w}×${h}`);
  }
});

function pattern(w: number, h: number, seed: number): Uint8Array {
  const rng = new Rng(seed);
  return Uint8Array.from({ length: w * h * 4 }, (_, i) => (i % 4 === 3 ? 255 : rng.nextU32() & 255));
}

test('round trips through the libraries\' encoders are lossless (PNG, WebP lossless, GIF)', async () => {
  const [w, h] = [33, 17];
  const rgba = pattern(w, h, 1);
  const rgb = Uint8Array.from({ length: w * h * 3 }, (_, i) => rgba[Math.floor(i / 3) * 4 + (i % 3)]!);
  for (const [kind, bytes] of [['png', await encodePng(rgba, w, h)], ['webp', await encodeWebpLossless(rgba, w, h)]] as const) {
    const img = await decodeImage(bytes);
    assert.equal(probeImage(bytes).format, kind);
    assert.deepEqual([img.width, img.height, maxDiff(img.data, rgb)], [w, h, 0], kind);
  }
  const { bytes, rgb: gifRgb } = encodeGif(w, h);
  assert.equal(maxDiff((await decodeImage(bytes)).data, gifRgb), 0, 'gif');
});

async function rejects(bytes: Uint8Array, re: RegExp, what: string): Promise<void> {
  await assert.rejects(decodeImage(bytes, { label: 'messages[0].content[1]' }), (e: unknown) => {
    assert.ok(e instanceof DeltaserveError && e.code === 'bad_request', `${what}: ${String(e)}`);
    assert.match(e.message, /^messages\[0\]\.content\[1\]: /, what);
    assert.match(e.message, re, what);
    return true;
  });
}

test('truncated and corrupt images of every format are a bad_request naming the problem', async () => {
  for (const name of Object.keys(EXPECTED.decoded)) {
    const full = new Uint8Array(readFileSync(join(DIR, name)));
    for (const keep of [0.3, 0.6, 0.9]) {
      await rejects(full.subarray(0, Math.floor(full.length * keep)), /truncated|corrupt/, `${name} cut to ${keep}`);
    }
    const garbled = full.slice();
    for (let i = Math.floor(full.length / 3); i < full.length; i += 7) garbled[i] = garbled[i]! ^ 0x5a;
    try {
      await decodeImage(garbled, { label: 'x' }); // damaged data may still decode (lossy codecs resync)
    } catch (e) {
      assert.ok(e instanceof DeltaserveError && /^x: (truncated|corrupt)/.test(e.message), `${name} garbled: ${String(e)}`);
    }
  }
  await rejects(new Uint8Array(0), /empty image data/, 'empty');
  await rejects(new Uint8Array([0x42, 0x4d, 1, 2, 3, 4]), /unsupported image format \(BMP\); supported: JPEG, PNG, WebP, GIF/, 'bmp');
  await rejects(new TextEncoder().encode('<svg xmlns="http://www.w3.org/2000/svg"/>'), /unsupported image format \(SVG\)/, 'svg');
  await rejects(new TextEncoder().encode('hello, not an image'), /unsupported image format; supported/, 'text');
});

test('an image larger than the pixel limit is refused from its header, before decoding', async () => {
  const png = await encodePng(pattern(8, 8, 2), 8, 8);
  await assert.rejects(decodeImage(png, { maxPixels: 63 }), /PNG image of 8×8 = 64 pixels exceeds the limit of 63 pixels/);
  const huge = png.slice();
  new DataView(huge.buffer).setUint32(16, 100_000);
  new DataView(huge.buffer).setUint32(20, 100_000);
  await rejects(huge, /100000×100000 = 10000000000 pixels exceeds the limit of 89478485/, 'bomb header');
});

test('smart resize: Python rounding (half to even), pixel bounds, aspect-ratio limit', () => {
  assert.deepEqual([0.5, 1.5, 2.5, 3.5, 2.4999, 2.5001].map(roundHalfEven), [0, 2, 2, 4, 2, 3]);
  const F = 32, MIN = 65536, MAX = 16777216;
  assert.deepEqual(smartResize(448, 448, F, MIN, MAX), [448, 448]);
  assert.deepEqual(smartResize(80, 400, F, 1024, MAX), [64, 384]); // 2.5 → 2, 12.5 → 12
  assert.deepEqual(smartResize(48, 112, F, 1024, MAX), [64, 128]); // 1.5 → 2, 3.5 → 4
  assert.deepEqual(smartResize(10, 10, F, MIN, MAX), [256, 256]); // below min: scaled up
  assert.deepEqual(smartResize(1000, 700, F, MIN, 200_000), [512, 352]); // above max: floor(h/β/32)·32
  assert.deepEqual(smartResize(30, 3000, F, MIN, MAX), [32, 3008]);
  assert.throws(() => smartResize(10, 2011, F, MIN, MAX), /aspect ratio must be at most 200/);
  for (const [h, w] of [[1, 1], [17, 999], [4000, 3000], [31, 33]] as const) {
    const [rh, rw] = smartResize(h, w, F, MIN, MAX);
    assert.ok(rh % F === 0 && rw % F === 0 && rh * rw >= MIN && rh * rw <= MAX, `${h}×${w} → ${rh}×${rw}`);
  }
});

test('patchify: token order is merge windows row-major, rows are (channel, time, y, x), normalized', () => {
  const cfg = fixtureVisionConfig();
  const [w, h] = [64, 96]; // multiples of 32 within the bounds below: no resize
  const rgb = Uint8Array.from({ length: w * h * 3 }, (_, i) => (i * 37) % 256);
  const pre = { minPixels: 1024, maxPixels: 1 << 20, imageMean: [0.4, 0.5, 0.6] as const, imageStd: [0.2, 0.25, 0.5] as const };
  const out = preprocessImage({ width: w, height: h, data: rgb }, cfg, pre);
  assert.deepEqual(out.grid, { t: 1, h: 6, w: 4 });
  const P = 16, dim = 3 * 2 * P * P;
  assert.equal(out.patches.length, 24 * dim);
  const rng = new Rng(4);
  for (let s = 0; s < 2000; s++) {
    const token = rng.nextU32() % 24, c = rng.nextU32() % 3, t = rng.nextU32() % 2, y = rng.nextU32() % P, x = rng.nextU32() % P;
    // token → window (row-major over 3 × 2 windows) → patch within the 2 × 2 window
    const win = Math.floor(token / 4), within = token % 4;
    const prow = Math.floor(win / 2) * 2 + Math.floor(within / 2), pcol = (win % 2) * 2 + (within % 2);
    const pixel = rgb[((prow * P + y) * w + pcol * P + x) * 3 + c]!;
    const want = (pixel / 255 - pre.imageMean[c]!) / pre.imageStd[c]!;
    const got = out.patches[token * dim + ((c * 2 + t) * P + y) * P + x]!;
    assert.ok(Math.abs(got - want) < 1e-5, `token ${token} c${c} t${t} (${y},${x}): ${got} vs ${want}`);
  }
});
