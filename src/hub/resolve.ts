// `--model org/name[@revision][:QUANT]`: a model by name. An existing path is used as is;
// otherwise the Hugging Face cache is searched (offline-safe), and if the snapshot is not
// complete there the files are downloaded from the hub into that same cache layout, so
// other tools share them. Offline (HF_HUB_OFFLINE=1, or the hub unreachable) the error
// names the missing file and where it looked.
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { basename, dirname, isAbsolute, join, relative, resolve } from 'node:path';
import { fmtBytes } from '../util/bytes.js';
import { BUILTIN_MODEL_NAME } from './builtin.js';
import { DeltaserveError } from '../util/errors.js';
import {
  type RepoRef, cachedCommit, describeRef, hubCacheDir, linkSnapshotFile, parseRepoRef, repoCacheDir, snapshotDir, writeRef,
} from './cache.js';
import { type HubClient, type HubFile, HubUnreachable, downloadBlob, fetchRepoInfo } from './download.js';
import { downloadProgress, type ProgressSink } from './progress.js';
import { recordedProjector, writeRecord } from './record.js';
import { chooseGguf, ggufMatches, missingParts, selectFiles } from './select.js';

export { parseRepoRef, selectFiles };

export interface ResolveOptions {
  readonly env?: NodeJS.ProcessEnv;
  /** Notes: what is fetched and its size, before the download (default: stderr). */
  readonly log?: (line: string) => void;
  /** Where download progress goes (default: stderr; a TTY gets a redrawn line). */
  readonly progress?: ProgressSink;
  /** Millisecond clock of the progress lines (tests). */
  readonly clock?: () => number;
}

const TRUE = new Set(['1', 'true', 'yes', 'on']);

/** True when `spec` names a hub repository rather than a local path. */
export function isHubReference(spec: string): boolean {
  return !existsSync(spec) && !looksLikePath(spec) && parseRepoRef(spec) !== null;
}

/** A spec that can only mean a local path, even when it does not exist: absolute or
 * explicitly relative (`./`, `../`, `~`), a Windows path, a model file name, the built-in
 * model's name, or `dir/name` where `dir` is a local directory. (`org/name` otherwise
 * reads as a hub repository.) */
export function looksLikePath(spec: string): boolean {
  if (isAbsolute(spec) || /^(\.{1,2}|~)([/\\]|$)/.test(spec) || spec.includes('\\') || /^[A-Za-z]:[/\\]/.test(spec)) return true;
  if (/\.(gguf|safetensors|json)$/i.test(spec) || spec === BUILTIN_MODEL_NAME) return true;
  const parent = dirname(spec);
  return parent !== '.' && existsSync(parent);
}

/** The error for a local path that does not exist (no network is tried for it). */
function missingPath(spec: string): DeltaserveError {
  const abs = resolve(spec);
  const what = /\.gguf$/i.test(spec) ? 'model file' : 'model directory';
  const builtin = basename(spec) === basename(BUILTIN_MODEL_NAME)
    ? ` (the built-in model: leave the model out, or pass BUILTIN_MODEL from 'deltaserve')` : '';
  return new DeltaserveError('bad_config', `${what} not found: ${abs}${spec !== abs ? ` ("${spec}" from ${process.cwd()})` : ''}${builtin}`);
}

/** A local model path for `spec` (a directory, or a .gguf file for `:QUANT` references). */
export async function resolveModelPath(spec: string, o: ResolveOptions = {}): Promise<string> {
  return (await resolveModel(spec, o)).path;
}

/** A resolved model: its local path, and for a hub `:QUANT` reference the vision projector
 * (mmproj GGUF) recorded with it, which loads with the model as llama-server's hub form does
 * (null: a local path, a safetensors repository, or a repository without a projector). */
export interface ResolvedModel {
  readonly path: string;
  readonly mmproj: string | null;
}

export async function resolveModel(spec: string, o: ResolveOptions = {}): Promise<ResolvedModel> {
  if (existsSync(spec)) return { path: spec, mmproj: null };
  const ref = looksLikePath(spec) ? null : parseRepoRef(spec);
  if (!ref) throw missingPath(spec); // a local path: never looked up on the hub
  const env = o.env ?? process.env;
  const repoDir = repoCacheDir(hubCacheDir(env), ref);
  const commit = cachedCommit(repoDir, ref.revision);
  const cached: Snapshot = commit ? checkSnapshot(repoDir, commit, ref) : { missing: 'refs/' + ref.revision, path: null, mmproj: null };
  if (cached.path) return { path: cached.path, mmproj: cached.mmproj };
  const where = commit ? snapshotDir(repoDir, commit) : repoDir;
  const offline = (reason: string): never => {
    throw new DeltaserveError('bad_config',
      `model ${describeRef(ref)} (no local directory of that name) is not in the Hugging Face cache and ${reason}: ` +
      `missing ${cached.missing} (looked in ${where})`);
  };
  if (TRUE.has((env['HF_HUB_OFFLINE'] ?? '').toLowerCase())) offline('HF_HUB_OFFLINE is set');
  const client: HubClient = { endpoint: (env['HF_ENDPOINT'] ?? 'https://huggingface.co').replace(/\/+$/, ''), token: env['HF_TOKEN'] || undefined };
  try {
    return await download(client, ref, repoDir, o);
  } catch (e) {
    if (e instanceof HubUnreachable) offline(e.message);
    throw e;
  }
}

/** What is about to be fetched, for the line before the download. */
function describeFiles(files: readonly HubFile[], ref: RepoRef): string {
  const total = files.reduce((n, f) => n + (f.size ?? 0), 0);
  const big = files.filter((f) => f.sha256 !== null);
  const named = ref.quant ? files.map((f) => `${f.path} ${fmtBytes(f.size ?? 0)}`).join(', ')
    : `${big.length} weight file${big.length === 1 ? '' : 's'} and ${files.length - big.length} small ones`;
  return `${fmtBytes(total)} in ${files.length} file${files.length === 1 ? '' : 's'} (${named})`;
}

async function download(client: HubClient, ref: RepoRef, repoDir: string, o: ResolveOptions): Promise<ResolvedModel> {
  const log = o.log ?? ((l: string) => process.stderr.write(`deltaserve: ${l}\n`));
  const info = await fetchRepoInfo(client, ref);
  const files = selectFiles(info.files, ref);
  const total = files.reduce((n, f) => n + (f.size ?? 0), 0);
  log(`downloading ${describeRef(ref)} (commit ${info.commit.slice(0, 12)}): ${describeFiles(files, ref)} from ${client.endpoint} into ${repoDir}`);
  const progress = downloadProgress(describeRef(ref), total, o.progress ?? process.stderr, o.clock);
  try {
    for (const f of files) {
      const key = await downloadBlob(client, ref, info.commit, f, repoDir, progress);
      linkSnapshotFile(repoDir, info.commit, f.path, key);
    }
  } finally {
    progress.done();
  }
  if (ref.quant) {
    const choice = chooseGguf(files.map((f) => f.path), { ...ref, quant: ref.quant });
    writeRecord(repoDir, { commit: info.commit, quant: ref.quant.toUpperCase(), parts: choice.parts, mmproj: choice.mmproj });
  }
  writeRef(repoDir, ref.revision, info.commit);
  const snap = checkSnapshot(repoDir, info.commit, ref);
  if (!snap.path) throw new DeltaserveError('bad_config', `model ${describeRef(ref)}: the repository has no ${snap.missing}`);
  return { path: snap.path, mmproj: snap.mmproj };
}

/** A snapshot's model path (null: incomplete, `missing` names the first missing file) and
 * the projector recorded with a GGUF choice. */
interface Snapshot {
  readonly path: string | null;
  readonly missing: string;
  readonly mmproj: string | null;
}

/** A complete snapshot's model path, or the first missing file. A GGUF choice is complete
 * with every split part and the projector recorded with it (deltaserve.json). */
function checkSnapshot(repoDir: string, commit: string, ref: RepoRef): Snapshot {
  const none = (missing: string): Snapshot => ({ path: null, missing, mmproj: null });
  const found = (path: string, mmproj: string | null = null): Snapshot => ({ path, missing: '', mmproj });
  const dir = snapshotDir(repoDir, commit);
  if (!existsSync(dir)) return none(ref.quant ? `a .gguf file matching ${ref.quant}` : 'config.json');
  if (ref.quant) {
    const files = listFiles(dir);
    const parts = ggufMatches(files, ref.quant);
    if (parts.length === 0) return none(`a .gguf file matching ${ref.quant}`);
    const lacking = missingParts(parts)[0];
    if (lacking) return none(lacking);
    const projector = recordedProjector(repoDir, commit, ref.quant, files);
    if (projector && !existsSync(projector)) return none(relative(dir, projector));
    return found(join(dir, parts[0]!), projector);
  }
  for (const f of ['config.json', 'tokenizer.json']) if (!existsSync(join(dir, f))) return none(f);
  const index = join(dir, 'model.safetensors.index.json');
  if (existsSync(index)) {
    const map = (JSON.parse(readFileSync(index, 'utf8')) as { weight_map?: Record<string, string> }).weight_map ?? {};
    for (const shard of new Set(Object.values(map))) if (!existsSync(join(dir, shard))) return none(shard);
    return found(dir);
  }
  if (!readdirSync(dir).some((f) => f.endsWith('.safetensors'))) return none('model.safetensors');
  return found(dir);
}

/** Every file under `dir` (relative paths; dangling links, i.e. removed blobs, left out). */
export function listFiles(dir: string, prefix = ''): string[] {
  const out: string[] = [];
  for (const e of readdirSync(join(dir, prefix))) {
    const rel = prefix ? `${prefix}/${e}` : e;
    let isDir = false;
    try {
      isDir = statSync(join(dir, rel)).isDirectory();
    } catch {
      continue; // a dangling link (blob removed): not a usable file
    }
    if (isDir) out.push(...listFiles(dir, rel));
    else out.push(rel);
  }
  return out;
}
