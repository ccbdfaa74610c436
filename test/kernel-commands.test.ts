// The wasm command table (src/kernels/wasm/commands.ts) against the kernel sources: every
// export a command calls exists in assembly/*.ts with exactly the table's parameter list
// (argument names match the AssemblyScript parameter names position by position), and the
// generated unpacking hands each export the values the generated packing wrote.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { COMMANDS, type CommandSpec, invokeChunk, packArgs, share } from '../src/kernels/wasm/commands.js';
import { ARGS, Cmd } from '../src/kernels/wasm/exec.js';
import type { KernelExports } from '../src/kernels/wasm/module.js';
import { D, DESC, FLAGS } from '../src/kernels/wasm/sample-desc.js';
import { REPO_ROOT } from './paths.js';

/** Parameter names of every `export function` in assembly/*.ts. */
function assemblyExports(): Map<string, string[]> {
  const dir = join(REPO_ROOT, 'assembly');
  const out = new Map<string, string[]>();
  for (const f of readdirSync(dir).filter((n) => n.endsWith('.ts'))) {
    const src = readFileSync(join(dir, f), 'utf8');
    for (const m of src.matchAll(/export function (\w+)(?:<[^>]*>)?\(([^)]*)\)/g)) {
      const params = m[2]!.split(',').map((p) => p.trim()).filter((p) => p !== '').map((p) => p.split(':')[0]!.trim());
      out.set(m[1]!, params);
    }
  }
  return out;
}

const specs = Object.entries(COMMANDS) as [string, CommandSpec][];
const PER_CHUNK = new Set(['lo', 'hi', 'tmp', 'chunkAddr']);

test('command table: every export exists in assembly/ with the table\'s parameters, in order', () => {
  const exports = assemblyExports();
  assert.ok(exports.size > 20, `parsed only ${exports.size} exports from assembly/`);
  for (const [name, s] of specs) {
    for (const fn of s.exports) {
      const params = exports.get(fn);
      assert.ok(params, `${name}: assembly/ has no export ${fn}`);
      assert.equal(params.length, s.params.length, `${name} → ${fn}(${params.join(', ')}) vs table (${s.params.join(', ')})`);
      s.params.forEach((p, i) => {
        if (!PER_CHUNK.has(p)) assert.equal(params[i], p, `${name} → ${fn}: parameter ${i} is ${params[i]} in assembly/, ${p} in the table`);
      });
    }
  }
});

test('command table: ids unique and distinct from the barrier commands; arguments fit the slots', () => {
  const ids = specs.map(([, s]) => s.id);
  assert.equal(new Set(ids).size, ids.length);
  for (const id of ids) assert.ok(id !== Cmd.EXIT && id !== Cmd.ADD_ARENA);
  for (const [name, s] of specs) {
    assert.ok(s.args.length <= ARGS, `${name}: ${s.args.length} arguments > ${ARGS} slots`);
    assert.equal(new Set(s.args).size, s.args.length, `${name}: duplicate argument names`);
    for (const p of s.params) assert.ok(PER_CHUNK.has(p) || s.args.includes(p), `${name}: parameter ${p} is no argument`);
  }
});

test('command table: packArgs then invokeChunk hands every export the packed values', () => {
  for (const [name, s] of specs) {
    const values: Record<string, number> = {};
    s.args.forEach((a, i) => (values[a] = 1000 + 7 * i));
    values[s.split.total] = 100; // 100 units over 3 chunks
    if (s.select) values[s.select] = 1;
    const a = new Float64Array(ARGS);
    packArgs(a, name as keyof typeof COMMANDS, values as never);
    const calls: { fn: string; args: number[] }[] = [];
    const ex = new Proxy({}, { get: (_, fn) => (...args: number[]) => void calls.push({ fn: String(fn), args }) }) as KernelExports;
    const tid = 1;
    invokeChunk(ex, s.id, a, tid, 1, 3);
    const [lo, hi] = share(100, 1, 3, s.split.unit);
    assert.equal(calls.length, 1, name);
    assert.equal(calls[0]!.fn, s.exports[s.select ? 1 : 0], name);
    const expected = s.params.map((p) => (p === 'lo' ? lo : p === 'hi' ? hi : p === 'tmp' ? values['tmpBase']! + tid * values['tmpStride']!
      : p === 'chunkAddr' ? values['base']! + lo * values['bytes']! : values[p]!));
    assert.deepEqual(calls[0]!.args, expected, name);
    // a chunk past the units calls nothing
    calls.length = 0;
    invokeChunk(ex, s.id, a, 0, 150, 200);
    assert.equal(calls.length, 0, `${name}: empty chunk ran`);
  }
});

test('sampling row descriptor: slots, size and flags == the D_* / DESC / F_* constants of assembly/sampling.ts', () => {
  const src = readFileSync(join(REPO_ROOT, 'assembly', 'sampling.ts'), 'utf8');
  const consts = new Map([...src.matchAll(/^(?:export )?const (\w+)(?:: i32)? = (\d+);/gm)].map((m) => [m[1]!, Number(m[2])]));
  const slots = [...consts.keys()].filter((k) => k.startsWith('D_'));
  assert.equal(slots.length, Object.keys(D).length, `assembly has ${slots.join(', ')}`);
  for (const [name, slot] of Object.entries(D)) assert.equal(consts.get(`D_${name}`), slot, `D_${name}`);
  assert.equal(consts.get('DESC'), DESC);
  for (const [name, bit] of Object.entries(FLAGS)) assert.equal(consts.get(`F_${name}`), bit, `F_${name}`);
});
