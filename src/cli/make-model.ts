// `deltaserve make-model`: write a random-weight checkpoint of a named real shape.
import { parseArgs } from 'node:util';
import { resolve } from 'node:path';
import { makeModel, SHAPES } from '../tools/make-model.js';
import { DeltaserveError } from '../util/errors.js';
import { int, str } from './args.js';
import { DEFAULT_MODEL } from './engine-flags.js';

export const MAKE_MODEL_HELP = `deltaserve make-model --shape NAME --out DIR [options]
  --shape NAME              one of: ${Object.keys(SHAPES).join(', ')}
  --dtype bf16|f32|fp8      (default bf16; fp8: block-wise e4m3 linear weights with 128×128
                            weight_scale_inv, the same seed's BF16 values quantized)
  --seed N                  (default 0; same seed ⇒ byte-identical files)
  --out DIR                 output directory
  --tokenizer DIR           copy tokenizer files from DIR (default: built-in tiny-think)
  --vocab-size N            override the shape's vocabulary size
  --layers N                override the number of decoder layers (truncate a real shape)
  --layout release|flat     release (default): the published Qwen3.5 layout (ConditionalGeneration
                            config with text_config, a small model.visual.* tower, chat_template.jinja);
                            flat: the text model only. Qwen3-Next shapes are flat either way
  --shard-size BYTES        write shards of at most BYTES with model.safetensors.index.json
                            (default: one file, 2 GiB shards above 2 GiB)
  --mmproj f16|f32          also write the vision tower as llama.cpp's mmproj GGUF
                            (mmproj-<shape>-F16.gguf; release layout only)`;

export async function runMakeModel(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv, options: {
      shape: { type: 'string' }, dtype: { type: 'string' }, seed: { type: 'string' }, out: { type: 'string' },
      tokenizer: { type: 'string' }, 'vocab-size': { type: 'string' }, layers: { type: 'string' },
      layout: { type: 'string' }, 'shard-size': { type: 'string' }, mmproj: { type: 'string' },
    },
  });
  const shape = str(values, 'shape');
  const out = str(values, 'out');
  if (!shape || !out) throw new DeltaserveError('bad_request', `make-model needs --shape and --out\n${MAKE_MODEL_HELP}`);
  const dtype = str(values, 'dtype') ?? 'bf16';
  if (dtype !== 'bf16' && dtype !== 'f32' && dtype !== 'fp8') throw new DeltaserveError('bad_request', `--dtype must be bf16, f32 or fp8 (got "${dtype}")`);
  const vocab = int(values, 'vocab-size', 1);
  const layers = int(values, 'layers', 1);
  const layout = str(values, 'layout') ?? 'release';
  if (layout !== 'release' && layout !== 'flat') throw new DeltaserveError('bad_request', `--layout must be release or flat (got "${layout}")`);
  const shardBytes = int(values, 'shard-size', 1);
  const mmproj = str(values, 'mmproj');
  if (mmproj !== undefined && mmproj !== 'f16' && mmproj !== 'f32') throw new DeltaserveError('bad_request', `--mmproj must be f16 or f32 (got "${mmproj}")`);
  if (mmproj !== undefined && layout !== 'release') throw new DeltaserveError('bad_request', '--mmproj needs --layout release (the vision tower)');
  const res = await makeModel({
    shape, dtype, seed: int(values, 'seed') ?? 0, out: resolve(out),
    tokenizer: resolve(str(values, 'tokenizer') ?? DEFAULT_MODEL),
    ...(vocab !== undefined ? { vocabSize: vocab } : {}),
    ...(layers !== undefined ? { layers } : {}),
    ...(shardBytes !== undefined ? { shardBytes } : {}),
    layout,
    ...(mmproj !== undefined ? { mmproj: mmproj === 'f16' ? 'F16' as const : 'F32' as const } : {}),
  });
  process.stdout.write(JSON.stringify({ dir: res.dir, files: res.files, params: res.params, bytes: res.bytes }) + '\n');
}
