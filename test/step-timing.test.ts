// Where a step's timestamp queries go (src/kernels/webgpu/timing.ts), without a GPU: 'step'
// brackets the step — the first pass's beginning and the last pass's end, whatever copies
// split the passes — and 'dispatch' gives each dispatch its own pair.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { passTimestamps, stepGpuTimes, timingQueries } from '../src/kernels/webgpu/timing.js';

const D = true; // a dispatch
const C = false; // a copy (ends the open pass)

test("'step': query 0 where the first pass begins, query 1 where the last pass ends", () => {
  // passes begin at ops 0, 3 and 5 (copies at 2 and 4)
  assert.deepEqual(passTimestamps('step', [D, D, C, D, C, D, D]),
    [{ beginningOfPassWriteIndex: 0 }, undefined, undefined, undefined, undefined, { endOfPassWriteIndex: 1 }, undefined]);
  assert.deepEqual(passTimestamps('step', [C, D, D]), [undefined, { beginningOfPassWriteIndex: 0, endOfPassWriteIndex: 1 }, undefined], 'one pass: both');
  assert.deepEqual(passTimestamps('step', [D, C]), [{ beginningOfPassWriteIndex: 0, endOfPassWriteIndex: 1 }, undefined], 'a trailing copy is outside');
  assert.deepEqual(passTimestamps('step', [C, C]), [undefined, undefined], 'no dispatch: nothing timed');
  assert.equal(timingQueries('step', 7), 2);
  assert.equal(timingQueries('step', 0), 0);
});

test("'dispatch': a pair per dispatch in order; 'none': nothing", () => {
  assert.deepEqual(passTimestamps('dispatch', [D, C, D, D]), [
    { beginningOfPassWriteIndex: 0, endOfPassWriteIndex: 1 }, undefined,
    { beginningOfPassWriteIndex: 2, endOfPassWriteIndex: 3 }, { beginningOfPassWriteIndex: 4, endOfPassWriteIndex: 5 }]);
  assert.equal(timingQueries('dispatch', 3), 6);
  assert.deepEqual(passTimestamps('none', [D, D, C, D]), [undefined, undefined, undefined, undefined]);
  assert.equal(timingQueries('none', 5), 0);
});

test('a chunked step (several submits): span from the first begin to the last end, busy the sum of the submits\' spans', () => {
  const ts = (...ns: number[]): BigInt64Array => BigInt64Array.from(ns.map(BigInt));
  // submits at [100, 150], [170, 260], [300, 310]: gaps of 20 and 40 ns where the GPU waited
  const step = stepGpuTimes('step', [{ ts: ts(100, 150), labels: [] }, { ts: ts(170, 260), labels: [] }, { ts: ts(300, 310), labels: [] }]);
  assert.equal(step.spanNs, 210);
  assert.equal(step.busyNs, 50 + 90 + 10);
  assert.deepEqual(stepGpuTimes('step', [{ ts: ts(5, 45), labels: [] }]), { spanNs: 40, busyNs: 40, dispatches: [] }, 'one submit: span = busy');
  const each = stepGpuTimes('dispatch', [{ ts: ts(0, 3, 5, 9), labels: ['a', 'b'] }, { ts: ts(20, 22), labels: ['c'] }]);
  assert.deepEqual(each.dispatches, [{ label: 'a', ns: 3 }, { label: 'b', ns: 4 }, { label: 'c', ns: 2 }]);
  assert.equal(each.busyNs, 9);
  assert.deepEqual(stepGpuTimes('none', []), { spanNs: 0, busyNs: 0, dispatches: [] });
});
