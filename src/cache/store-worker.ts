// Worker thread of WorkerStoreWriter (store-writer.ts): runs each save request on the
// real file system, in order, and replies to every one.
import { parentPort } from 'node:worker_threads';
import { NODE_IO } from './store-io.js';
import { StoreOps, handleStoreRequest, type StoreRequest } from './store-writer.js';

const ops = new StoreOps(NODE_IO);
parentPort!.on('message', (m: StoreRequest) => parentPort!.postMessage(handleStoreRequest(ops, m)));
