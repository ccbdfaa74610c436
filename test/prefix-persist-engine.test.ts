// --prefix-cache-dir with every model source (a GGUF file once failed with
// ENOTDIR in modelIdentity): a GGUF file, a hub name (safetensors snapshot and a GGUF
// quant), each restarting with a hit that answers like the first run; two different GGUF
// files never share a cache. And saves that run between steps of busy requests (with
// evictions) only ever leave a valid file.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Engine, type EngineOptions } from '../src/engine/engine.js';
import { sharedPath, TINY_THINK } from './paths.js';
import { KERNELS } from './server-helpers.js';

const ROOT = mkdtempSync(join(tmpdir(), 'ds-persist-engine-'));
after(() => rmSync(ROOT, { recursive: true, force: true }));
let dirs = 0;
const freshDir = (): string => join(ROOT, `cache${dirs++}`);

const values = (n: number, tag: string): string => Array.from({ length: n }, (_, i) => `- ${tag}${i}=${(i * 37) % 1000}`).join('\n');
const chat = (tag: string): { messages: { role: string; content: string }[]; maxTokens: number } =>
  ({ messages: [{ role: 'user', content: `Remember:\n${values(40, tag)}\nWhat is ${tag}3?` }], maxTokens: 6 });

/** Run one chat, close (saving), restart on the same directory and run it again: the
 * second run loads the file, hits, and answers the same. Returns the second engine's logs. */
async function restartHits(model: string, what: string): Promise<void> {
  const dir = freshDir();
  const logs: string[] = [];
  const opts: EngineOptions = { model, kernels: KERNELS, maxRunning: 2, prefixCacheDir: dir, prefixCacheSaveMs: 0, log: (m) => logs.push(m) };
  const a = await Engine.load(opts);
  const first = await a.complete(chat('q'));
  await a.close();
  const b = await Engine.load(opts);
  const disk = b.stats().prefixCache!.disk!;
  assert.ok(disk.loads === 1 && disk.loadedSnapshots > 0, `${what}: ${JSON.stringify(disk)} ${logs.join('; ')}`);
  const again = await b.complete(chat('q'));
  assert.ok(again.usage.cachedTokens >= 64, `${what}: cached ${again.usage.cachedTokens}`);
  assert.deepEqual(again.outputIds, first.outputIds, `${what}: same answer after the restart`);
  b.checkIntegrity();
  await b.close();
}

test('serve --model FILE.gguf --prefix-cache-dir D: saves, restarts with a hit; another GGUF file does not reuse it', async () => {
  const q8 = sharedPath('models', 'gguf', 'tiny-think-Q8_0.gguf');
  await restartHits(q8, 'Q8_0 GGUF');
  const dir = freshDir();
  const logs: string[] = [];
  const base = { kernels: KERNELS, maxRunning: 2, prefixCacheDir: dir, log: (m: string) => logs.push(m) } as const;
  const a = await Engine.load({ ...base, model: q8 });
  await a.complete(chat('w'));
  await a.close();
  const b = await Engine.load({ ...base, model: sharedPath('models', 'gguf', 'tiny-think-Q6_K.gguf') });
  assert.equal(b.stats().prefixCache!.disk!.rejected, 1);
  assert.match(logs.join('\n'), /ignoring saved cache: .*written for another model/);
  await b.close();
});

test('a hub name (safetensors snapshot, and a GGUF quant) with --prefix-cache-dir', async () => {
  const hub = join(ROOT, 'hub');
  const commit = 'c'.repeat(40);
  const repo = (name: string, files: [string, string][]): void => {
    const r = join(hub, `models--TestOrg--${name}`);
    mkdirSync(join(r, 'snapshots', commit), { recursive: true });
    mkdirSync(join(r, 'refs'));
    writeFileSync(join(r, 'refs', 'main'), commit);
    for (const [file, target] of files) symlinkSync(target, join(r, 'snapshots', commit, file));
  };
  repo('Tiny', ['config.json', 'generation_config.json', 'tokenizer.json', 'tokenizer_config.json', 'model.safetensors'].map((f) => [f, join(TINY_THINK(), f)]));
  repo('Tiny-GGUF', [['tiny-think-Q8_0.gguf', sharedPath('models', 'gguf', 'tiny-think-Q8_0.gguf')]]);
  const saved = { cache: process.env['HF_HUB_CACHE'], offline: process.env['HF_HUB_OFFLINE'] };
  process.env['HF_HUB_CACHE'] = hub;
  process.env['HF_HUB_OFFLINE'] = '1';
  try {
    await restartHits('TestOrg/Tiny', 'hub safetensors');
    await restartHits('TestOrg/Tiny-GGUF:q8_0', 'hub GGUF');
  } finally {
    for (const [k, v] of [['HF_HUB_CACHE', saved.cache], ['HF_HUB_OFFLINE', saved.offline]] as const) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
});

test('periodic saves between the steps of busy requests, with evictions, leave only valid files', async () => {
  const dir = freshDir();
  const logs: string[] = [];
  const opts: EngineOptions = {
    model: TINY_THINK(), kernels: KERNELS, maxRunning: 2, cacheStateSlots: 3, prefixCacheDir: dir, prefixCacheSaveMs: 1, log: (m) => logs.push(m),
  };
  const e = await Engine.load(opts);
  for (let round = 0; round < 4; round++) {
    await Promise.all(['a', 'b', 'c'].map((t) => e.complete(chat(`${t}${round}`))));
    await new Promise((r) => setTimeout(r, 5)); // idle: a save starts, the next round runs during it
  }
  const stats = e.stats().prefixCache!;
  assert.ok(stats.evictions > 0, 'the cache evicted snapshots');
  assert.ok(stats.disk!.saves >= 1, `saved while running: ${JSON.stringify(stats.disk)}`);
  assert.equal(stats.disk!.saveErrors, 0, logs.join('\n'));
  e.checkIntegrity();
  await e.close();
  const f = await Engine.load({ ...opts, log: (m) => logs.push(m) });
  const disk = f.stats().prefixCache!.disk!;
  assert.ok(disk.loads === 1 && disk.rejected === 0 && disk.loadedSnapshots > 0, `${JSON.stringify(disk)} ${logs.join('; ')}`);
  f.checkIntegrity();
  await f.close();
});
