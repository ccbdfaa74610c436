// A test-only HF → GGUF converter for qwen3_next checkpoints, following the rules of
// llama.cpp's convert_hf_to_gguf.py (Qwen3NextModel): reversed dims, 1 + w stored for norms
// whose name ends in `norm.weight` (not linear_attn.norm), ssm_a = −exp(A_log) in f32,
// squeezed conv, in_proj_qkvz split into attn_qkv (q all | k all | v all) and attn_gate,
// in_proj_ba kept whole as ssm_ba, experts stacked into 3-D tensors, 1-D tensors in F32.
// The MTP block is written as block n_layer with nextn.* names, as for Qwen3.5.
import { openCheckpoint, bf16ToF32 } from '../src/checkpoint/safetensors.js';
import { loadModelConfig } from '../src/model/config.js';
import { qkvzRowOrder } from '../src/model/qwen3_next.js';
import { readGgufHeader } from '../src/checkpoint/gguf-file.js';
import type { WFile, WTensor } from './gguf-writer.js';
import { writeGguf } from './gguf-writer.js';

const F32 = 0;
const BF16 = 30;

/** `legacy`: in_proj_qkvz kept whole as ssm_in (what older converters wrote). */
export function convertQwen3Next(dir: string, out: string, tokenizerGguf: string, legacy = false): void {
  const cfg = loadModelConfig(dir);
  const ck = openCheckpoint(dir);
  const tensors: WTensor[] = [];
  const raw = (name: string): Uint8Array => ck.read(name);
  const f32 = (name: string, fn: (x: number) => number = (x) => x): Uint8Array => {
    const bits = new Uint16Array(raw(name).buffer);
    return new Uint8Array(Float32Array.from(bits, (b) => Math.fround(fn(bf16ToF32(b)))).buffer);
  };
  const mat = (gg: string, name: string): void => { tensors.push({ name: gg, shape: [...ck.info(name).shape], type: BF16, data: raw(name) }); };
  const vec = (gg: string, name: string, fn?: (x: number) => number): void => {
    const n = ck.info(name).shape.reduce((a, b) => a * b, 1);
    tensors.push({ name: gg, shape: [n], type: F32, data: f32(name, fn) });
  };
  const norm = (gg: string, name: string): void => vec(gg, name, name.endsWith('linear_attn.norm.weight') || !name.endsWith('norm.weight') ? undefined : (x) => 1 + x);
  const rows = (name: string, idx: number[], cols: number): Uint8Array => {
    const src = raw(name);
    const outb = new Uint8Array(idx.length * cols * 2);
    idx.forEach((r, i) => outb.set(src.subarray(r * cols * 2, (r + 1) * cols * 2), i * cols * 2));
    return outb;
  };
  const stack = (gg: string, names: string[]): void => {
    const parts = names.map(raw);
    const data = new Uint8Array(parts.reduce((a, p) => a + p.byteLength, 0));
    let at = 0;
    for (const p of parts) { data.set(p, at); at += p.byteLength; }
    tensors.push({ name: gg, shape: [names.length, ...ck.info(names[0]!).shape], type: BF16, data });
  };
  const h = cfg.hiddenSize;
  const layer = (L: string, b: string, kind: 'linear' | 'full'): void => {
    norm(`${b}attn_norm.weight`, `${L}input_layernorm.weight`);
    norm(`${b}post_attention_norm.weight`, `${L}post_attention_layernorm.weight`);
    if (kind === 'full') {
      const a = `${L}self_attn.`;
      mat(`${b}attn_q.weight`, `${a}q_proj.weight`); mat(`${b}attn_k.weight`, `${a}k_proj.weight`);
      mat(`${b}attn_v.weight`, `${a}v_proj.weight`); mat(`${b}attn_output.weight`, `${a}o_proj.weight`);
      norm(`${b}attn_q_norm.weight`, `${a}q_norm.weight`); norm(`${b}attn_k_norm.weight`, `${a}k_norm.weight`);
    } else {
      const a = `${L}linear_attn.`;
      const order = qkvzRowOrder(cfg);
      if (legacy) mat(`${b}ssm_in.weight`, `${a}in_proj_qkvz.weight`);
      else {
        tensors.push({ name: `${b}attn_qkv.weight`, shape: [order.qkv.length, h], type: BF16, data: rows(`${a}in_proj_qkvz.weight`, order.qkv, h) });
        tensors.push({ name: `${b}attn_gate.weight`, shape: [order.z.length, h], type: BF16, data: rows(`${a}in_proj_qkvz.weight`, order.z, h) });
      }
      mat(`${b}ssm_ba.weight`, `${a}in_proj_ba.weight`);
      const conv = ck.info(`${a}conv1d.weight`).shape;
      tensors.push({ name: `${b}ssm_conv1d.weight`, shape: [conv[0]!, conv[2]!], type: F32, data: f32(`${a}conv1d.weight`) });
      vec(`${b}ssm_a`, `${a}A_log`, (x) => -Math.exp(x));
      vec(`${b}ssm_dt.bias`, `${a}dt_bias`);
      norm(`${b}ssm_norm.weight`, `${a}norm.weight`);
      mat(`${b}ssm_out.weight`, `${a}out_proj.weight`);
    }
    const p = `${L}mlp.`;
    const e = cfg.mtpMlp.kind === 'moe' ? cfg.mtpMlp.numExperts : 0;
    tensors.push({ name: `${b}ffn_gate_inp.weight`, shape: [e, h], type: F32, data: f32(`${p}gate.weight`) });
    for (const w of ['gate', 'up', 'down']) {
      stack(`${b}ffn_${w}_exps.weight`, Array.from({ length: e }, (_, x) => `${p}experts.${x}.${w}_proj.weight`));
      mat(`${b}ffn_${w}_shexp.weight`, `${p}shared_expert.${w}_proj.weight`);
    }
    vec(`${b}ffn_gate_inp_shexp.weight`, `${p}shared_expert_gate.weight`);
  };
  try {
    mat('token_embd.weight', 'model.embed_tokens.weight');
    mat('output.weight', 'lm_head.weight');
    norm('output_norm.weight', 'model.norm.weight');
    cfg.layerKinds.forEach((kind, i) => layer(`model.layers.${i}.`, `blk.${i}.`, kind));
    const n = cfg.numLayers;
    mat(`blk.${n}.nextn.eh_proj.weight`, 'mtp.fc.weight');
    vec(`blk.${n}.nextn.enorm.weight`, 'mtp.pre_fc_norm_embedding.weight');
    vec(`blk.${n}.nextn.hnorm.weight`, 'mtp.pre_fc_norm_hidden.weight');
    norm(`blk.${n}.nextn.shared_head_norm.weight`, 'mtp.norm.weight');
    layer('mtp.layers.0.', `blk.${n}.`, 'full');
  } finally {
    ck.close();
  }
  const moe = cfg.mtpMlp.kind === 'moe' ? cfg.mtpMlp : null;
  const a = 'qwen3next';
  const tok = [...readGgufHeader(tokenizerGguf).metadata].filter(([k]) => k.startsWith('tokenizer.'));
  const metadata: WFile['metadata'] = [
    ['general.architecture', a], [`${a}.block_count`, cfg.numLayers + 1], [`${a}.context_length`, cfg.maxPositionEmbeddings],
    [`${a}.embedding_length`, h], [`${a}.attention.head_count`, cfg.numHeads], [`${a}.attention.head_count_kv`, cfg.numKvHeads],
    [`${a}.attention.key_length`, cfg.headDim], [`${a}.attention.value_length`, cfg.headDim],
    [`${a}.rope.freq_base`, cfg.ropeTheta, 6], [`${a}.attention.layer_norm_rms_epsilon`, cfg.rmsNormEps, 6],
    [`${a}.rope.dimension_count`, cfg.rotaryDim], [`${a}.expert_count`, moe!.numExperts], [`${a}.expert_used_count`, moe!.topK],
    [`${a}.expert_feed_forward_length`, moe!.expertIntermediateSize], [`${a}.expert_shared_feed_forward_length`, moe!.sharedIntermediateSize],
    [`${a}.ssm.conv_kernel`, cfg.convKernel], [`${a}.ssm.state_size`, cfg.linKeyDim], [`${a}.ssm.group_count`, cfg.linNumKeyHeads],
    [`${a}.ssm.time_step_rank`, cfg.linNumValueHeads], [`${a}.ssm.inner_size`, cfg.linNumValueHeads * cfg.linValueDim],
    [`${a}.full_attention_interval`, 4], [`${a}.nextn_predict_layers`, 1], ...tok,
  ];
  writeGguf(out, { metadata, tensors });
}
