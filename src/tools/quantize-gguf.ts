// `deltaserve quantize`: a Hugging Face Qwen3.5 / Qwen3-Next checkpoint, or a float GGUF of
// one (gguf-source.ts), → one standard GGUF file (qwen35 / qwen35moe / qwen3next, MTP block
// and tokenizer included) that deltaserve and llama.cpp both load. Tensors are converted
// (hf-to-gguf.ts), typed (quant-mix.ts) and quantized with GGML's reference algorithms (the
// wasm twin of kernels/quant/quantize-ggml.ts, on all threads: kernels/wasm/quantizer.ts)
// a band of rows at a time, and streamed into the file (gguf-writer.ts): memory stays at a
// few MiB per tensor band.
import { closeSync, readFileSync, statSync } from 'node:fs';
import { basename, join } from 'node:path';
import type { ModelConfig } from '../model/config.js';
import { openModelFiles } from '../model/model.js';
import { openGgufParts } from '../checkpoint/gguf.js';
import { resolveModelSource } from '../checkpoint/source.js';
import type { GgufTensorType } from '../checkpoint/gguf-file.js';
import { isQuantType, quantRowBytes } from '../kernels/quant/formats.js';
import { f32ToF16 } from '../kernels/quant/dequant.js';
import { TextTokenizer } from '../tokenizer/tokenizer.js';
import { DeltaserveError } from '../util/errors.js';
import { convertTensors, type ConvertedTensor } from './hf-to-gguf.js';
import { FTYPE_ID, type FileType, tensorTypes } from './quant-mix.js';
import { type MetaEntry, type TensorOut, writeGgufFile } from './gguf-writer.js';
import { type RowQuantizer, type RowSource } from '../kernels/quant/row-quantizer.js';
import { startQuantizer } from '../kernels/wasm/quantizer.js';
import { ggufSourceMetadata, ggufSourceTensors } from './gguf-source.js';

export interface QuantizeOptions {
  readonly model: string;
  readonly out: string;
  readonly type: FileType;
  /** general.name (default: the model directory's name). */
  readonly name?: string;
  /** Threads of the block quantizer (default: one per core). */
  readonly threads?: number;
  readonly onTensor?: (done: number, total: number, t: { name: string; type: GgufTensorType }) => void;
}

export interface QuantizeResult {
  readonly tensors: number;
  readonly bytes: number;
  readonly types: Readonly<Record<string, number>>;
}

/** Rows per band: ~4 MiB of f32. */
const BAND_FLOATS = 1 << 20;
/** Rows per quantized band: ~8 quantizer slices, so reading overlaps quantizing (the output
 * band is at most 8.5 MiB of Q8_0). */
const QUANT_BAND_FLOATS = 1 << 23;

export async function quantizeToGguf(opts: QuantizeOptions): Promise<QuantizeResult> {
  const src = resolveModelSource(opts.model);
  const source = src.kind === 'hf' ? fromCheckpoint(src.dir, opts) : fromGguf(src.file, opts.name);
  const quantizer = await startQuantizer(opts.threads);
  try {
    const { converted, blockCount } = source;
    const types = tensorTypes(opts.type, converted, blockCount);
    const meta = [...source.metadata, ...fileTypeMetadata(opts.type)];
    const tensors: TensorOut[] = converted.map((t, i) => ({ name: t.name, shape: t.shape, type: types[i]!, produce: (emit) => produceTensor(t, types[i]!, emit, quantizer) }));
    await writeGgufFile(opts.out, meta, tensors, (i, t) => opts.onTensor?.(i + 1, tensors.length, t));
    const count: Record<string, number> = {};
    for (const t of types) count[t] = (count[t] ?? 0) + 1;
    return { tensors: tensors.length, bytes: statSync(opts.out).size, types: count };
  } finally {
    source.close();
    quantizer.dispose();
  }
}

/** What is written: tensors in GGUF layout, the number of blocks (MTP included), and the
 * metadata except the file type. */
interface Source {
  readonly converted: readonly ConvertedTensor[];
  readonly blockCount: number;
  readonly metadata: readonly MetaEntry[];
  close(): void;
}

function fromCheckpoint(dir: string, opts: QuantizeOptions): Source {
  const { config, ckpt } = openModelFiles(dir);
  try {
    return { converted: convertTensors(ckpt, config), blockCount: config.numLayers + config.mtpLayers, metadata: metadata(dir, config, opts), close: () => ckpt.close() };
  } catch (e) {
    ckpt.close();
    throw e;
  }
}

/** `name`: a new general.name (default: the source's). */
function fromGguf(file: string, name: string | undefined): Source {
  const g = openGgufParts(file);
  try {
    const arch = g.first.metadata.get('general.architecture');
    const blocks = g.first.metadata.get(`${String(arch)}.block_count`);
    if (typeof blocks !== 'number') throw new DeltaserveError('bad_checkpoint', `quantize: ${file}: metadata ${String(arch)}.block_count is missing`);
    const meta = ggufSourceMetadata(g.first).map((m): MetaEntry => (m.key === 'general.name' && name !== undefined ? { ...m, value: name } : m));
    if (name !== undefined && !meta.some((m) => m.key === 'general.name')) meta.unshift({ key: 'general.name', type: 'string', value: name });
    return { converted: ggufSourceTensors(g), blockCount: blocks, metadata: meta, close: () => g.fds.forEach((fd) => closeSync(fd)) };
  } catch (e) {
    g.fds.forEach((fd) => closeSync(fd));
    throw e;
  }
}

/** general.file_type, and for quantized file types general.quantization_version (2, the
 * block formats' version, as llama-quantize writes it). */
function fileTypeMetadata(type: FileType): MetaEntry[] {
  const quantized = type !== 'f32' && type !== 'f16' && type !== 'bf16';
  return [
    { key: 'general.file_type', type: 'u32', value: FTYPE_ID[type] },
    ...(quantized ? [{ key: 'general.quantization_version', type: 'u32', value: 2 } as const] : []),
  ];
}

/** Emit tensor t stored as `type`, band by band. A quantized band (~QUANT_BAND_FLOATS
 * elements) is read straight into the quantizer, which reads its next slice while every
 * thread quantizes the current one. `emit` writes before it returns, so the buffers are
 * reused. */
async function produceTensor(t: ConvertedTensor, type: GgufTensorType, emit: (b: Uint8Array) => void, quantizer: RowQuantizer): Promise<void> {
  const quantized = isQuantType(type);
  const per = Math.max(1, Math.floor((quantized ? QUANT_BAND_FLOATS : BAND_FLOATS) / t.cols));
  const band = quantized ? null : new Float32Array(Math.min(per, t.rows) * t.cols);
  const out = quantized ? new Uint8Array(quantRowBytes(type, t.cols) * Math.min(per, t.rows)) : null;
  for (let r = 0; r < t.rows; r += per) {
    const n = Math.min(per, t.rows - r);
    if (out && isQuantType(type)) {
      const bytes = out.subarray(0, quantRowBytes(type, t.cols) * n);
      const source: RowSource = { kind: 'f32', fill: (r0, m, into) => t.readRows(r + r0, m, into as Float32Array) };
      quantizer.quantizeFrom(type, source, n, t.cols, bytes);
      emit(bytes);
    } else {
      const x = band!.subarray(0, n * t.cols);
      t.readRows(r, n, x);
      emit(encodeFloat(x, type));
    }
  }
}

function encodeFloat(x: Float32Array, type: GgufTensorType): Uint8Array {
  if (type === 'F32') return new Uint8Array(x.buffer, x.byteOffset, x.byteLength);
  if (type !== 'F16' && type !== 'BF16') throw new Error(`quantize: no encoder for ${type}`);
  const out = new Uint16Array(x.length);
  const u32 = new Uint32Array(x.buffer, x.byteOffset, x.length);
  for (let i = 0; i < x.length; i++) out[i] = type === 'F16' ? f32ToF16(x[i]!) : bf16Rne(u32[i]!);
  return new Uint8Array(out.buffer);
}

/** f32 bits → bf16 bits, round to nearest even (NaN stays NaN). */
function bf16Rne(u: number): number {
  if ((u & 0x7fffffff) > 0x7f800000) return ((u >>> 16) | 0x40) & 0xffff;
  return ((u + 0x7fff + ((u >>> 16) & 1)) >>> 16) & 0xffff;
}

type Json = Record<string, unknown>;

function readJson(path: string): Json {
  return JSON.parse(readFileSync(path, 'utf8')) as Json;
}

/** The GGUF metadata: architecture hyper-parameters, file type, tokenizer, chat template. */
function metadata(dir: string, cfg: ModelConfig, opts: QuantizeOptions): MetaEntry[] {
  const raw = readJson(join(dir, 'config.json'));
  const text = { ...raw, ...((raw['text_config'] as Json | undefined) ?? {}) };
  const rope = ((text['rope_parameters'] ?? text['rope_scaling']) as Json | undefined) ?? {};
  const sections = Array.isArray(rope['mrope_section']) ? (rope['mrope_section'] as number[]) : [11, 11, 10];
  const a = cfg.arch === 'qwen3_next' ? 'qwen3next' : cfg.arch === 'qwen3_5_moe' ? 'qwen35moe' : 'qwen35';
  const u32 = (key: string, value: number): MetaEntry => ({ key: `${a}.${key}`, type: 'u32', value });
  const mlp = cfg.layerMlp[0]!;
  const meta: MetaEntry[] = [
    { key: 'general.architecture', type: 'string', value: a },
    { key: 'general.name', type: 'string', value: opts.name ?? basename(dir) },
    u32('block_count', cfg.numLayers + cfg.mtpLayers),
    u32('context_length', cfg.maxPositionEmbeddings),
    u32('embedding_length', cfg.hiddenSize),
    u32('feed_forward_length', mlp.kind === 'dense' ? mlp.intermediateSize : mlp.expertIntermediateSize),
  ];
  if (mlp.kind === 'moe') {
    meta.push(u32('expert_count', mlp.numExperts), u32('expert_used_count', mlp.topK),
      u32('expert_feed_forward_length', mlp.expertIntermediateSize),
      u32('expert_shared_feed_forward_length', mlp.sharedIntermediateSize));
    if (a === 'qwen3next') meta.push({ key: `${a}.expert_weights_norm`, type: 'bool', value: mlp.normTopkProb });
  }
  meta.push(
    u32('attention.head_count', cfg.numHeads), u32('attention.head_count_kv', cfg.numKvHeads),
    u32('attention.key_length', cfg.headDim), u32('attention.value_length', cfg.headDim),
    { key: `${a}.rope.freq_base`, type: 'f32', value: cfg.ropeTheta },
    { key: `${a}.attention.layer_norm_rms_epsilon`, type: 'f32', value: cfg.rmsNormEps },
    u32('rope.dimension_count', cfg.rotaryDim),
    // qwen35 / qwen35moe take multimodal RoPE sections; qwen3next has plain partial RoPE
    ...(a === 'qwen3next' ? [] : [{ key: `${a}.rope.dimension_sections`, type: 'i32', array: [...sections, 0].slice(0, 4) } as const]),
    u32('ssm.conv_kernel', cfg.convKernel), u32('ssm.state_size', cfg.linKeyDim),
    u32('ssm.group_count', cfg.linNumKeyHeads), u32('ssm.time_step_rank', cfg.linNumValueHeads),
    u32('ssm.inner_size', cfg.linValueDim * cfg.linNumValueHeads),
    u32('full_attention_interval', fullAttentionInterval(dir, cfg)),
  );
  if (cfg.mtpLayers > 0) meta.push(u32('nextn_predict_layers', cfg.mtpLayers));
  return [...meta, ...tokenizerMetadata(dir, cfg, text)];
}

/** The `full_attention_interval` that reproduces cfg.layerKinds under the GGUF readers' rule
 * (ours and llama.cpp's: layer i is full attention iff (i + 1) % interval == 0). With no full
 * layer (e.g. `make-model --layers 1..3` of a shape whose interval is 4) it is numLayers + 1,
 * which has no multiple among 1..numLayers. A pattern no interval gives is refused: the file
 * would load with other layer kinds than the checkpoint's. */
function fullAttentionInterval(dir: string, cfg: ModelConfig): number {
  const first = cfg.layerKinds.indexOf('full');
  const interval = first < 0 ? cfg.numLayers + 1 : first + 1;
  const kindAt = (i: number): string => ((i + 1) % interval === 0 ? 'full' : 'linear');
  const off = cfg.layerKinds.findIndex((kind, i) => kind !== kindAt(i));
  if (off >= 0) {
    throw new DeltaserveError('bad_checkpoint',
      `quantize: ${dir}: layer_types is not periodic (layer ${off} is ${cfg.layerKinds[off]} attention, but full_attention_interval ${interval} makes it ${kindAt(off)}); GGUF stores only the interval`);
  }
  return interval;
}

/** tokenizer.ggml.* from tokenizer.json: byte-level BPE tokens padded to vocab_size
 * (`[PAD{i}]`, type unused), merges, types (normal; added tokens control when special, else
 * user-defined), bos/eos ids, and the chat template. */
function tokenizerMetadata(dir: string, cfg: ModelConfig, text: Json): MetaEntry[] {
  const tj = readJson(join(dir, 'tokenizer.json'));
  const model = (tj['model'] as Json | undefined) ?? {};
  if (model['type'] !== 'BPE') throw new DeltaserveError('bad_tokenizer', `quantize: ${dir}/tokenizer.json is not a BPE tokenizer (model.type ${String(model['type'])})`);
  const vocab = (model['vocab'] as Record<string, number> | undefined) ?? {};
  const tokens: string[] = Array<string>(cfg.vocabSize).fill('');
  const types: number[] = Array<number>(cfg.vocabSize).fill(5);
  for (const [t, id] of Object.entries(vocab)) if (id < cfg.vocabSize) { tokens[id] = t; types[id] = 1; }
  for (const added of (tj['added_tokens'] as Json[] | undefined) ?? []) {
    const id = added['id'] as number;
    if (id >= cfg.vocabSize) continue;
    tokens[id] = String(added['content']);
    types[id] = added['special'] ? 3 : 4;
  }
  tokens.forEach((t, i) => { if (t === '') tokens[i] = `[PAD${i}]`; });
  const merges = ((model['merges'] as (string | string[])[] | undefined) ?? []).map((m) => (typeof m === 'string' ? m : m.join(' ')));
  const template = TextTokenizer.load(dir).chatTemplate;
  const id = (key: string): number => {
    const v = text[key];
    const first = Array.isArray(v) ? (v[0] as unknown) : v;
    return typeof first === 'number' ? first : (cfg.eosTokenIds[0] ?? 0);
  };
  return [
    { key: 'tokenizer.ggml.model', type: 'string', value: 'gpt2' },
    { key: 'tokenizer.ggml.pre', type: 'string', value: preTokenizerName(tj) },
    { key: 'tokenizer.ggml.tokens', type: 'string', array: tokens },
    { key: 'tokenizer.ggml.token_type', type: 'i32', array: types },
    { key: 'tokenizer.ggml.merges', type: 'string', array: merges },
    { key: 'tokenizer.ggml.eos_token_id', type: 'u32', value: id('eos_token_id') },
    { key: 'tokenizer.ggml.bos_token_id', type: 'u32', value: id('bos_token_id') },
    { key: 'tokenizer.ggml.add_bos_token', type: 'bool', value: false },
    ...(template !== undefined ? [{ key: 'tokenizer.chat_template', type: 'string', value: template } as const] : []),
  ];
}

/** llama.cpp's pre-tokenizer name for the tokenizer's split regex: qwen35 (letters with
 * combining marks), qwen2, or gpt-2 (ByteLevel's own regex; llama.cpp knows no "gpt2"). */
function preTokenizerName(tj: Json): string {
  const pre = JSON.stringify(tj['pre_tokenizer'] ?? {});
  if (!pre.includes('"Split"')) return 'gpt-2';
  return pre.includes('\\\\p{M}') ? 'qwen35' : 'qwen2';
}
