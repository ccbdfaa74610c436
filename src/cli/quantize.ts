// `deltaserve quantize`: quantize a Hugging Face Qwen3.5 / Qwen3-Next checkpoint once, offline, into a
// standard GGUF file (see tools/quantize-gguf.ts), as llama.cpp users do with llama-quantize.
import { parseArgs } from 'node:util';
import { existsSync } from 'node:fs';
import { basename, dirname, resolve } from 'node:path';
import { resolveModelSource } from '../checkpoint/source.js';
import { writeCheckpointMmproj } from '../tools/mmproj-writer.js';
import { FILE_TYPES, parseFileType } from '../tools/quant-mix.js';
import { quantizeToGguf } from '../tools/quantize-gguf.js';
import { DeltaserveError } from '../util/errors.js';
import { int, str } from './args.js';

export const QUANTIZE_HELP = `deltaserve quantize --model SRC --out FILE.gguf --type TYPE [--name NAME] [--threads N]
  --model SRC      a Hugging Face Qwen3.5 / Qwen3.5-MoE / Qwen3-Next model directory (config.json,
                   safetensors in BF16, F16, F32 or block-wise FP8, tokenizer.json), or a
                   float GGUF file of one (F32/F16/BF16, e.g. …-BF16.gguf; split files too)
  --out FILE.gguf  the GGUF file to write (qwen35 / qwen35moe / qwen3next, MTP block and tokenizer
                   included; llama.cpp loads it too). Written to a temp file, then renamed
  --type TYPE      one of: ${FILE_TYPES.join(', ')} — llama.cpp's file types with its
                   per-tensor rules (q4_k_m: Q6_K for the head, some attn_v/attn_qkv and
                   ffn_down layers, Q4_K elsewhere); blocks are byte-identical to llama-quantize's
  --name NAME      general.name (default: the model directory's name; a GGUF's own)
  --no-mmproj      a release checkpoint's vision tower is written beside FILE.gguf as llama.cpp's
                   projector, mmproj-NAME-F16.gguf (F16, unquantized, as llama.cpp's converter
                   does; load it with --mmproj); this flag skips it
  --threads N      threads of the WebAssembly block quantizer (default: one per core)`;

export async function runQuantize(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv, options: { model: { type: 'string' }, out: { type: 'string' }, type: { type: 'string' }, name: { type: 'string' }, threads: { type: 'string' }, 'no-mmproj': { type: 'boolean' } },
  });
  const model = str(values, 'model');
  const out = str(values, 'out');
  const type = str(values, 'type');
  if (!model || !out || !type) throw new DeltaserveError('bad_request', `quantize needs --model, --out and --type\n${QUANTIZE_HELP}`);
  if (!out.endsWith('.gguf')) throw new DeltaserveError('bad_request', `--out must name a .gguf file (got "${out}")`);
  if (!existsSync(dirname(resolve(out)))) throw new DeltaserveError('bad_request', `--out ${out}: the directory ${dirname(resolve(out))} does not exist`);
  const name = str(values, 'name');
  const t0 = performance.now();
  let lastReport = 0;
  const threads = int(values, 'threads', 1);
  const res = await quantizeToGguf({
    ...(threads !== undefined ? { threads } : {}),
    model: resolve(model), out: resolve(out), type: parseFileType(type), ...(name !== undefined ? { name } : {}),
    onTensor: (done, total, t) => {
      const now = performance.now();
      if (process.stderr.isTTY && (now - lastReport > 200 || done === total)) {
        lastReport = now;
        process.stderr.write(`\rquantize: ${done}/${total} tensors (${t.name} ${t.type})\x1b[K${done === total ? '\n' : ''}`);
      }
    },
  });
  const mmproj = values['no-mmproj'] ? null : await projectorBeside(resolve(model), resolve(out), name);
  if (mmproj) process.stderr.write(`quantize: the vision tower is in ${mmproj} (F16; load it with --mmproj)\n`);
  const seconds = (performance.now() - t0) / 1000;
  process.stdout.write(JSON.stringify({ out: resolve(out), mmproj, type, tensors: res.tensors, bytes: res.bytes, tensorTypes: res.types, seconds: Number(seconds.toFixed(2)) }) + '\n');
}

/** A release checkpoint's tower as mmproj-<name>-F16.gguf in the output's directory (null:
 * a text-only checkpoint, or a GGUF source, whose tower is already a separate file). */
async function projectorBeside(model: string, out: string, name: string | undefined): Promise<string | null> {
  const src = resolveModelSource(model);
  if (src.kind !== 'hf') return null;
  return writeCheckpointMmproj(src.dir, dirname(out), name ?? basename(src.dir));
}
