// Runs every compiled test file (dist/test/**/*.test.js) with node's test runner.
// Usage: node scripts/run-tests.mjs [filter-substring]
import { readdirSync, statSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';

const root = join(import.meta.dirname ?? new URL('.', import.meta.url).pathname, '..');
const dir = join(root, 'dist', 'test');
if (!existsSync(dir)) {
  console.error('dist/test is missing: run `npm run build` first');
  process.exit(1);
}
function walk(d) {
  return readdirSync(d).flatMap((n) => {
    const p = join(d, n);
    return statSync(p).isDirectory() ? walk(p) : p.endsWith('.test.js') ? [p] : [];
  });
}
const filter = process.argv[2];
const files = walk(dir).filter((f) => !filter || f.includes(filter)).sort();
if (files.length === 0) {
  console.error('no test files found');
  process.exit(1);
}
const r = spawnSync(process.execPath, ['--test', '--test-reporter=spec', ...files], { stdio: 'inherit', cwd: root });
process.exit(r.status ?? 1);
