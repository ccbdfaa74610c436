// The head-permutation rows of model/layers.ts permuteHeads (model/head-gather.ts), cached per
// (order, M): the cached array equals a freshly built one, the same object comes back for the
// same (order, M), each order keeps at most HEAD_ROWS_CACHED arrays (least recently used out),
// and two orders of one length keep their own rows.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { buildHeadGatherRows, HEAD_ROWS_CACHED, headGatherRows, headRowsCached } from '../src/model/head-gather.js';

test('headGatherRows: == a fresh build (i·HV + order[j] by hand), one array per (order, M)', () => {
  const order = Int32Array.from([2, 0, 3, 1]);
  const want = [2, 0, 3, 1, 6, 4, 7, 5, 10, 8, 11, 9];
  assert.deepEqual([...buildHeadGatherRows(order, 3)], want);
  const a = headGatherRows(order, 3);
  assert.deepEqual([...a], want);
  assert.equal(headGatherRows(order, 3), a, 'the cached array');
  // another order of the same length and M: its own rows
  const other = Int32Array.from([1, 0, 3, 2]);
  assert.deepEqual(headGatherRows(other, 3), buildHeadGatherRows(other, 3));
  assert.notDeepEqual([...headGatherRows(other, 3)], want);
  assert.deepEqual(headGatherRows(order, 1), buildHeadGatherRows(order, 1));
  assert.deepEqual(headGatherRows(order, 0), new Int32Array(0));
});

test('headGatherRows: at most HEAD_ROWS_CACHED arrays an order, the least recently used dropped, rebuilt equal', () => {
  const order = Int32Array.from({ length: 8 }, (_, j) => (j * 5) % 8);
  const first = headGatherRows(order, 1);
  for (let m = 2; m <= 3 * HEAD_ROWS_CACHED; m++) {
    const rows = headGatherRows(order, m);
    assert.deepEqual(rows, buildHeadGatherRows(order, m), `M = ${m}`);
    assert.ok(headRowsCached(order) <= HEAD_ROWS_CACHED, `${headRowsCached(order)} cached at M = ${m}`);
    if (m <= HEAD_ROWS_CACHED) assert.equal(headGatherRows(order, 1), first, 'M = 1 kept while used');
  }
  assert.equal(headRowsCached(order), HEAD_ROWS_CACHED);
  const again = headGatherRows(order, 1);
  assert.notEqual(again, first, 'M = 1 was dropped (least recently used) and rebuilt');
  assert.deepEqual(again, first);
});
