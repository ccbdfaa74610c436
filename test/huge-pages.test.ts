// Transparent huge pages: the setting and this process's huge-page memory are read and
// reported (bench JSON), and the operator gets a hint only when the CPU weights are on 4 KB pages.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { HINT_MIN_WEIGHT_BYTES, hugePageHint, hugePageStatus, parseAnonHugeMb, parseThpSetting, THP_SETTING_FILE } from '../src/util/huge-pages.js';
import { REPO_ROOT } from './paths.js';

test('the THP mode is the bracketed word of the kernel setting', () => {
  assert.equal(parseThpSetting('always [madvise] never\n'), 'madvise');
  assert.equal(parseThpSetting('[always] madvise never\n'), 'always');
  assert.equal(parseThpSetting('always madvise [never]'), 'never');
  assert.equal(parseThpSetting('always madvise never'), null);
});

test('AnonHugePages of smaps_rollup in MB', () => {
  const rollup = 'Rss:             1019936 kB\nAnonymous:        903424 kB\nAnonHugePages:    868352 kB\nShmemPmdMapped:        0 kB\n';
  assert.equal(parseAnonHugeMb(rollup), 848);
  assert.equal(parseAnonHugeMb('Rss: 12 kB\nShmemPmdMapped: 0 kB\n'), null);
  assert.equal(parseAnonHugeMb('AnonHugePages:         0 kB\n'), 0);
});

test('the hint names the mode and the fix, only for CPU kernels on 4 KB pages and large weights', () => {
  const big = HINT_MIN_WEIGHT_BYTES;
  const hint = hugePageHint({ thp: 'madvise', anonHugeMb: 0 }, 'wasm', big);
  assert.ok(hint?.includes('"madvise"') && hint.includes(`echo always > ${THP_SETTING_FILE}`), String(hint));
  assert.match(String(hugePageHint({ thp: 'never', anonHugeMb: 0 }, 'ref', big)), /"never"/);
  assert.equal(hugePageHint({ thp: 'always', anonHugeMb: 900 }, 'wasm', big), null);
  assert.equal(hugePageHint({ thp: 'madvise', anonHugeMb: 0 }, 'webgpu', big), null);
  assert.equal(hugePageHint({ thp: null, anonHugeMb: null }, 'wasm', big), null);
  assert.equal(hugePageHint({ thp: 'madvise', anonHugeMb: 0 }, 'wasm', big - 1), null, 'the built-in tiny model gets no hint');
});

test('the status read here agrees with the files, and bench reports it', () => {
  const s = hugePageStatus();
  if (process.platform === 'linux') {
    assert.equal(s.thp, parseThpSetting(readFileSync(THP_SETTING_FILE, 'utf8')));
    assert.ok(s.anonHugeMb !== null && s.anonHugeMb >= 0);
  } else {
    assert.deepEqual(s, { thp: null, anonHugeMb: null });
  }
  const r = spawnSync(process.execPath, [join(REPO_ROOT, 'dist', 'src', 'cli', 'main.js'), 'bench', '--mode', 'decode',
    '--gen-tokens', '2', '--prompt-tokens', '4', '--repeat', '1', '--threads', '1', '--json'], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  const out = JSON.parse(r.stdout) as Record<string, unknown>;
  assert.equal(out['transparent_huge_pages'], s.thp);
  const mb = out['anon_huge_pages_mb'];
  assert.ok(s.anonHugeMb === null ? mb === null : typeof mb === 'number' && mb >= 0, String(mb));
});
