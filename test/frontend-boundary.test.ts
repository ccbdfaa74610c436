// The layers around the prompt frontend, read off the sources: the server and the CLI see
// the engine through `engine.info` and never reach into `engine.model` (issue #46: "git grep
// 'engine\.model' src/server src/cli finds nothing"), and the frontend sits below the engine
// (it imports nothing from src/engine or src/model).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { REPO_ROOT } from './paths.js';

function sources(dir: string): string[] {
  return readdirSync(join(REPO_ROOT, dir), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts')).map((f) => join(REPO_ROOT, dir, f));
}

/** `path:line: text` of every line matching `re` in the files. */
function hits(files: readonly string[], re: RegExp): string[] {
  return files.flatMap((f) => readFileSync(f, 'utf8').split('\n').flatMap((line, i) => (re.test(line) ? [`${relative(REPO_ROOT, f)}:${i + 1}: ${line.trim()}`] : [])));
}

test('src/server and src/cli never read engine.model (they read engine.info)', () => {
  const files = [...sources('src/server'), ...sources('src/cli')];
  assert.ok(files.length > 40, `scanned ${files.length} files`);
  assert.deepEqual(hits(files, /engine\.model\b/), []);
  // the check itself sees what it looks for
  assert.equal(hits([join(REPO_ROOT, 'test', 'frontend-boundary.test.ts')], /engine\.model\b/).length > 0, true);
});

test('src/frontend imports nothing from src/engine or src/model', () => {
  const files = sources('src/frontend');
  assert.ok(files.length >= 8, `scanned ${files.length} files`);
  assert.deepEqual(hits(files, /from '\.\.\/(engine|model)\//), []);
});
