// `deltaserve make-model`: write a random-weight checkpoint of a named shape (config.json,
// generation_config.json, safetensors, optional tokenizer) so benchmarks and tests run on
// real sizes without downloads.
//
// Invariants:
// - Every tensor name and shape is exactly what src/model/loader.ts loads for the written
//   config (and nothing else is written).
// - Deterministic: each tensor's values come from its own Rng seeded by (seed, tensor
//   name), using integer arithmetic and V8's portable Math functions only, so equal
//   options give byte-identical files; values do not depend on write order or sharding.
// - Tensor data is generated piece by piece while writing (never held whole).
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DeltaserveError } from '../util/errors.js';
import { progressBar } from '../util/progress.js';
import { type TensorSource, type WriteDType, INDEX_FILE, tensorBytes, writeSafetensors, writeShardedSafetensors } from './safetensors-writer.js';
import {
  type VisionTokenIds, STAND_IN_TOWER, preprocessorConfigJson, releaseConfig, releaseWrapper, splitChatTemplate, visionTensorShapes,
} from './release-layout.js';
import { type AddedToken, planVisionTokens, writeVisionTokens } from './vision-tokens.js';
import { writePlannedMmproj } from './make-mmproj.js';
import { fp8Sources } from './fp8-write.js';
import { type Init, type TensorDef, tensorSource } from './synthetic-values.js';

export { type MoeShape, SHAPES, type ShapeModelType, type ShapeSpec } from './model-shapes.js';
import { SHAPES, type ShapeSpec } from './model-shapes.js';

export interface MakeModelOptions {
  readonly shape: string;
  /** fp8: block-wise e4m3 (128×128 scales) for every *_proj.weight matrix, the BF16
   * checkpoint of the same seed quantized; other tensors BF16. */
  readonly dtype: 'bf16' | 'f32' | 'fp8';
  readonly seed: number;
  readonly out: string;
  /** Directory to copy tokenizer.json (+ tokenizer_config.json, chat_template.jinja) from. */
  readonly tokenizer?: string;
  /** Override the shape's vocab size (ids at or above the tokenizer's size are padding). */
  readonly vocabSize?: number;
  /** Override the number of decoder layers (the full-attention pattern continues). */
  readonly layers?: number;
  /** Shard size limit; by default a single file, sharded (2 GiB shards) above 2 GiB. */
  readonly shardBytes?: number;
  /** 'release' (Qwen3.5: ConditionalGeneration wrapper, nested text_config, a small
   * model.visual.* tower, chat_template.jinja) or 'flat' (text model only; the default here,
   * while the CLI defaults to 'release'). Qwen3-Next is flat either way. */
  readonly layout?: 'release' | 'flat';
  /** Also write the vision tower as llama.cpp's mmproj GGUF (release layout only). */
  readonly mmproj?: 'F16' | 'F32';
}

/** Token ids for config / generation_config (from the tokenizer when one is given). */
export interface SpecialTokens {
  readonly endOfText?: number; // <|endoftext|>: bos and pad
  readonly imEnd?: number; // <|im_end|>: eos
  readonly vision?: VisionTokenIds; // image_token_id etc. of the release config
}

export interface ModelPlan {
  readonly spec: ShapeSpec;
  readonly config: Record<string, unknown>;
  readonly generationConfig: Record<string, unknown>;
  /** Sorted by name. */
  readonly tensors: readonly TensorSource[];
  readonly params: number;
  readonly bytes: number;
}

export const SHARD_THRESHOLD = 2 * 1024 ** 3;
const MATRIX_STD = 0.02;
const NORM_STD = 0.05; // zero-centred RMSNorm weights: the scale is 1 + w
const CONV_STD = 0.3;

const MATRIX: Init = { kind: 'normal', mean: 0, std: MATRIX_STD };
const ZC_NORM: Init = { kind: 'normal', mean: 0, std: NORM_STD };
const PLAIN_NORM: Init = { kind: 'normal', mean: 1, std: NORM_STD };


function bad(message: string): never {
  throw new DeltaserveError('bad_request', message);
}

function layerKinds(spec: ShapeSpec, layers: number): ('linear' | 'full')[] {
  return Array.from({ length: layers }, (_, i) => ((i + 1) % spec.fullAttentionInterval === 0 ? 'full' : 'linear'));
}

/** Vision tower values with signal through every block: LayerNorm weights centred on 1,
 * matrices of std 1/√fan_in (unit-variance outputs, so attention is far from uniform),
 * position table std 0.5, biases small. */
function visionInit(name: string, shape: readonly number[]): Init {
  if (/norm\d?\.weight$/.test(name)) return PLAIN_NORM;
  if (name.endsWith('.bias')) return MATRIX;
  if (name.endsWith('pos_embed.weight')) return { kind: 'normal', mean: 0, std: 0.5 };
  const fanIn = shape.slice(1).reduce((a, b) => a * b, 1);
  return { kind: 'normal', mean: 0, std: 1 / Math.sqrt(fanIn) };
}

/** The tensor list the loader expects for `spec` with `layers` layers and vocab `vocab`. */
function tensorDefs(spec: ShapeSpec, layers: number, vocab: number, release: boolean): TensorDef[] {
  const h = spec.hidden;
  const defs: TensorDef[] = [];
  const add = (name: string, shape: number[], init: Init = MATRIX): void => {
    defs.push({ name, shape, init });
  };
  const qwen35 = spec.modelType !== 'qwen3_next';
  const p = qwen35 ? 'model.language_model.' : 'model.';
  const { linKeyHeads: hk, linValueHeads: hv, linKeyDim: dk, linValueDim: dv } = spec;
  const convDim = 2 * hk * dk + hv * dv;

  const mlp = (q: string): void => {
    const expert = (e: string, inter: number): void => {
      add(`${e}gate_proj.weight`, [inter, h]);
      add(`${e}up_proj.weight`, [inter, h]);
      add(`${e}down_proj.weight`, [h, inter]);
    };
    const m = spec.moe;
    if (!m) return expert(`${q}mlp.`, spec.intermediate);
    add(`${q}mlp.gate.weight`, [m.experts, h]);
    if (qwen35) {
      add(`${q}mlp.experts.gate_up_proj`, [m.experts, 2 * m.intermediate, h]);
      add(`${q}mlp.experts.down_proj`, [m.experts, h, m.intermediate]);
    } else {
      for (let e = 0; e < m.experts; e++) expert(`${q}mlp.experts.${e}.`, m.intermediate);
    }
    if (m.sharedIntermediate > 0) {
      expert(`${q}mlp.shared_expert.`, m.sharedIntermediate);
      add(`${q}mlp.shared_expert_gate.weight`, [1, h]);
    }
  };
  const attention = (q: string): void => {
    const { heads, kvHeads, headDim: hd } = spec;
    add(`${q}self_attn.q_proj.weight`, [heads * hd * 2, h]);
    add(`${q}self_attn.k_proj.weight`, [kvHeads * hd, h]);
    add(`${q}self_attn.v_proj.weight`, [kvHeads * hd, h]);
    add(`${q}self_attn.o_proj.weight`, [h, heads * hd]);
    add(`${q}self_attn.q_norm.weight`, [hd], ZC_NORM);
    add(`${q}self_attn.k_norm.weight`, [hd], ZC_NORM);
  };
  const gdn = (q: string): void => {
    const la = `${q}linear_attn.`;
    if (qwen35) {
      add(`${la}in_proj_qkv.weight`, [convDim, h]);
      add(`${la}in_proj_z.weight`, [hv * dv, h]);
      add(`${la}in_proj_b.weight`, [hv, h]);
      add(`${la}in_proj_a.weight`, [hv, h]);
    } else {
      // interleaved per key-head group (see qwen3_next.ts); values are i.i.d., so only
      // the shapes matter here
      add(`${la}in_proj_qkvz.weight`, [hk * 2 * dk + 2 * hv * dv, h]);
      add(`${la}in_proj_ba.weight`, [2 * hv, h]);
    }
    add(`${la}conv1d.weight`, [convDim, 1, spec.convKernel], { kind: 'normal', mean: 0, std: CONV_STD });
    add(`${la}A_log`, [hv], { kind: 'alog' });
    add(`${la}dt_bias`, [hv], { kind: 'dtbias' });
    add(`${la}norm.weight`, [dv], PLAIN_NORM); // gated norm: plain w, so centred on 1
    add(`${la}out_proj.weight`, [h, hv * dv]);
  };
  const layer = (q: string, kind: 'linear' | 'full'): void => {
    add(`${q}input_layernorm.weight`, [h], ZC_NORM);
    add(`${q}post_attention_layernorm.weight`, [h], ZC_NORM);
    if (kind === 'full') attention(q);
    else gdn(q);
    mlp(q);
  };

  add(`${p}embed_tokens.weight`, [vocab, h]);
  add(`${p}norm.weight`, [h], ZC_NORM);
  if (!spec.tied) add('lm_head.weight', [vocab, h]);
  layerKinds(spec, layers).forEach((kind, i) => layer(`${p}layers.${i}.`, kind));
  if (spec.mtpLayers > 0) {
    add('mtp.fc.weight', [h, 2 * h]);
    add('mtp.pre_fc_norm_embedding.weight', [h], ZC_NORM);
    add('mtp.pre_fc_norm_hidden.weight', [h], ZC_NORM);
    add('mtp.norm.weight', [h], ZC_NORM);
    for (let i = 0; i < spec.mtpLayers; i++) layer(`mtp.layers.${i}.`, 'full');
  }
  if (release) {
    for (const [name, shape] of visionTensorShapes(spec.vision ?? STAND_IN_TOWER, h)) add(name, shape, visionInit(name, shape));
  }
  return defs;
}

/** config.json in the Hugging Face format of the shape's model_type. */
function configJson(spec: ShapeSpec, layers: number, vocab: number, dtype: 'bf16' | 'f32' | 'fp8', tok: SpecialTokens): Record<string, unknown> {
  const eos = tok.imEnd ?? tok.endOfText;
  const ids = { bos_token_id: tok.endOfText, eos_token_id: eos, pad_token_id: tok.endOfText };
  const rotaryPairs = Math.floor((spec.headDim * spec.partialRotary) / 2);
  const third = Math.ceil(rotaryPairs / 3);
  const moe = spec.moe && {
    num_experts: spec.moe.experts, num_experts_per_tok: spec.moe.topK, moe_intermediate_size: spec.moe.intermediate,
    shared_expert_intermediate_size: spec.moe.sharedIntermediate, output_router_logits: false, router_aux_loss_coef: 0.001,
  };
  const common = {
    vocab_size: vocab, hidden_size: spec.hidden,
    ...(spec.intermediate > 0 ? { intermediate_size: spec.intermediate } : {}),
    num_hidden_layers: layers, hidden_act: 'silu',
    num_attention_heads: spec.heads, num_key_value_heads: spec.kvHeads, head_dim: spec.headDim,
    attention_bias: false, attention_dropout: 0.0,
    linear_num_key_heads: spec.linKeyHeads, linear_num_value_heads: spec.linValueHeads,
    linear_key_head_dim: spec.linKeyDim, linear_value_head_dim: spec.linValueDim, linear_conv_kernel_dim: spec.convKernel,
    ...moe,
    rms_norm_eps: 1e-6, max_position_embeddings: spec.maxPositions, tie_word_embeddings: spec.tied,
    initializer_range: MATRIX_STD, use_cache: true, torch_dtype: dtype === 'f32' ? 'float32' : 'bfloat16',
  };
  if (spec.modelType === 'qwen3_next') {
    return {
      architectures: ['Qwen3NextForCausalLM'], model_type: 'qwen3_next', ...common,
      full_attention_interval: spec.fullAttentionInterval,
      rope_theta: spec.ropeTheta, partial_rotary_factor: spec.partialRotary, rope_scaling: null,
      norm_topk_prob: true, decoder_sparse_step: 1, mlp_only_layers: [],
      num_nextn_predict_layers: spec.mtpLayers, ...ids,
    };
  }
  return {
    architectures: [spec.modelType === 'qwen3_5_text' ? 'Qwen3_5ForCausalLM' : 'Qwen3_5MoeForCausalLM'],
    model_type: spec.modelType, ...common,
    layer_types: layerKinds(spec, layers).map((k) => (k === 'full' ? 'full_attention' : 'linear_attention')),
    full_attention_interval: spec.fullAttentionInterval, attn_output_gate: true,
    // text-only: the three mrope position ids are equal, so this is plain partial RoPE
    rope_parameters: {
      rope_type: 'default', rope_theta: spec.ropeTheta, partial_rotary_factor: spec.partialRotary,
      mrope_interleaved: true, mrope_section: [third, third, rotaryPairs - 2 * third],
    },
    mtp_num_hidden_layers: spec.mtpLayers, mamba_ssm_dtype: 'float32', ...ids,
  };
}

// ---------------------------------------------------------------------------------------
// Plan and write

function positiveInt(name: string, v: number | undefined): void {
  if (v !== undefined && !(Number.isSafeInteger(v) && v >= 1)) bad(`${name} must be a positive integer (got ${v})`);
}

const FP8_BLOCK = [128, 128] as const;

/** Linear-layer matrices of the text model (what FP8 releases store in e4m3). */
function isFp8Weight(d: TensorDef): boolean {
  return d.shape.length === 2 && d.name.endsWith('_proj.weight') && !d.name.startsWith('model.visual.');
}

/** Config and tensor list for the options (no file system access). */
export function planModel(opts: Omit<MakeModelOptions, 'out'>, tokens: SpecialTokens = {}): ModelPlan {
  const spec = Object.hasOwn(SHAPES, opts.shape) ? SHAPES[opts.shape] : undefined;
  if (!spec) bad(`unknown model shape "${opts.shape}" (known shapes: ${Object.keys(SHAPES).join(', ')})`);
  if (opts.dtype !== 'bf16' && opts.dtype !== 'f32' && opts.dtype !== 'fp8') bad(`dtype must be bf16, f32 or fp8 (got ${String(opts.dtype)})`);
  if (!Number.isSafeInteger(opts.seed)) bad(`seed must be an integer (got ${opts.seed})`);
  positiveInt('vocabSize', opts.vocabSize);
  positiveInt('layers', opts.layers);
  positiveInt('shardBytes', opts.shardBytes);
  const layers = opts.layers ?? spec.layers;
  const vocab = opts.vocabSize ?? spec.vocab;
  const dtype: WriteDType = opts.dtype === 'f32' ? 'F32' : 'BF16';
  if (opts.layout !== undefined && opts.layout !== 'release' && opts.layout !== 'flat') bad(`layout must be release or flat (got ${String(opts.layout)})`);
  const wrapper = opts.layout === 'release' ? releaseWrapper(spec.modelType) : null;
  const defs = tensorDefs(spec, layers, vocab, wrapper !== null);
  const sources = (d: TensorDef): TensorSource[] => (opts.dtype === 'fp8' && isFp8Weight(d)
    ? fp8Sources(() => tensorSource(d, 'BF16', opts.seed), FP8_BLOCK) : [tensorSource(d, dtype, opts.seed)]);
  const tensors = defs.flatMap(sources).sort((a, b) => (a.name < b.name ? -1 : 1));
  const params = defs.reduce((n, d) => n + d.shape.reduce((a, b) => a * b, 1), 0);
  const bytes = tensors.reduce((n, t) => n + tensorBytes(t), 0);
  const eos = [tokens.imEnd, tokens.endOfText].filter((x): x is number => x !== undefined);
  const generationConfig = {
    bos_token_id: tokens.endOfText, eos_token_id: eos.length > 0 ? eos : undefined, pad_token_id: tokens.endOfText, do_sample: false,
  };
  const text = configJson(spec, layers, vocab, opts.dtype, tokens);
  const noVisionTokens: VisionTokenIds = { visionStart: null, visionEnd: null, imagePad: null, videoPad: null };
  const config = wrapper ? releaseConfig(wrapper, text, spec.vision ?? STAND_IN_TOWER, tokens.vision ?? noVisionTokens) : text;
  if (opts.dtype === 'fp8') {
    config['quantization_config'] = { quant_method: 'fp8', fmt: 'e4m3', activation_scheme: 'dynamic', weight_block_size: [...FP8_BLOCK] };
  }
  return { spec, config, generationConfig, tensors, params, bytes };
}

/** Number of ids the tokenizer defines and its special ids. */
function readTokenizer(dir: string): { size: number; tokens: SpecialTokens; added: AddedToken[] } {
  const path = join(dir, 'tokenizer.json');
  if (!existsSync(path)) throw new DeltaserveError('bad_tokenizer', `no tokenizer.json in ${dir}`);
  let json: { model?: { vocab?: unknown }; added_tokens?: { id: number; content: string }[] };
  try {
    json = JSON.parse(readFileSync(path, 'utf8')) as typeof json;
  } catch (e) {
    throw new DeltaserveError('bad_tokenizer', `${path}: not valid JSON (${(e as Error).message})`);
  }
  const vocab = json.model?.vocab;
  let size = Array.isArray(vocab) ? vocab.length : 0;
  if (vocab && typeof vocab === 'object' && !Array.isArray(vocab)) {
    for (const id of Object.values(vocab)) if (typeof id === 'number') size = Math.max(size, id + 1);
  }
  const tokens: { endOfText?: number; imEnd?: number } = {};
  const added = json.added_tokens ?? [];
  for (const t of added) {
    size = Math.max(size, t.id + 1);
    if (t.content === '<|endoftext|>') tokens.endOfText = t.id;
    if (t.content === '<|im_end|>') tokens.imEnd = t.id;
  }
  return { size, tokens, added: added.map((t) => ({ id: t.id, content: t.content })) };
}

const TOKENIZER_FILES = ['tokenizer.json', 'tokenizer_config.json', 'chat_template.jinja'];
const isCheckpointFile = (f: string): boolean => f === INDEX_FILE || /^model(-\d{5}-of-\d{5})?\.safetensors(\.partial)?$/.test(f)
  || /^mmproj-.*\.gguf$/.test(f);

export interface MakeModelResult {
  readonly dir: string;
  /** Safetensors files written (names relative to dir). */
  readonly files: readonly string[];
  readonly params: number;
  readonly bytes: number;
}

/** Write the model directory `opts.out` (created if missing; an existing checkpoint there
 * is replaced). */
export async function makeModel(opts: MakeModelOptions): Promise<MakeModelResult> {
  const tok = opts.tokenizer !== undefined ? readTokenizer(opts.tokenizer) : undefined;
  const spec = Object.hasOwn(SHAPES, opts.shape) ? SHAPES[opts.shape] : undefined;
  const vocab = opts.vocabSize ?? spec?.vocab ?? 0;
  const release = opts.layout === 'release' && spec !== undefined && releaseWrapper(spec.modelType) !== null;
  const vision = tok && release ? planVisionTokens(tok.added, tok.size, vocab) : undefined;
  if (opts.mmproj !== undefined && !release) bad('mmproj needs a Qwen3.5 shape in the release layout (a model with a vision tower)');
  const plan = planModel(opts, tok && { ...tok.tokens, ...(vision ? { vision: vision.ids } : {}) });
  if (tok && tok.size > vocab) bad(`tokenizer in ${opts.tokenizer} has ${tok.size} ids but the model vocab is ${vocab}`);
  mkdirSync(opts.out, { recursive: true });
  for (const f of readdirSync(opts.out)) if (isCheckpointFile(f)) rmSync(join(opts.out, f));
  writeFileSync(join(opts.out, 'config.json'), `${JSON.stringify(plan.config, null, 2)}\n`);
  writeFileSync(join(opts.out, 'generation_config.json'), `${JSON.stringify(plan.generationConfig, null, 2)}\n`);
  if (plan.config['vision_config'] !== undefined) {
    writeFileSync(join(opts.out, 'preprocessor_config.json'), `${JSON.stringify(preprocessorConfigJson(), null, 2)}\n`);
  }
  if (opts.tokenizer !== undefined) {
    for (const f of TOKENIZER_FILES) {
      const src = join(opts.tokenizer, f);
      const dest = join(opts.out, f);
      if (!existsSync(src)) continue;
      // copy the bytes, not the mode: a read-only source must not make a rerun fail
      rmSync(dest, { force: true });
      writeFileSync(dest, readFileSync(src));
    }
    if (plan.config['text_config'] !== undefined) splitChatTemplate(opts.out);
    if (vision) writeVisionTokens(opts.out, vision.add);
  }
  const metadata = { deltaserve_shape: opts.shape, deltaserve_seed: String(opts.seed) };
  const bar = progressBar(`writing ${opts.out}`, plan.bytes);
  const write = { metadata, onBytes: (n: number) => bar.tick(n) };
  const shardBytes = opts.shardBytes ?? (plan.bytes > SHARD_THRESHOLD ? SHARD_THRESHOLD : undefined);
  let files: string[];
  if (shardBytes !== undefined) {
    files = writeShardedSafetensors(opts.out, plan.tensors, shardBytes, write);
  } else {
    writeSafetensors(join(opts.out, 'model.safetensors'), plan.tensors, metadata, write);
    files = ['model.safetensors'];
  }
  bar.done();
  if (opts.mmproj !== undefined) files.push(await writePlannedMmproj(opts.out, opts.shape, plan.config, plan.tensors, opts.mmproj));
  return { dir: opts.out, files, params: plan.params, bytes: plan.bytes };
}
