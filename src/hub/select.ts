// Which files of a hub repository deltaserve needs. A safetensors repository: the
// top-level config, tokenizer, template and weight files. A GGUF repository referenced as
// `org/name:QUANT`: the .gguf whose file name carries QUANT as a whole token (any case), all
// the parts of a split one (`…-00001-of-00003.gguf`), and the repository's vision projector
// (`mmproj…gguf`) when it has one, downloaded beside the model for later use.
import { DeltaserveError } from '../util/errors.js';
import { type RepoRef, describeRef } from './cache.js';
import type { HubFile } from './download.js';

/** The files of one GGUF choice: the model (its parts in order) and the projector. */
export interface GgufChoice {
  /** Paths of the model file, or of every part of a split one (part 1 first). */
  readonly parts: readonly string[];
  /** The vision projector's path, or null when the repository has none. */
  readonly mmproj: string | null;
}

const SPLIT_RE = /-(\d{5})-of-(\d{5})\.gguf$/i;
const fileName = (p: string): string => p.split('/').pop()!.toLowerCase();
const isGguf = (p: string): boolean => fileName(p).endsWith('.gguf');
const isProjector = (p: string): boolean => isGguf(p) && fileName(p).includes('mmproj');

/** True when `quant` appears in the path (file or folder name) as a token, not inside a
 * longer word: `Q4_K_M` is in `x-Q4_K_M.gguf` and `Q4_K_M/x-00001-of-00002.gguf`, not in
 * `x-IQ4_K_M.gguf`. */
function hasQuantTag(path: string, quant: string): boolean {
  const file = path.toLowerCase();
  const q = quant.toLowerCase();
  for (let i = file.indexOf(q); i >= 0; i = file.indexOf(q, i + 1)) {
    if (!/[a-z0-9]/.test(file[i - 1] ?? '') && !/[a-z0-9]/.test(file[i + q.length] ?? '')) return true;
  }
  return false;
}

/** The model .gguf paths for `quant`: the first (sorted) base name that carries the tag,
 * with all its split parts present in `paths`, part 1 first; [] when none matches. */
export function ggufMatches(paths: readonly string[], quant: string): string[] {
  const hits = paths.filter((p) => isGguf(p) && !isProjector(p) && hasQuantTag(p, quant)).sort();
  const base = (p: string): string => p.replace(SPLIT_RE, '.gguf');
  return hits.filter((p) => base(p) === base(hits[0] ?? ''));
}

/** The projector to take beside a `quant` model: one carrying the same tag, else F16, BF16,
 * F32 in that order, else the first by name; null when there is none. */
export function pickProjector(paths: readonly string[], quant: string): string | null {
  const all = paths.filter(isProjector).sort();
  if (all.length === 0) return null;
  for (const tag of [quant, 'f16', 'bf16', 'f32']) {
    const hit = all.find((p) => hasQuantTag(p, tag));
    if (hit) return hit;
  }
  return all[0]!;
}

/** The parts of a split GGUF (`…-00001-of-0000N.gguf` first) that `parts` lacks; [] for a
 * single file or a complete set. */
export function missingParts(parts: readonly string[]): string[] {
  const first = parts[0];
  const m = first ? SPLIT_RE.exec(first) : null;
  if (!first || !m) return [];
  const n = Number(m[2]);
  const want = Array.from({ length: n }, (_, i) => first.replace(SPLIT_RE, `-${String(i + 1).padStart(5, '0')}-of-${m[2]}.gguf`));
  return want.filter((p) => !parts.includes(p));
}

/** The GGUF choice of `ref` among a repository's files (an error listing the .gguf files
 * there when nothing matches, or naming a missing split part). */
export function chooseGguf(paths: readonly string[], ref: RepoRef & { quant: string }): GgufChoice {
  const parts = ggufMatches(paths, ref.quant);
  if (parts.length === 0) {
    const have = paths.filter((p) => isGguf(p) && !isProjector(p));
    throw new DeltaserveError('bad_config',
      `model ${describeRef(ref)}: no .gguf file matches "${ref.quant}" (files: ${have.length > 0 ? have.join(', ') : 'none'})`);
  }
  const missing = missingParts(parts);
  if (missing.length > 0) throw new DeltaserveError('bad_config', `model ${describeRef(ref)}: split GGUF ${parts[0]} lacks part ${missing[0]}`);
  return { parts, mmproj: pickProjector(paths, ref.quant) };
}

/** Files deltaserve needs from a repository listing. */
export function selectFiles(files: readonly HubFile[], ref: RepoRef): HubFile[] {
  if (ref.quant) {
    const choice = chooseGguf(files.map((f) => f.path), { ...ref, quant: ref.quant });
    const wanted = new Set([...choice.parts, ...(choice.mmproj ? [choice.mmproj] : [])]);
    return files.filter((f) => wanted.has(f.path));
  }
  return files.filter((f) => !f.path.includes('/') && /\.(json|jinja|safetensors|txt)$/.test(f.path));
}
