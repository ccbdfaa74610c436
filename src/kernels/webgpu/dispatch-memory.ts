/// <reference types="@webgpu/types" />
// What every step's dispatches share across steps (encoder.ts): the parameter uniform and
// the bind groups.
// - ParamMemory: one persistent uniform buffer holding a step's parameter slots (256 bytes
//   each, addressed by a dynamic offset; a step's slots in order, each submit of the step
//   writing its own with one queue.writeBuffer), and
//   a pool of host blocks the encoders fill (no per-step allocation once warm). Queue order
//   makes one buffer enough: a submit's writeBuffer lands after every earlier submit ran.
// - BindGroupCache: since the parameters move to a dynamic offset, a dispatch's bind group
//   depends only on (pipeline, buffers) and is created once, then reused by every step.
//   Keyed by object identity (a trie: pipeline, then each bound buffer in binding order), so
//   a reallocated buffer (a grown scratch or upload arena) is a new key and can never be read
//   through a stale group; entries holding a freed buffer are dropped (`forget`), and all are
//   dropped when the parameter buffer is replaced (every group binds it).

/** Bytes of parameters per dispatch (= the largest minUniformBufferOffsetAlignment WebGPU
 * allows, so every slot is a valid dynamic offset; the WGSL Params struct of wgsl/common.ts
 * HEADER is exactly this size). */
export const PARAM_SLOT_BYTES = 256;
const FIRST_SLOTS = 512;
const UNIFORM = 0x40; // GPUBufferUsage.UNIFORM
const COPY_DST = 0x08;

export class ParamMemory {
  private gpu: GPUBuffer | null = null;
  private readonly spare: ArrayBuffer[] = [];
  private retired: { buffer: GPUBuffer; at: number }[] = [];
  /** Times the uniform buffer was replaced by a larger one. */
  replacements = 0;

  constructor(private readonly device: GPUDevice, private readonly onReplace: () => void) {}

  /** A host block for an encoder's slots (a returned one when there is one). */
  takeHost(): ArrayBuffer {
    return this.spare.pop() ?? new ArrayBuffer(PARAM_SLOT_BYTES * FIRST_SLOTS);
  }

  /** An encoder's block back to the pool once uploaded (writeBuffer copied it). */
  giveHost(block: ArrayBuffer): void {
    if (this.spare.length < 4) this.spare.push(block);
  }

  /** Upload bytes [from, to) of `host` to the same bytes of the uniform buffer (grown to
   * hold `to`: a larger one replaces it, the old one retired until the submits that may read
   * it have run; a submit's dispatches address only their own slots, so a replacement
   * between two submits of a step needs no earlier slot). Returns the buffer this submit's
   * bind groups address. */
  upload(host: ArrayBuffer, from: number, to: number): GPUBuffer {
    let gpu = this.gpu;
    if (!gpu || gpu.size < to) {
      if (gpu) this.retired.push({ buffer: gpu, at: ++this.replacements });
      const size = Math.max(to, 2 * (gpu?.size ?? 0), PARAM_SLOT_BYTES * FIRST_SLOTS);
      gpu = this.device.createBuffer({ size, usage: UNIFORM | COPY_DST, label: 'params' });
      this.gpu = gpu;
      this.onReplace();
    }
    if (to > from) this.device.queue.writeBuffer(gpu, from, host, from, to - from);
    return gpu;
  }

  /** A submit that began after replacement `mark` has completed: every submit before it has
   * too, so the buffers retired up to `mark` are read by nothing. */
  release(mark: number): void {
    if (this.retired.length === 0) return;
    const keep: { buffer: GPUBuffer; at: number }[] = [];
    for (const r of this.retired) {
      if (r.at <= mark) r.buffer.destroy();
      else keep.push(r);
    }
    this.retired = keep;
  }
}

interface TrieNode {
  group: GPUBindGroup | null;
  next: Map<GPUBuffer | null, TrieNode> | null;
}

const newNode = (): TrieNode => ({ group: null, next: null });

export class BindGroupCache {
  private roots = new Map<GPUComputePipeline, TrieNode>();
  private groups = 0;
  /** Bind groups created since construction (misses). */
  created = 0;

  /** limit: cached groups beyond which the cache starts over (a bound on memory for
   * workloads whose buffers keep changing). */
  constructor(private readonly device: GPUDevice, private readonly limit = 4096) {}

  get size(): number {
    return this.groups;
  }

  /** The bind group of `pipeline` binding `params` (a PARAM_SLOT_BYTES window, dynamic
   * offset) at 0 and `buffers` at 1.. in order (null: a binding folded into an earlier one). */
  get(pipeline: GPUComputePipeline, layout: GPUBindGroupLayout, params: GPUBuffer, buffers: readonly (GPUBuffer | null)[]): GPUBindGroup {
    if (this.groups >= this.limit) this.clear();
    let node = this.roots.get(pipeline);
    if (!node) {
      node = newNode();
      this.roots.set(pipeline, node);
    }
    for (let i = 0; i < buffers.length; i++) {
      const b = buffers[i]!;
      node.next ??= new Map();
      let child = node.next.get(b);
      if (!child) {
        child = newNode();
        node.next.set(b, child);
      }
      node = child;
    }
    if (node.group) return node.group;
    const entries: GPUBindGroupEntry[] = [{ binding: 0, resource: { buffer: params, offset: 0, size: PARAM_SLOT_BYTES } }];
    for (let i = 0; i < buffers.length; i++) {
      const buffer = buffers[i];
      if (buffer) entries.push({ binding: i + 1, resource: { buffer } });
    }
    node.group = this.device.createBindGroup({ layout, entries });
    this.groups++;
    this.created++;
    return node.group;
  }

  /** Drop every group that binds `buffer` (it is being destroyed). */
  forget(buffer: GPUBuffer): void {
    for (const root of this.roots.values()) this.groups -= prune(root, buffer);
  }

  clear(): void {
    this.roots = new Map();
    this.groups = 0;
  }
}

/** Remove the subtrees under `node` keyed by `buffer`; returns the groups removed. */
function prune(node: TrieNode, buffer: GPUBuffer): number {
  if (!node.next) return 0;
  let removed = 0;
  const hit = node.next.get(buffer);
  if (hit) {
    removed += countGroups(hit);
    node.next.delete(buffer);
  }
  for (const child of node.next.values()) removed += prune(child, buffer);
  return removed;
}

function countGroups(node: TrieNode): number {
  let n = node.group ? 1 : 0;
  if (node.next) for (const child of node.next.values()) n += countGroups(child);
  return n;
}
