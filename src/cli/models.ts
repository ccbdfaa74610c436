// `deltaserve pull NAME[:QUANT]`: download a model into the Hugging Face cache without
// serving it. `deltaserve list`: the models in that cache, by the names --model takes.
import { parseArgs } from 'node:util';
import { existsSync } from 'node:fs';
import { fmtBytes } from '../util/bytes.js';
import { describeRef, hubCacheDir, parseRepoRef } from '../hub/cache.js';
import { type CachedModel, listCache } from '../hub/list.js';
import { looksLikePath, resolveModelPath } from '../hub/resolve.js';
import { DeltaserveError } from '../util/errors.js';

export const PULL_HELP = `deltaserve pull ORG/NAME[@REV][:QUANT]
  Download a model from the Hugging Face hub into its cache (HF_HUB_CACHE, else
  HF_HOME/hub), as --model would, without loading it. ORG/NAME: a safetensors repository
  (config, tokenizer, weights); ORG/NAME:QUANT: the GGUF of that quantization in a GGUF
  repository (e.g. :Q4_K_M, any case; every part of a split file) and the repository's
  vision projector (mmproj) beside it. The size is printed before the download, progress
  during it (stderr); an interrupted download resumes. Prints the local path (stdout).
  Endpoint HF_ENDPOINT (default https://huggingface.co), token HF_TOKEN.`;

export const LIST_HELP = `deltaserve list [--json]
  The models in the Hugging Face cache (HF_HUB_CACHE, else HF_HOME/hub), by the names
  --model and pull take (org/name, org/name:QUANT for each GGUF quantization), with their
  size on disk and files (a GGUF's projector too).
  --json                    one JSON array (name, repo, commit, format, quant, files, mmproj, bytes, dir)`;

export async function runPull(argv: string[]): Promise<void> {
  const { positionals } = parseArgs({ args: argv, options: {}, allowPositionals: true });
  const [name, ...extra] = positionals;
  if (name === undefined || extra.length > 0) throw new DeltaserveError('bad_request', `pull takes one model name\n${PULL_HELP}`);
  const ref = looksLikePath(name) || existsSync(name) ? null : parseRepoRef(name);
  if (!ref) {
    throw new DeltaserveError('bad_request',
      `pull takes a hub name ORG/NAME[@REV][:QUANT] (e.g. Qwen/Qwen3.5-0.8B or unsloth/Qwen3.5-4B-GGUF:Q4_K_M); got "${name}"`);
  }
  let downloaded = false;
  const path = await resolveModelPath(name, {
    log: (line) => {
      downloaded = true;
      process.stderr.write(`deltaserve: ${line}\n`);
    },
  });
  const entry = listCache(hubCacheDir()).find((m) => path === m.dir || m.files.some((f) => path.endsWith(`/${f.path}`) && path.startsWith(m.dir)));
  const size = entry ? ` (${fmtBytes(entry.bytes)}${entry.mmproj ? `, with projector ${entry.mmproj.path}` : ''})` : '';
  process.stderr.write(`deltaserve: ${describeRef(ref)} ${downloaded ? 'downloaded' : 'is already in the cache'}${size}\n`);
  process.stdout.write(`${path}\n`);
}

/** A model's files in a few words: the GGUF's parts and projector, or a count. */
function filesSummary(m: CachedModel): string {
  if (m.format === 'gguf') {
    const first = m.files[0]?.path ?? '';
    const parts = m.files.length > 1 ? `${first} (+${m.files.length - 1} parts)` : first;
    return m.mmproj ? `${parts} + ${m.mmproj.path}` : parts;
  }
  const weights = m.files.filter((f) => f.path.endsWith('.safetensors')).length;
  return `${m.files.length} files (${weights} .safetensors)`;
}

export function formatList(models: readonly CachedModel[], cacheDir: string): string {
  if (models.length === 0) {
    return `no models in the Hugging Face cache (${cacheDir}); "deltaserve pull ORG/NAME[:QUANT]" downloads one\n`;
  }
  const rows = [['NAME', 'FORMAT', 'SIZE', 'FILES'], ...models.map((m) => [m.name, m.quant ?? m.format, fmtBytes(m.bytes), filesSummary(m)])];
  const widths = [0, 1, 2].map((i) => Math.max(...rows.map((r) => r[i]!.length)));
  const lines = rows.map((r) => r.map((c, i) => (i < 3 ? (i === 2 ? c.padStart(widths[i]!) : c.padEnd(widths[i]!)) : c)).join('  '));
  const total = models.reduce((n, m) => n + m.bytes, 0);
  return `${lines.join('\n')}\n${models.length} model${models.length === 1 ? '' : 's'}, ${fmtBytes(total)} in ${cacheDir}\n`;
}

export async function runList(argv: string[]): Promise<void> {
  const { values } = parseArgs({ args: argv, options: { json: { type: 'boolean' } } });
  const dir = hubCacheDir();
  const models = listCache(dir);
  process.stdout.write(values.json ? `${JSON.stringify(models)}\n` : formatList(models, dir));
}
