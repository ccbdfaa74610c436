// The dispatches of one Gated DeltaNet layer in a decode step (one sequence, one row), as a
// GPU adapter launches them (recorded on any adapter, nothing executed: the launches forced as
// scripts/gpu-batch-model.mjs forces them), for each checkpoint given:
//   node scripts/gdn-layer-dispatches.mjs DIR_OR_GGUF...
// Prints per checkpoint the labels of the first linear layer's dispatches and their count.
import { gpuLikeKernels, recorder } from './gpu-batch-record.mjs';

// the fold on: the fewest dispatches a GPU adapter can take (its default is off: docs/kernels.md)
const k = await gpuLikeKernels({ foldQuantActs: true });
for (const path of process.argv.slice(2)) {
  const r = recorder(k, path);
  const first = r.kinds.indexOf('linear');
  for (const streams of [1, 2]) {
    const layer = r.decode(streams).filter((d) => d.layer === first);
    console.log(`${path} decode M=${streams}: ${layer.length} dispatches in linear layer ${first}: ${layer.map((d) => d.label).join(' | ')}`);
  }
}
k.dispose();
