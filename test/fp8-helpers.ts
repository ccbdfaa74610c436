// FP8 test checkpoints: an FP8 copy of a BF16 model directory, and the BF16 model that an
// FP8 checkpoint dequantizes to, written out as a plain BF16 checkpoint.
import { copyFileSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { withFp8Dequant } from '../src/checkpoint/fp8.js';
import { fp8CopySources } from '../src/tools/fp8-write.js';
import { openCheckpoint } from '../src/checkpoint/safetensors.js';
import { type TensorSource, writeSafetensors } from '../src/tools/safetensors-writer.js';

/** Copy everything but the weights (config, tokenizer, templates) from `src` into a new `dest`. */
function copyNonWeights(src: string, dest: string): void {
  mkdirSync(dest);
  for (const f of readdirSync(src)) {
    if (!f.endsWith('.safetensors') && !f.endsWith('.safetensors.index.json')) copyFileSync(join(src, f), join(dest, f));
  }
}

function editConfig(dir: string, edit: (cfg: Record<string, unknown>) => Record<string, unknown>): void {
  const p = join(dir, 'config.json');
  writeFileSync(p, JSON.stringify(edit(JSON.parse(readFileSync(p, 'utf8')) as Record<string, unknown>)));
}

/** `dest` = the BF16 model `src` with every 2-D *_proj.weight in block-wise FP8 (128×128). */
export function writeFp8Copy(src: string, dest: string): void {
  copyNonWeights(src, dest);
  const ck = openCheckpoint(src);
  try {
    writeSafetensors(join(dest, 'model.safetensors'), fp8CopySources(ck));
  } finally {
    ck.close();
  }
  editConfig(dest, (cfg) => ({ ...cfg, quantization_config: { quant_method: 'fp8', fmt: 'e4m3', weight_block_size: [128, 128] } }));
}

/** `dest` = the FP8 model `src` dequantized to BF16 (w = e4m3 · scale_inv), as a plain BF16
 * checkpoint: no scales, no quantization_config. */
export function writeDequantizedCopy(src: string, dest: string): void {
  copyNonWeights(src, dest);
  const ck = withFp8Dequant(openCheckpoint(src));
  try {
    const sources: TensorSource[] = [...ck.tensors.values()].map((t) => ({
      name: t.name, dtype: t.dtype as TensorSource['dtype'], shape: t.shape, fill: (d: Uint8Array, off: number) => ck.readRangeInto(t.name, off, d),
    }));
    writeSafetensors(join(dest, 'model.safetensors'), sources);
  } finally {
    ck.close();
  }
  const strip = (o: Record<string, unknown>): Record<string, unknown> => {
    const { quantization_config: _, ...rest } = o;
    return rest;
  };
  editConfig(dest, (cfg) => {
    const out = strip(cfg);
    const text = cfg['text_config'];
    return typeof text === 'object' && text !== null ? { ...out, text_config: strip(text as Record<string, unknown>) } : out;
  });
}
