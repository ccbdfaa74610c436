#!/usr/bin/env node
// deltaserve <command> [options]
// Exit codes: 0 success; 2 a user error (bad flag, missing file, bad model: one line on
// stderr, no stack); 1 an internal error (logged with its stack).
import { DeltaserveError } from '../util/errors.js';
import { packageInfo } from '../util/version.js';
import { glueNegativeNumbers } from './args.js';
import { BENCH_HELP, runBench } from './bench.js';
import { CHAT_HELP, runChat } from './chat.js';
import { ENGINE_FLAGS } from './engine-flags.js';
import { inheritStderrTty, needsDawnFilter, runFiltered } from './dawn-stderr.js';
import { EVAL_HELP, runEval } from './eval.js';
import { GENERATE_HELP, runGenerate } from './generate.js';
import { MAKE_MODEL_HELP, runMakeModel } from './make-model.js';
import { LIST_HELP, PULL_HELP, runList, runPull } from './models.js';
import { QUANTIZE_HELP, runQuantize } from './quantize.js';
import { SERVE_HELP, runServe } from './serve.js';

interface Command {
  readonly summary: string;
  readonly help: string;
  readonly run: (argv: string[]) => Promise<void>;
  /** Takes the shared engine flags (ENGINE_FLAGS). */
  readonly engine: boolean;
}

const COMMANDS: Readonly<Record<string, Command>> = {
  serve: { summary: 'OpenAI-compatible HTTP server (/v1/chat/completions, /v1/completions, /metrics, ...)', help: SERVE_HELP, run: runServe, engine: true },
  chat: { summary: 'interactive chat in the terminal (streams, keeps the conversation, /help for commands)', help: CHAT_HELP, run: runChat, engine: true },
  generate: { summary: 'generate text for a prompt, chat messages or a JSONL batch', help: GENERATE_HELP, run: runGenerate, engine: true },
  eval: { summary: 'accuracy on chat JSONL eval sets (optionally MTP off vs on)', help: EVAL_HELP, run: runEval, engine: true },
  'make-model': { summary: 'write a random-weight checkpoint of a real model shape (for benchmarks)', help: MAKE_MODEL_HELP, run: runMakeModel, engine: false },
  quantize: { summary: 'quantize a Hugging Face checkpoint once into a GGUF file (q8_0, q6_k, q4_k_m, ...)', help: QUANTIZE_HELP, run: runQuantize, engine: false },
  bench: { summary: 'time decode / verify / prefill steps against the memory-bandwidth roofline', help: BENCH_HELP, run: runBench, engine: false },
  pull: { summary: 'download a model (org/name, or org/name:Q4_K_M from a GGUF repository) into the Hugging Face cache', help: PULL_HELP, run: runPull, engine: false },
  list: { summary: 'the models in the Hugging Face cache, with their sizes and files', help: LIST_HELP, run: runList, engine: false },
};

function topHelp(): string {
  const width = Math.max(...Object.keys(COMMANDS).map((c) => c.length)) + 2;
  const lines = Object.entries(COMMANDS).map(([name, c]) => `  ${name.padEnd(width)}${c.summary}`);
  return `deltaserve ${packageInfo().version} — inference engine for Qwen3.5 / Qwen3-Next hybrid models

Usage: deltaserve <command> [options]

Commands:
${lines.join('\n')}
  ${'help'.padEnd(width)}this help; "deltaserve help <command>" or "deltaserve <command> --help" for a command's options

Options: --help, -h (this help), --version (print the version)
`;
}

/** A command's help, plus any shared engine flag its text does not mention yet (so a flag
 * added to ENGINE_FLAGS always shows up). */
function commandHelp(name: string): string {
  const c = COMMANDS[name];
  if (!c) throw new DeltaserveError('bad_request', `unknown command "${name}" (run "deltaserve help")`);
  const missing = c.engine ? Object.entries(ENGINE_FLAGS).filter(([flag]) => !new RegExp(`--${flag}\\b`).test(c.help)) : [];
  const extra = missing.map(([flag, o]) => `  --${flag}${o.type === 'string' ? ' VALUE' : ''}`);
  return [c.help, ...extra].join('\n') + '\n';
}

const wantsHelp = (argv: readonly string[]): boolean => argv.includes('--help') || argv.includes('-h');

async function main(argv: string[]): Promise<void> {
  inheritStderrTty();
  if (needsDawnFilter(argv)) {
    process.exitCode = await runFiltered();
    return;
  }
  const [cmd, ...rest] = argv;
  if (cmd === '--version' || cmd === '-V' || cmd === 'version') {
    process.stdout.write(`deltaserve ${packageInfo().version}\n`);
    return;
  }
  if (cmd === undefined || cmd === 'help' || cmd === '--help' || cmd === '-h') {
    process.stdout.write(rest[0] !== undefined && cmd === 'help' ? commandHelp(rest[0]) : topHelp());
    return;
  }
  const c = COMMANDS[cmd];
  if (!c) throw new DeltaserveError('bad_request', `unknown command "${cmd}" (run "deltaserve help")`);
  if (wantsHelp(rest)) {
    process.stdout.write(commandHelp(cmd));
    return;
  }
  return c.run(glueNegativeNumbers(rest));
}

/** A mistake of the user's (bad flag, value, file, model): reported in one line. */
function isUserError(e: unknown): boolean {
  if (e instanceof DeltaserveError) return e.code !== 'internal';
  const code = (e as { code?: unknown } | null)?.code;
  return typeof code === 'string' && code.startsWith('ERR_PARSE_ARGS');
}

main(process.argv.slice(2)).catch((e: unknown) => {
  if (isUserError(e)) {
    const first = (e as Error).message.split('\n')[0];
    const cmd = process.argv[2];
    const hint = !(e instanceof DeltaserveError) && cmd && COMMANDS[cmd] ? ` (see "deltaserve ${cmd} --help")` : '';
    process.stderr.write(`deltaserve: ${first}${hint}\n`);
    process.exit(2);
  }
  process.stderr.write(`deltaserve: internal error: ${e instanceof Error ? e.stack ?? e.message : String(e)}\n`);
  process.exit(1);
});
