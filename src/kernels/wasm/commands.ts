// The one table of the wasm backend's chunked commands. For each command: its id, the
// names of its arguments in slot order (the Float64Array the main thread fills and every
// worker copies), how it splits into chunks, and the kernel export it calls with which
// parameters. `packArgs` (main thread) and `invokeChunk` (every thread) are generated from
// it, and a test checks each export's parameter list against assembly/*.ts.
import type { KernelExports } from './module.js';

/** A parameter of the export call: a command argument, or a per-chunk value —
 * 'lo' / 'hi': this chunk's range of split units; 'tmp': this thread's scratch
 * (tmpBase + tid · tmpStride); 'chunkAddr': base + lo · bytes (PROBE). */
export type Param<A extends string> = A | 'lo' | 'hi' | 'tmp' | 'chunkAddr';

export interface CommandSpec<A extends string = string> {
  readonly id: number;
  readonly args: readonly A[];
  /** Chunk c of n covers split units share(args[total], c, n, unit); empty chunks skip. */
  readonly split: { readonly total: A; readonly unit: number };
  /** The export called, or [if args[select] == 0, else] (same parameters). */
  readonly exports: readonly [string] | readonly [string, string];
  readonly select?: A;
  readonly params: readonly Param<A>[];
}

/** A table entry; its argument names are inferred from `args` alone, so a parameter or a
 * split naming no argument is a compile error. */
function spec<const A extends string>(s: {
  readonly id: number; readonly args: readonly A[]; readonly split: { readonly total: NoInfer<A>; readonly unit: number };
  readonly exports: readonly [string] | readonly [string, string]; readonly select?: NoInfer<A>;
  readonly params: readonly Param<NoInfer<A>>[];
}): CommandSpec<A> {
  return s;
}

/** Chunked commands. Barrier commands (EXIT, ADD_ARENA) carry no arguments (exec.ts). */
export const COMMANDS = {
  MATMUL: spec({
    id: 3, args: ['out', 'x', 'w', 'm', 'n', 'k', 'bf16', 'tmpBase', 'tmpStride'], split: { total: 'n', unit: 8 },
    exports: ['matmulF32', 'matmulBf16'], select: 'bf16', params: ['out', 'x', 'w', 'm', 'n', 'k', 'lo', 'hi', 'tmp'],
  }),
  /** MATMUL on f16 panels (its own command: MATMUL's select picks one of two exports). */
  MATMUL_F16: spec({
    id: 14, args: ['out', 'x', 'w', 'm', 'n', 'k', 'tmpBase', 'tmpStride'], split: { total: 'n', unit: 8 },
    exports: ['matmulF16'], params: ['out', 'x', 'w', 'm', 'n', 'k', 'lo', 'hi', 'tmp'],
  }),
  ATTENTION: spec({
    id: 4,
    args: ['out', 'q', 'qStride', 'kc', 'vc', 'pageTable', 'pageSize', 'start', 'nH', 'nKV', 'hd', 'units', 'tmpBase', 'tmpStride', 'per', 'qb', 't'],
    split: { total: 'units', unit: 1 }, exports: ['attention'],
    params: ['out', 'q', 'qStride', 'kc', 'vc', 'pageTable', 'pageSize', 'start', 'nH', 'nKV', 'hd', 'lo', 'hi', 'tmp', 'per', 'qb', 't'],
  }),
  GDN_RECURRENT: spec({
    id: 5, args: ['out', 'qkv', 'g', 'beta', 'state', 'scratch', 't', 'hk', 'hv', 'dk', 'dv', 'tmpBase', 'tmpStride'],
    split: { total: 'hv', unit: 1 }, exports: ['gdnRecurrent'],
    params: ['out', 'qkv', 'g', 'beta', 'state', 'scratch', 't', 'hk', 'hv', 'dk', 'dv', 'lo', 'hi', 'tmp'],
  }),
  GDN_CHUNKED: spec({
    id: 6, args: ['out', 'qkv', 'g', 'beta', 'state', 't', 'hk', 'hv', 'dk', 'dv', 'tmpBase', 'tmpStride', 'pos0'],
    split: { total: 'hv', unit: 1 }, exports: ['gdnChunked'],
    params: ['out', 'qkv', 'g', 'beta', 'state', 't', 'hk', 'hv', 'dk', 'dv', 'lo', 'hi', 'tmp', 'pos0'],
  }),
  CONV: spec({
    id: 7, args: ['out', 'x', 'window', 'w', 'wBf16', 't', 'c', 'kw', 'scratch'], split: { total: 'c', unit: 4 },
    exports: ['causalConv'], params: ['out', 'x', 'window', 'w', 'wBf16', 't', 'c', 'kw', 'scratch', 'lo', 'hi'],
  }),
  /** CONV for several sequences (assembly/gdn.ts causalConvSeqs): `count` descriptors
   * at `desc`, every chunk a channel slice of all of them. */
  CONV_SEQS: spec({
    id: 19, args: ['desc', 'count', 'w', 'wBf16', 'c', 'kw'], split: { total: 'c', unit: 4 },
    exports: ['causalConvSeqs'], params: ['desc', 'count', 'w', 'wBf16', 'c', 'kw', 'lo', 'hi'],
  }),
  /** GDN_RECURRENT for several sequences (assembly/gdn.ts gdnRecurrentSeqs): `count`
   * descriptors at `desc`; units are (sequence, value head) pairs, sequence-major. */
  GDN_RECURRENT_SEQS: spec({
    id: 21, args: ['desc', 'count', 'units', 'hk', 'hv', 'dk', 'dv', 'tmpBase', 'tmpStride'], split: { total: 'units', unit: 1 },
    exports: ['gdnRecurrentSeqs'], params: ['desc', 'count', 'hk', 'hv', 'dk', 'dv', 'lo', 'hi', 'tmp'],
  }),
  PROBE: spec({
    id: 8, args: ['base', 'bytes', 'chunks'], split: { total: 'chunks', unit: 1 },
    exports: ['streamRead'], params: ['chunkAddr', 'bytes'],
  }),
  QMATMUL: spec({
    id: 9, args: ['out', 'q16', 'd', 's', 'w', 'm', 'n', 'k', 'type', 'tmpBase', 'tmpStride', 'q8'],
    split: { total: 'n', unit: 4 }, exports: ['qmatmul'],
    params: ['type', 'out', 'q16', 'q8', 'd', 's', 'w', 'm', 'n', 'k', 'lo', 'hi', 'tmp'],
  }),
  /** Several matmuls of one input x (assembly/matmulgroup.ts): `count` descriptors at
   * `desc` (src/kernels/wasm/matmul-group.ts), one chunk space of `chunks` chunks over all
   * of them; group chunk c is chunk c − first_j of matmul j's own split. */
  MATMUL_GROUP: spec({
    id: 18, args: ['desc', 'count', 'x', 'q16', 'd', 's', 'm', 'k', 'chunks', 'tmpBase', 'tmpStride'],
    split: { total: 'chunks', unit: 1 }, exports: ['matmulGroup'],
    params: ['desc', 'count', 'x', 'q16', 'd', 's', 'm', 'k', 'lo', 'hi', 'tmp'],
  }),
  /** Block quantization (assembly/quantize.ts) for the load-time and offline quantizers
   * (kernels/wasm/quantizer.ts): chunks of whole blocks. */
  QUANTIZE: spec({
    id: 10, args: ['type', 'src', 'bf16', 'dst', 'blocks', 'tmpBase', 'tmpStride'], split: { total: 'blocks', unit: 1 },
    exports: ['quantizeBlocks'], params: ['type', 'src', 'bf16', 'dst', 'lo', 'hi', 'tmp'],
  }),
  /** RMSNorm / gated RMSNorm (assembly/dense.ts): chunks of whole rows. */
  RMS_NORM: spec({
    id: 15, args: ['out', 'x', 'w', 'wBf16', 'm', 'd', 'eps', 'zeroCentered'], split: { total: 'm', unit: 1 },
    exports: ['rmsNorm'], params: ['out', 'x', 'w', 'wBf16', 'lo', 'hi', 'd', 'eps', 'zeroCentered'],
  }),
  GATED_RMS_NORM: spec({
    id: 16, args: ['out', 'o', 'z', 'w', 'wBf16', 'm', 'd', 'eps', 'order', 'hv'], split: { total: 'm', unit: 1 },
    exports: ['gatedRmsNorm'], params: ['out', 'o', 'z', 'w', 'wBf16', 'lo', 'hi', 'd', 'eps', 'order', 'hv'],
  }),
  /** a·silu(b) or, with `sigmoid` set, a·sigmoid(b): chunks of elements. */
  MUL_ACT: spec({
    id: 17, args: ['out', 'a', 'b', 'n', 'sigmoid'], split: { total: 'n', unit: 4 },
    exports: ['mulSilu', 'mulSigmoid'], select: 'sigmoid', params: ['out', 'a', 'b', 'lo', 'hi'],
  }),
  /** The vision tower's LayerNorm and bias + activation (assembly/tower.ts): chunks of whole rows. */
  LAYER_NORM: spec({
    id: 30, args: ['out', 'x', 'w', 'b', 'm', 'd', 'eps'], split: { total: 'm', unit: 1 },
    exports: ['layerNorm'], params: ['out', 'x', 'w', 'b', 'lo', 'hi', 'd', 'eps'],
  }),
  BIAS_ACT: spec({
    id: 31, args: ['out', 'x', 'bias', 'm', 'd', 'act'], split: { total: 'm', unit: 1 },
    exports: ['biasAct'], params: ['out', 'x', 'bias', 'lo', 'hi', 'd', 'act'],
  }),
  /** Sampling rows (assembly/sampling.ts), one chunk per row; numbered apart from the model ops. */
  SAMPLE: spec({
    id: 20, args: ['desc', 'rows', 'tmpBase', 'tmpStride'], split: { total: 'rows', unit: 1 },
    exports: ['sampleRows'], params: ['desc', 'lo', 'hi', 'tmp'],
  }),
} as const;

export type CommandName = keyof typeof COMMANDS;
type ArgName<C extends CommandName> = (typeof COMMANDS)[C] extends CommandSpec<infer A> ? A : never;
/** Every argument of command C, by name. */
export type CommandArgs<C extends CommandName> = { readonly [K in ArgName<C>]: number };

/** Write `values` into the argument slots of command `cmd`. */
export function packArgs<C extends CommandName>(a: Float64Array, cmd: C, values: CommandArgs<C>): void {
  const names = COMMANDS[cmd].args as readonly ArgName<C>[];
  for (let i = 0; i < names.length; i++) a[i] = values[names[i]!];
}

// ---- the unpacking side, generated once from the table ----

/** Runs chunk c of nc of one command with arguments `a` on thread tid. */
type Invoker = (ex: KernelExports, a: Float64Array, tid: number, c: number, nc: number) => void;

/** The argument slot of `name` in command s. */
function slotOf(s: CommandSpec, name: string): number {
  const i = s.args.indexOf(name);
  if (i < 0) throw new Error(`wasm command ${s.id}: no argument "${name}"`);
  return i;
}

/** The JS expression of parameter p of command s (slots as constants). */
function paramExpr(s: CommandSpec, p: string): string {
  const slot = (name: string): number => slotOf(s, name);
  if (p === 'lo' || p === 'hi') return p;
  if (p === 'tmp') return `a[${slot('tmpBase')}] + tid * a[${slot('tmpStride')}]`;
  if (p === 'chunkAddr') return `a[${slot('base')}] + lo * a[${slot('bytes')}]`;
  return `a[${slot(p)}]`;
}

/** A straight-line invoker for command s: the split (as `share`), then the export call
 * with every parameter read from its slot — generated code, so a call costs what a
 * hand-written one does (a generic loop + apply measured ~8× slower per chunk). */
function generate(s: CommandSpec): Invoker {
  for (const name of s.exports) if (!/^\w+$/.test(name)) throw new Error(`wasm command ${s.id}: bad export name ${name}`);
  const args = s.params.map((p) => paramExpr(s, p)).join(', ');
  const call = (name: string): string => `ex.${name}(${args})`;
  const body = [
    `const total = a[${slotOf(s, s.split.total)}];`,
    `const per = Math.ceil(Math.ceil(total / nc) / ${s.split.unit}) * ${s.split.unit};`,
    'const lo = Math.min(total, c * per);',
    'const hi = Math.min(total, lo + per);',
    'if (lo >= hi) return;',
    s.select ? `if (a[${slotOf(s, s.select)}]) ${call(s.exports[1]!)}; else ${call(s.exports[0])};` : `${call(s.exports[0])};`,
  ].join('\n');
  return new Function('ex', 'a', 'tid', 'c', 'nc', body) as Invoker;
}

const INVOKERS: (Invoker | undefined)[] = [];
for (const s of Object.values(COMMANDS) as CommandSpec[]) INVOKERS[s.id] = generate(s);

/** [lo, hi) of `total` items for thread tid of nt, boundaries multiples of `unit` (the
 * split every invoker computes). */
export function share(total: number, tid: number, nt: number, unit: number): [number, number] {
  const per = Math.ceil(Math.ceil(total / nt) / unit) * unit;
  const lo = Math.min(total, tid * per);
  return [lo, Math.min(total, lo + per)];
}

/** Run chunk c of n of command `cmd` (arguments `a`) on thread tid. */
export function invokeChunk(ex: KernelExports, cmd: number, a: Float64Array, tid: number, c: number, nc: number): void {
  const run = INVOKERS[cmd];
  if (!run) throw new Error(`wasm kernels: unknown command ${cmd}`);
  run(ex, a, tid, c, nc);
}
