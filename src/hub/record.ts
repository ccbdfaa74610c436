// What deltaserve took from a GGUF repository, kept beside the hub cache's own layout in
// models--{org}--{name}/deltaserve.json: per commit and quantization, the model's parts and
// the vision projector downloaded with it, so that later runs (and `deltaserve list`) know
// which files belong together without the network.
import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { snapshotDir } from './cache.js';

export interface GgufRecord {
  readonly commit: string;
  /** The quantization as asked (`Q4_K_M`), upper-cased. */
  readonly quant: string;
  /** Snapshot-relative paths of the model file or its split parts, part 1 first. */
  readonly parts: readonly string[];
  /** Snapshot-relative path of the vision projector, or null (none in the repository). */
  readonly mmproj: string | null;
}

const FILE = 'deltaserve.json';

/** Every record of a repository's cache directory ([] when none or unreadable). */
export function readRecords(repoDir: string): GgufRecord[] {
  const path = join(repoDir, FILE);
  if (!existsSync(path)) return [];
  try {
    const json = JSON.parse(readFileSync(path, 'utf8')) as { gguf?: unknown };
    return Array.isArray(json.gguf) ? json.gguf.filter(isRecord) : [];
  } catch {
    return []; // a damaged record only loses the projector's note; the files stay usable
  }
}

function isRecord(x: unknown): x is GgufRecord {
  const r = x as Partial<GgufRecord> | null;
  return typeof r?.commit === 'string' && typeof r.quant === 'string' && Array.isArray(r.parts) &&
    r.parts.every((p) => typeof p === 'string') && (r.mmproj === null || typeof r.mmproj === 'string');
}

/** Add or replace the record of (commit, quant); written to a temporary file, then renamed. */
export function writeRecord(repoDir: string, rec: GgufRecord): void {
  const kept = readRecords(repoDir).filter((r) => !(r.commit === rec.commit && r.quant === rec.quant));
  const path = join(repoDir, FILE);
  writeFileSync(`${path}.tmp`, `${JSON.stringify({ gguf: [...kept, rec] }, null, 1)}\n`);
  renameSync(`${path}.tmp`, path);
}

/** A snapshot-relative path names a vision projector (llama.cpp's `mmproj…gguf`). */
export const isProjectorPath = (p: string): boolean => /mmproj[^/]*\.gguf$/i.test(p);

/** The absolute path of the projector that goes with (commit, quant): the one recorded when
 * deltaserve downloaded it, else (files fetched by another tool: no record) the snapshot's
 * only projector; null when none. `files`: the snapshot's files (relative paths). */
export function recordedProjector(repoDir: string, commit: string, quant: string, files: readonly string[] = []): string | null {
  const rec = readRecords(repoDir).find((r) => r.commit === commit && r.quant === quant.toUpperCase());
  const projectors = files.filter(isProjectorPath);
  const rel = rec ? rec.mmproj : projectors.length === 1 ? projectors[0]! : null;
  return rel ? join(snapshotDir(repoDir, commit), rel) : null;
}
