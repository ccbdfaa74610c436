#!/usr/bin/env node
// deltaserve <command> [options]
import { DeltaserveError } from '../util/errors.js';
import { GENERATE_HELP, runGenerate } from './generate.js';
import { MAKE_MODEL_HELP, runMakeModel } from './make-model.js';
import { BENCH_HELP, runBench } from './bench.js';
import { SERVE_HELP, runServe } from './serve.js';
import { EVAL_HELP, runEval } from './eval.js';

const HELP = `deltaserve — inference engine for Qwen3.5 / Qwen3-Next hybrid models

Commands:
  serve       OpenAI-compatible HTTP server (/v1/chat/completions, /v1/completions, /metrics, ...)
  generate    generate text for a prompt, chat messages or a JSONL batch
  eval        accuracy on chat JSONL eval sets (optionally MTP off vs on)
  make-model  write a random-weight checkpoint of a real model shape (for benchmarks)
  bench       time decode / verify / prefill steps against the memory-bandwidth roofline
  help        show this help

${SERVE_HELP}

${GENERATE_HELP}

${EVAL_HELP}

${MAKE_MODEL_HELP}

${BENCH_HELP}
`;

async function main(argv: string[]): Promise<void> {
  const [cmd, ...rest] = argv;
  switch (cmd) {
    case 'serve':
      return runServe(rest);
    case 'generate':
      return runGenerate(rest);
    case 'eval':
      return runEval(rest);
    case 'make-model':
      return runMakeModel(rest);
    case 'bench':
      return runBench(rest);
    case undefined:
    case 'help':
    case '--help':
    case '-h':
      process.stdout.write(HELP);
      return;
    default:
      throw new DeltaserveError('bad_request', `unknown command "${cmd}" (run "deltaserve help")`);
  }
}

main(process.argv.slice(2)).catch((e: unknown) => {
  // User-caused errors print their message only; anything else keeps its stack.
  if (e instanceof DeltaserveError && e.code !== 'internal') process.stderr.write(`deltaserve: ${e.message}\n`);
  else if (e instanceof Error && e.name === 'TypeError' && /parseArgs|ERR_PARSE_ARGS/.test(String((e as { code?: string }).code))) process.stderr.write(`deltaserve: ${e.message}\n`);
  else process.stderr.write(`deltaserve: ${e instanceof Error ? e.stack ?? e.message : String(e)}\n`);
  process.exit(1);
});
