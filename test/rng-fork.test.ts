// Rng.fork (util/rng.ts): a fork continues the generator's own sequence (next, nextU32 and
// normal, a pending polar spare included) and leaves the generator as it was, so the MTP
// drafter can look ahead at a round's uniforms and then advance the request's draft rng by the
// number its exact drafts used (speculative/draft-device.ts).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Rng } from '../src/util/rng.js';

test('Rng.fork: the same sequence as the original from the fork point, the original untouched', () => {
  const a = new Rng(1234);
  for (let i = 0; i < 5; i++) a.next();
  a.normal(); // leaves a spare pending
  const f = a.fork();
  const ahead = [f.normal(), f.next(), f.nextU32(), f.normal(), f.next()];
  const twin = new Rng(1234);
  for (let i = 0; i < 5; i++) twin.next();
  twin.normal();
  const want = [twin.normal(), twin.next(), twin.nextU32(), twin.normal(), twin.next()];
  assert.deepEqual(ahead, want, 'the fork continues the sequence');
  assert.deepEqual([a.normal(), a.next(), a.nextU32(), a.normal(), a.next()], want, 'the original was not advanced by the fork');
});
