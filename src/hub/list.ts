// What the Hugging Face cache holds, as names `--model` takes: one entry per snapshot of a
// safetensors repository (`org/name`, `org/name@rev` for other revisions) and one per GGUF
// quantization in a snapshot (`org/name:Q4_K_M`), each with its files and their size on
// disk. Read from the cache layout only (cache.ts); no network.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { isProjectorPath, readRecords } from './record.js';
import { listFiles } from './resolve.js';

export interface CachedFile {
  readonly path: string;
  readonly bytes: number;
}

export interface CachedModel {
  /** What to pass to --model / Engine.load / pull. */
  readonly name: string;
  readonly repo: string;
  readonly commit: string;
  readonly format: 'safetensors' | 'gguf';
  /** The GGUF quantization (upper-case), null for safetensors. */
  readonly quant: string | null;
  /** The model's files (a GGUF's split parts; a safetensors repository's every file). */
  readonly files: readonly CachedFile[];
  /** A GGUF's vision projector, when recorded or present beside it. */
  readonly mmproj: CachedFile | null;
  /** Bytes of files and projector. */
  readonly bytes: number;
  /** The snapshot directory. */
  readonly dir: string;
}

const QUANT_RE = /(?:^|[-_./])(I?Q\d(?:_[A-Z0-9]+)*|BF16|F16|F32|MXFP4(?:_MOE)?)(?=[-./]|$)/gi;
const SPLIT_RE = /-\d{5}-of-\d{5}\.gguf$/i;

/** The quantization tag a GGUF path carries (the last one in the path, upper-case), or
 * null: `Qwen3.5-4B-Q4_K_M.gguf` → Q4_K_M, `BF16/x-00001-of-00002.gguf` → BF16. */
export function quantTagOf(path: string): string | null {
  const bare = path.replace(SPLIT_RE, '').replace(/\.gguf$/i, '');
  const tags = [...bare.matchAll(QUANT_RE)].map((m) => m[1]!.toUpperCase());
  return tags[tags.length - 1] ?? null;
}

function fileSize(dir: string, path: string): number {
  try {
    return statSync(join(dir, path)).size;
  } catch {
    return 0;
  }
}

/** The revision names pointing at each commit (refs/…), e.g. main → abc…. */
function refsByCommit(repoDir: string): Map<string, string[]> {
  const out = new Map<string, string[]>();
  const refs = join(repoDir, 'refs');
  if (!existsSync(refs)) return out;
  for (const name of listFiles(refs)) {
    const commit = readFileSync(join(refs, name), 'utf8').trim();
    out.set(commit, [...(out.get(commit) ?? []), name]);
  }
  return out;
}

/** `org/name` for the snapshot main points at, `org/name@ref` for another ref's,
 * `org/name@commit` for an unreferenced one. */
function nameOf(repo: string, commit: string, refs: readonly string[]): string {
  if (refs.includes('main')) return repo;
  return `${repo}@${refs[0] ?? commit}`;
}

function ggufEntries(repo: string, repoDir: string, commit: string, base: string, dir: string, paths: readonly string[]): CachedModel[] {
  const records = readRecords(repoDir).filter((r) => r.commit === commit);
  const projectors = paths.filter(isProjectorPath);
  const byQuant = new Map<string, string[]>();
  for (const p of paths) {
    if (!/\.gguf$/i.test(p) || projectors.includes(p)) continue;
    const quant = quantTagOf(p) ?? 'GGUF';
    byQuant.set(quant, [...(byQuant.get(quant) ?? []), p]);
  }
  return [...byQuant].sort(([a], [b]) => a.localeCompare(b)).map(([quant, parts]) => {
    const rec = records.find((r) => r.parts.some((x) => parts.includes(x)));
    const projector = rec ? rec.mmproj : projectors.length === 1 ? projectors[0]! : null;
    const files = parts.sort().map((path) => ({ path, bytes: fileSize(dir, path) }));
    const mmproj = projector && existsSync(join(dir, projector)) ? { path: projector, bytes: fileSize(dir, projector) } : null;
    return {
      name: `${base}:${quant}`, repo, commit, format: 'gguf', quant, files, mmproj,
      bytes: files.reduce((n, f) => n + f.bytes, 0) + (mmproj?.bytes ?? 0), dir,
    };
  });
}

/** Every model in the cache at `cacheDir` (sorted by name). */
export function listCache(cacheDir: string): CachedModel[] {
  if (!existsSync(cacheDir)) return [];
  const out: CachedModel[] = [];
  for (const entry of readdirSync(cacheDir).sort()) {
    const m = /^models--([^-].*?)--(.+)$/.exec(entry);
    const snapshots = join(cacheDir, entry, 'snapshots');
    if (!m || !existsSync(snapshots)) continue;
    const repo = `${m[1]}/${m[2]}`;
    const repoDir = join(cacheDir, entry);
    const refs = refsByCommit(repoDir);
    for (const commit of readdirSync(snapshots).sort()) {
      const dir = join(snapshots, commit);
      const paths = listFiles(dir);
      const base = nameOf(repo, commit, refs.get(commit) ?? []);
      if (paths.some((p) => /\.gguf$/i.test(p))) out.push(...ggufEntries(repo, repoDir, commit, base, dir, paths));
      else if (paths.some((p) => p.endsWith('.safetensors'))) {
        const files = paths.sort().map((path) => ({ path, bytes: fileSize(dir, path) }));
        out.push({ name: base, repo, commit, format: 'safetensors', quant: null, files, mmproj: null, bytes: files.reduce((n, f) => n + f.bytes, 0), dir });
      }
    }
  }
  return out.sort((a, b) => a.name.localeCompare(b.name));
}
