// Worker thread of WorkerStoreWriter (store-writer.ts): runs each save request on the
// real file system, in order, and replies to every one.
import { parentPort } from 'node:worker_threads';
import { NODE_IO } from './store-io.js';
import { StoreOps, handleStoreRequest, type StoreRequest } from './store-writer.js';

const ops = new StoreOps(NODE_IO);
parentPort!.on('message', (m: StoreRequest) => {
  const reply = handleStoreRequest(ops, m);
  // an appended piece's buffer goes back to the engine thread for the next piece
  parentPort!.postMessage(reply, reply.ok && reply.buffer ? [reply.buffer] : []);
});
