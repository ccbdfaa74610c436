// Where a step's timestamp queries go (src/kernels/webgpu/timing.ts), without a GPU: 'step'
// brackets the step — the first pass's beginning and the last pass's end, whatever copies
// split the passes — and 'dispatch' gives each dispatch its own pair.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { passTimestamps, timingQueries } from '../src/kernels/webgpu/timing.js';

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
