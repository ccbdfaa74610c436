// The command protocol shared by the main thread and the workers: a control block of
// Int32 slots plus Float64 arguments in one SharedArrayBuffer, and `executeChunk`, which
// runs chunk c of n of a command. Work is split only along output elements (matmul: output
// columns in 8-column panels; attention: (block of query tokens, run of heads) units; Gated
// DeltaNet: value heads; conv: channels), so every element is computed by exactly the same code whatever the
// thread count or chunking (split invariance). Chunks are claimed dynamically, so a
// descheduled worker delays nobody: the main thread takes its chunks.
import type { KernelExports } from './module.js';
import { COMMANDS, type CommandName, invokeChunk } from './commands.js';

export { share } from './commands.js';

/** Int32 slots of the control block. */
export const GEN = 0; // bumped by the main thread for every command
export const DONE = 1; // workers finished with the current command
export const SLEEPERS = 2; // workers blocked in Atomics.wait on GEN
export const CMD = 3;
export const ARENA = 4; // arena index (the instance to run on)
export const ERROR = 5; // non-zero: a worker failed (its tid)
export const MAIN_WAITING = 6; // the main thread sleeps on DONE / CHUNKS_DONE
export const CLAIM = 7; // (GEN & 0x7fff) << 16 | next unclaimed chunk
export const NCHUNKS = 8;
export const CHUNKS_DONE = 9;
export const BGEN = 10; // GEN of the latest barrier command (workers run each once)
/** A CLAIM value no command's tag matches (tags are ≤ 0x7fff << 16). */
export const NO_CLAIM = -1;
export const CTL_INTS = 16;
export const ARGS_OFFSET = CTL_INTS * 4;
export const ARGS = 32;
export const CTL_BYTES = ARGS_OFFSET + ARGS * 8;

/** Command ids: the barrier commands, then the chunked ones of commands.ts. */
export const Cmd = {
  EXIT: 1,
  ADD_ARENA: 2,
  ...(Object.fromEntries(Object.entries(COMMANDS).map(([name, c]) => [name, c.id])) as { readonly [C in CommandName]: (typeof COMMANDS)[C]['id'] }),
} as const;

/** Tag of generation g in the CLAIM word. */
export function claimTag(g: number): number {
  return (g & 0x7fff) << 16;
}

/** Claim the next chunk of the command tagged `tag` (n chunks); -1 when none is left or
 * the command is no longer current. A successful claim proves the command's arguments
 * read before it are still current (the main thread rewrites them only after every chunk
 * has completed). */
export function claim(ctl: Int32Array, tag: number, n: number): number {
  for (;;) {
    const v = Atomics.load(ctl, CLAIM);
    if ((v & ~0xffff) !== tag) return -1;
    const c = v & 0xffff;
    if (c >= n) return -1;
    if (Atomics.compareExchange(ctl, CLAIM, v, v + 1) === v) return c;
  }
}

/** Run chunk c of n of command `cmd` with arguments `a` on thread tid (tid selects the
 * per-thread scratch). Argument layouts and calls: the table in commands.ts. */
export const executeChunk = invokeChunk;

/** Run every chunk of a command on the calling thread. */
export function executeAll(ex: KernelExports, cmd: number, a: Float64Array, nc: number): void {
  for (let c = 0; c < nc; c++) executeChunk(ex, cmd, a, 0, c, nc);
}
