// Builds the web UI (webui/ → build/webui/): esbuild bundles and minifies the chat page and
// the dashboard (scripts + styles, uPlot included) into content-hashed files under assets/,
// and writes index.html / dashboard.html pointing at them. No inline script or style, no
// CDN: the server serves these files with a strict CSP. Prints the gzipped sizes as JSON.
import { build } from 'esbuild';
import { copyFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { gzipSync } from 'node:zlib';

const root = join(import.meta.dirname ?? new URL('.', import.meta.url).pathname, '..');
const src = join(root, 'webui');
const out = join(root, 'build', 'webui');
const assets = join(out, 'assets');
rmSync(out, { recursive: true, force: true });
mkdirSync(assets, { recursive: true });

// Each page's script imports its stylesheets; esbuild writes them as NAME-HASH.css beside it.
const entries = {
  chat: join(src, 'src', 'chat', 'main.ts'),
  dashboard: join(src, 'src', 'dashboard', 'main.ts'),
};

/** name.ext → the hashed file name written for it. */
const names = {};
for (const [name, file] of Object.entries(entries)) {
  const result = await build({
    entryPoints: [{ in: file, out: name }],
    bundle: true, minify: true, format: 'iife', target: ['es2020', 'chrome100', 'firefox100', 'safari15'],
    outdir: assets, entryNames: '[name]-[hash]', metafile: true, legalComments: 'eof', logLevel: 'warning',
  });
  for (const file of Object.keys(result.metafile.outputs)) {
    const ext = file.endsWith('.css') ? 'css' : 'js';
    if (names[`${name}.${ext}`]) throw new Error(`build-webui: two ${ext} outputs for ${name}`);
    names[`${name}.${ext}`] = basename(file);
  }
}

for (const page of ['index.html', 'dashboard.html']) {
  const html = readFileSync(join(src, page), 'utf8').replace(/\{\{([\w.]+)\}\}/g, (_, key) => {
    if (!names[key]) throw new Error(`build-webui: ${page} refers to {{${key}}}, which the build did not produce`);
    return names[key];
  });
  writeFileSync(join(out, page), html);
}
copyFileSync(join(src, 'favicon.svg'), join(assets, 'favicon.svg'));

const sizes = Object.fromEntries(Object.values(names).map((f) => {
  const b = readFileSync(join(assets, f));
  return [f, { bytes: b.length, gzip: gzipSync(b, { level: 9 }).length }];
}));
const total = Object.values(sizes).reduce((a, s) => a + s.gzip, 0);
console.log(JSON.stringify({ webui: out, gzip_total_bytes: total, files: sizes }));
