// Fast tier. Every relative link and #anchor in README.md and docs/*.md resolves (anchors by
// GitHub's heading slugs), and the README stays one screenful of reading (≤ 300 lines).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { REPO_ROOT } from './paths.js';

const README_MAX_LINES = 300;

/**
 * Lines outside fenced code blocks, with inline code spans blanked (links inside code are text).
 * A code span may run over several lines of one paragraph, never over a blank line.
 */
function proseLines(markdown: string): string[] {
  const out = outsideFences(markdown).map((line) => line ?? '');
  const blanked = out.join('\n').replace(/(`+)(?:(?!\n[ \t]*\n)[\s\S])*?\1/g, (m) => m.replace(/[^\n]/g, ' '));
  return blanked.split('\n');
}

/** Each line of a document, or null where it is inside a fenced code block (fences included). */
function outsideFences(markdown: string): (string | null)[] {
  const out: (string | null)[] = [];
  let fence: string | null = null;
  for (const line of markdown.split('\n')) {
    const opener = /^\s*(`{3,}|~{3,})/.exec(line);
    if (opener) {
      const mark = opener[1] ?? '';
      if (fence === null) fence = mark;
      else if (mark.startsWith(fence)) fence = null;
      out.push(null);
      continue;
    }
    out.push(fence === null ? line : null);
  }
  return out;
}

/**
 * GitHub's heading anchor: the rendered text lower-cased, every character that is not a letter,
 * digit, space, hyphen or underscore dropped, spaces turned into hyphens; a repeated slug gets
 * -1, -2, … in document order.
 */
export function githubSlug(headingText: string): string {
  const rendered = headingText
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1') // links and images keep their text
    .replace(/<[^>]+>/g, '') // inline HTML
    .replace(/`/g, '');
  return rendered.trim().toLowerCase().replace(/[^\p{L}\p{N}\p{M} _-]/gu, '').replace(/ /g, '-');
}

/** Every anchor a document defines: heading slugs (with GitHub's -N suffixes) and HTML ids. */
export function anchorsOf(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const line of outsideFences(markdown)) {
    if (line === null) continue;
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (heading) {
      const base = githubSlug(heading[1] ?? '');
      const n = seen.get(base) ?? 0;
      seen.set(base, n + 1);
      anchors.add(n === 0 ? base : `${base}-${n}`);
    }
    for (const m of line.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) anchors.add(m[1] ?? '');
  }
  return anchors;
}

/** Relative link targets of a document: [text](target) and <img src="target">, without titles. */
export function linkTargets(markdown: string): { line: number; target: string }[] {
  const found: { line: number; target: string }[] = [];
  proseLines(markdown).forEach((text, i) => {
    for (const m of text.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) found.push({ line: i + 1, target: m[1] ?? '' });
    for (const m of text.matchAll(/<img\s[^>]*src="([^"]+)"/g)) found.push({ line: i + 1, target: m[1] ?? '' });
  });
  return found.filter(({ target }) => !/^[a-z][a-z0-9+.-]*:/i.test(target)); // http:, https:, mailto: are not checked
}

/** Broken links of the documents in `files` (paths under root), as "file:line: target (why)". */
export function brokenLinks(root: string, files: string[]): string[] {
  const anchorCache = new Map<string, Set<string>>();
  const anchors = (file: string): Set<string> => {
    let a = anchorCache.get(file);
    if (!a) anchorCache.set(file, (a = anchorsOf(readFileSync(file, 'utf8'))));
    return a;
  };
  const broken: string[] = [];
  for (const rel of files) {
    const file = join(root, rel);
    for (const { line, target } of linkTargets(readFileSync(file, 'utf8'))) {
      const hashAt = target.indexOf('#');
      const pathPart = decodeURIComponent(hashAt >= 0 ? target.slice(0, hashAt) : target);
      const anchor = hashAt >= 0 ? decodeURIComponent(target.slice(hashAt + 1)) : null;
      const dest = pathPart === '' ? file : resolve(dirname(file), pathPart);
      const where = `${rel}:${line}: ${target}`;
      if (relative(root, dest).startsWith('..')) broken.push(`${where} (outside the repository)`);
      else if (!existsSync(dest)) broken.push(`${where} (no such file)`);
      else if (anchor !== null && anchor !== '') {
        if (!dest.endsWith('.md') || statSync(dest).isDirectory()) broken.push(`${where} (anchor into a file that is not markdown)`);
        else if (!anchors(dest).has(anchor)) broken.push(`${where} (no heading or id "${anchor}" in ${relative(root, dest)})`);
      }
    }
  }
  return broken;
}

const docFiles = (): string[] => [
  'README.md',
  ...readdirSync(join(REPO_ROOT, 'docs')).filter((n) => n.endsWith('.md')).sort().map((n) => `docs/${n}`),
];

test('GitHub slugs: code, punctuation and repeats', () => {
  assert.equal(githubSlug('`deltaserve serve`'), 'deltaserve-serve');
  assert.equal(githubSlug('Agent APIs: stateful Responses, thinking, streamed tool calls'), 'agent-apis-stateful-responses-thinking-streamed-tool-calls');
  assert.equal(githubSlug('`--quantize q8_0|q4_k`'), '--quantize-q8_0q4_k');
  assert.equal(githubSlug("Where the issue's targets stand"), 'where-the-issues-targets-stand');
  assert.equal(githubSlug('GPU (WebGPU)'), 'gpu-webgpu');
  assert.deepEqual([...anchorsOf('# A\n## A\n```\n# A\n```\n### A\n<a id="x"></a>\n')], ['a', 'a-1', 'a-2', 'x']);
});

test('the checker reports a missing file, a missing anchor and a link outside the repository', () => {
  const root = mkdtempSync(join(tmpdir(), 'docs-links-'));
  try {
    mkdirSync(join(root, 'docs'));
    writeFileSync(join(root, 'docs', 'a.md'), '# A\n## Two words\n');
    writeFileSync(join(root, 'README.md'), [
      '# R', '## Here', 'fine: [a](docs/a.md#two-words) [self](#here) [file](docs/a.md) `[code](#nope)`', '```', '[fenced](#nope)', '```',
      '[gone](docs/missing.md) [bad anchor](docs/a.md#three-words) [up](../outside.md) [self](#there)',
    ].join('\n'));
    assert.deepEqual(brokenLinks(root, ['README.md', 'docs/a.md']), [
      'README.md:7: docs/missing.md (no such file)',
      'README.md:7: docs/a.md#three-words (no heading or id "three-words" in docs/a.md)',
      'README.md:7: ../outside.md (outside the repository)',
      'README.md:7: #there (no heading or id "there" in README.md)',
    ]);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test('every relative link and anchor in README.md and docs/*.md resolves', () => {
  const files = docFiles();
  assert.ok(files.includes('docs/ARCHITECTURE.md') && files.length >= 10, `docs found: ${files.join(', ')}`);
  assert.deepEqual(brokenLinks(REPO_ROOT, files), []);
});

test('every doc in docs/ is linked from README.md', () => {
  const linked = new Set(linkTargets(readFileSync(join(REPO_ROOT, 'README.md'), 'utf8')).map(({ target }) => target.split('#')[0]));
  const unlinked = docFiles().filter((f) => f !== 'README.md' && !linked.has(f));
  assert.deepEqual(unlinked, []);
});

test(`README.md is at most ${README_MAX_LINES} lines`, () => {
  const lines = readFileSync(join(REPO_ROOT, 'README.md'), 'utf8').replace(/\n$/, '').split('\n').length;
  assert.ok(lines <= README_MAX_LINES, `README.md has ${lines} lines`);
});
