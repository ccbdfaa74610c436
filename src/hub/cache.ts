// The Hugging Face hub cache layout, shared with other tools (huggingface_hub, transformers):
//   $HF_HUB_CACHE (default $HF_HOME/hub, HF_HOME default ~/.cache/huggingface)
//     models--{org}--{name}/
//       refs/{revision}            the commit a branch/tag name points to (text)
//       blobs/{etag}               file contents (etag = sha256 for LFS files, git sha1 else)
//       snapshots/{commit}/{path}  symlinks to ../../blobs/{etag} (a copy where symlinks fail)
// Repo references: `org/name`, `org/name@revision`, `org/name:QUANT` (a GGUF repo: the
// .gguf file matching QUANT), `org/name@revision:QUANT`.
import { existsSync, lstatSync, mkdirSync, readFileSync, copyFileSync, symlinkSync, rmSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join, relative } from 'node:path';

export interface RepoRef {
  readonly org: string;
  readonly name: string;
  readonly revision: string; // default 'main'
  /** GGUF quantization to pick (e.g. 'Q4_K_M'), or null for a safetensors repo. */
  readonly quant: string | null;
}

const PART = '[A-Za-z0-9][A-Za-z0-9._-]{0,95}';
const REPO_RE = new RegExp(`^(${PART})/(${PART})(?:@([A-Za-z0-9._/-]{1,200}))?(?::([A-Za-z0-9_.-]{1,40}))?$`);

/** Parse `org/name[@rev][:QUANT]`, or null when `spec` is not of that form. */
export function parseRepoRef(spec: string): RepoRef | null {
  const m = REPO_RE.exec(spec);
  if (!m || m[2]!.endsWith('.gguf') || spec.includes('..')) return null;
  return { org: m[1]!, name: m[2]!, revision: m[3] ?? 'main', quant: m[4] ?? null };
}

export function repoId(r: RepoRef): string {
  return `${r.org}/${r.name}`;
}

/** `org/name[@revision][:QUANT]` as written (the default revision main left out). */
export function describeRef(r: RepoRef): string {
  return `${repoId(r)}${r.revision === 'main' ? '' : `@${r.revision}`}${r.quant ? `:${r.quant}` : ''}`;
}

/** The hub cache directory from the environment (HF_HUB_CACHE, else HF_HOME/hub). */
export function hubCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env['HF_HUB_CACHE']) return env['HF_HUB_CACHE'];
  const home = env['HF_HOME'] ?? join(env['XDG_CACHE_HOME'] ?? join(homedir(), '.cache'), 'huggingface');
  return join(home, 'hub');
}

export function repoCacheDir(cache: string, r: RepoRef): string {
  return join(cache, `models--${r.org}--${r.name}`);
}

const COMMIT_RE = /^[0-9a-f]{40}$/;

/** The commit a revision resolves to in the cache (a commit hash is itself), or null. */
export function cachedCommit(repoDir: string, revision: string): string | null {
  if (COMMIT_RE.test(revision)) return revision;
  const ref = join(repoDir, 'refs', revision);
  if (!existsSync(ref)) return null;
  const commit = readFileSync(ref, 'utf8').trim();
  return COMMIT_RE.test(commit) ? commit : null;
}

export function writeRef(repoDir: string, revision: string, commit: string): void {
  if (revision === commit) return;
  const ref = join(repoDir, 'refs', revision);
  mkdirSync(dirname(ref), { recursive: true });
  writeFileSync(ref, commit);
}

export function snapshotDir(repoDir: string, commit: string): string {
  return join(repoDir, 'snapshots', commit);
}

/** Link snapshots/{commit}/{path} to blobs/{etag} (relative symlink, or a copy). */
export function linkSnapshotFile(repoDir: string, commit: string, path: string, etag: string): string {
  const dest = join(snapshotDir(repoDir, commit), path);
  const blob = join(repoDir, 'blobs', etag);
  mkdirSync(dirname(dest), { recursive: true });
  if (existsSync(dest) || isBrokenLink(dest)) rmSync(dest, { force: true });
  try {
    symlinkSync(relative(dirname(dest), blob), dest);
  } catch {
    copyFileSync(blob, dest);
  }
  return dest;
}

function isBrokenLink(p: string): boolean {
  try {
    return lstatSync(p).isSymbolicLink();
  } catch {
    return false;
  }
}
