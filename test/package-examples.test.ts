// The README's library and client examples, verbatim, from the installed package: `npm
// pack`, an offline install into a scratch project, then each code block marked
// `<!-- example: NAME -->` in the README's Library section runs as NAME — JavaScript with
// node, TypeScript through tsc with `skipLibCheck: false` and no @webgpu/types (so the
// published declarations must stand on their own), the client against the installed
// `npx deltaserve serve`. Also from the installed package: the `exports` entry points
// (`deltaserve/server`, `deltaserve/package.json`) resolve and type-check, and a local model
// path that does not exist is an error naming it, never a hub lookup.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { installInto, pack, run, serveInstalled, userEnv } from './package-helpers.js';
import { REPO_ROOT } from './paths.js';

/** The README's code blocks marked `<!-- example: NAME -->`, by NAME. */
function readmeExamples(): Map<string, string> {
  const readme = readFileSync(join(REPO_ROOT, 'README.md'), 'utf8');
  const out = new Map<string, string>();
  for (const m of readme.matchAll(/^<!-- example: ([\w.-]+) -->\n```\w*\n([\s\S]*?)^```$/gm)) {
    assert.ok(!out.has(m[1]!), `README example ${m[1]} is marked once`);
    out.set(m[1]!, m[2]!);
  }
  return out;
}

/** Not from the README: the other entry points of `exports`, typed. */
const ENTRY_POINTS_TS = `import { createRequire } from 'node:module';
import { BUILTIN_MODEL, Engine } from 'deltaserve';
import { startServer, type RunningServer } from 'deltaserve/server';

const pkg = createRequire(import.meta.url)('deltaserve/package.json') as { name: string; version: string };
const engine = await Engine.load({ model: BUILTIN_MODEL });
const server: RunningServer = await startServer(engine, { port: 0 });
const health = await fetch(\`http://127.0.0.1:\${server.port}/health\`);
console.log(JSON.stringify({ name: pkg.name, version: pkg.version, builtin: BUILTIN_MODEL, health: health.status }));
await server.close();
await engine.close();
`;

/** Local paths that do not exist: one error naming the path, no network (HF_ENDPOINT is a
 * closed port: a lookup would say "cannot reach"). */
const MISSING_PATHS_MJS = `import { Engine } from 'deltaserve';
for (const model of ['models/tiny-think', './nowhere/model', '/nonexistent/model.gguf']) {
  try {
    await Engine.load({ model });
    console.log('loaded', model);
  } catch (e) {
    console.log(model, '=>', e.message);
  }
}
`;

const TSCONFIG = {
  compilerOptions: {
    target: 'ES2022', lib: ['ES2022'], types: ['node'], module: 'NodeNext', moduleResolution: 'NodeNext',
    strict: true, skipLibCheck: false, outDir: 'out',
  },
  files: ['library.ts', 'entry-points.ts'],
};

test('the README library and client examples run verbatim from the installed tarball (JS and TS)', { timeout: 400_000 }, async (t) => {
  const examples = readmeExamples();
  assert.deepEqual([...examples.keys()].sort(), ['client.mjs', 'library.mjs', 'library.ts'], 'the README marks these examples');
  const dir = mkdtempSync(join(tmpdir(), 'ds-examples-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const app = join(dir, 'app');
  installInto(app, pack(dir).tarball, ['openai', '@types/node', 'undici-types']);
  for (const [name, code] of examples) writeFileSync(join(app, name), code);
  writeFileSync(join(app, 'entry-points.ts'), ENTRY_POINTS_TS);
  writeFileSync(join(app, 'missing-paths.mjs'), MISSING_PATHS_MJS);
  writeFileSync(join(app, 'tsconfig.json'), JSON.stringify(TSCONFIG));

  await t.test('library.mjs', () => {
    const r = run(process.execPath, ['library.mjs'], app);
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /\n\[(stop|length): \d+ tokens\]\n$/, r.stdout);
  });

  await t.test('library.ts and the entry points compile with skipLibCheck false, without @webgpu/types, and run', () => {
    const tsc = run(process.execPath, [join(REPO_ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', '.'], app);
    assert.equal(tsc.status, 0, `tsc:\n${tsc.stdout}${tsc.stderr}`);
    const lib = run(process.execPath, [join('out', 'library.js')], app);
    assert.equal(lib.status, 0, lib.stderr);
    assert.match(lib.stdout, /^".*" \{ promptTokens: \d+, completionTokens: (1[0-6]|[1-9]), cachedTokens: \d+ \}\n$/s, lib.stdout);
    const entry = run(process.execPath, [join('out', 'entry-points.js')], app);
    assert.equal(entry.status, 0, entry.stderr);
    const info = JSON.parse(entry.stdout) as { name: string; version: string; builtin: string; health: number };
    const ours = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { version: string };
    assert.deepEqual(info, { name: 'deltaserve', version: ours.version, builtin: join(app, 'node_modules', 'deltaserve', 'models', 'tiny-think'), health: 200 });
  });

  await t.test('a local path that does not exist is an error naming it, without a hub lookup', () => {
    const r = run(process.execPath, ['missing-paths.mjs'], app, userEnv({ HF_ENDPOINT: 'http://127.0.0.1:9', HF_HOME: join(dir, 'hf') }));
    assert.equal(r.status, 0, r.stderr);
    const lines = r.stdout.trim().split('\n');
    assert.equal(lines.length, 3, r.stdout);
    assert.match(lines[0]!, /^models\/tiny-think => model directory not found: .*\/app\/models\/tiny-think \("models\/tiny-think" from .*\) \(the built-in model: leave the model out, or pass BUILTIN_MODEL/);
    assert.match(lines[1]!, /^\.\/nowhere\/model => model directory not found: .*\/app\/nowhere\/model/);
    assert.match(lines[2]!, /^\/nonexistent\/model\.gguf => model file not found: \/nonexistent\/model\.gguf$/);
    assert.doesNotMatch(r.stdout, /cannot reach|hub|HF_/, 'no hub lookup');
  });

  await t.test('client.mjs (openai) against the installed npx deltaserve serve', async () => {
    const server = await serveInstalled(app);
    try {
      const r = run(process.execPath, ['client.mjs'], app, userEnv({ OPENAI_BASE_URL: `${server.url}/v1` }));
      assert.equal(r.status, 0, r.stderr);
      assert.match(r.stdout, /\S/, 'the streamed answer is printed');
    } finally {
      server.signal('SIGTERM');
      await server.exited;
    }
  });
});
