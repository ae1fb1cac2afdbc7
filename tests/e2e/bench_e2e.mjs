// `tensorfold bench` against `tensorfold serve` on the bundled demo model, on the CPU:
//   TF_BIN=build/tensorfold TF_CKPT=models/demo-lighton node tests/e2e/bench_e2e.mjs
// - with --vision: every request completes, counts add up (done + errors = requests), tokens come from
//   the usage block (requests x max-tokens with eos ignored), --json parses, the table and the stderr
//   progress line are printed;
// - without --vision: every image request is refused with a 400 and bench reports them as errors with
//   the server's message (exit 3), never as successes;
// - a URL where nothing listens: one line on stderr and exit 1; bad flags: exit 2.
// Exit 0: all passed; 1: a check failed; 77: skipped (a prerequisite is missing).
import { spawn } from 'node:child_process';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { assert, Checks, eq, requireFiles, Server } from './lib.mjs';

const env = process.env;
requireFiles([['TF_BIN', env.TF_BIN], ['TF_CKPT', env.TF_CKPT]]);
const examples = new URL('../../examples', import.meta.url).pathname;
const pages = ['line1.png', 'line2.png', 'paragraph.png'];
requireFiles(pages.map((p) => [p, path.join(examples, p)]));
const dir = mkdtempSync(path.join(tmpdir(), 'tf-bench-'));
for (const p of pages) copyFileSync(path.join(examples, p), path.join(dir, p));

const MAX_TOKENS = 6;
const REQUESTS = 4;
const LEVELS = [1, 3];
const checks = new Checks();

function bench(args) {
  return new Promise((resolve) => {
    const p = spawn(env.TF_BIN, ['bench', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (d) => { stdout += d; });
    p.stderr.on('data', (d) => { stderr += d; });
    p.on('exit', (code, signal) => resolve({ code: code ?? `signal ${signal}`, stdout, stderr }));
  });
}
const common = ['--images', dir, '--requests', String(REQUESTS), '--max-tokens', String(MAX_TOKENS)];
const show = (r) => `exit ${r.code}\nstdout:\n${r.stdout}\nstderr:\n${r.stderr}`;
function parse(r) {
  try {
    return JSON.parse(r.stdout);
  } catch (e) {
    throw new Error(`--json output does not parse (${e.message}): ${show(r)}`);
  }
}

const vision = await Server.start(env.TF_BIN, [env.TF_CKPT, '--vision']);
let textOnly = null;
try {
  await vision.waitHealthy();

  await checks.run('vision server: counts add up, usage tokens, --json parses', async () => {
    const r = await bench([vision.base, ...common, '--concurrency', LEVELS.join(','), '--ignore-eos', '--json']);
    eq(r.code, 0, `exit code (${show(r)})`);
    const j = parse(r);
    eq(j.images, pages.length, 'images');
    eq(j.levels.map((l) => l.concurrency), LEVELS, 'levels');
    for (const l of j.levels) {
      const where = `concurrency ${l.concurrency}: ${JSON.stringify(l)}`;
      eq(l.done + l.errors, REQUESTS, `done + errors = requests, ${where}`);
      eq(l.done, REQUESTS, `done, ${where}`);
      eq(l.errors, 0, `errors, ${where}`);
      eq(l.aborted + l.not_sent, 0, `aborted + not_sent, ${where}`);
      eq(l.output_tokens, REQUESTS * MAX_TOKENS, `output tokens (eos ignored), ${where}`);
      eq(l.tokens_from, 'usage', `token counts from the usage block, ${where}`);
      assert(l.output_tokens_per_s > 0 && l.pages_per_s > 0, `throughput, ${where}`);
      assert(l.ttft_ms.p50 > 0 && l.ttft_ms.p99 >= l.ttft_ms.p50, `TTFT, ${where}`);
      assert(l.itl_ms.p50 !== null && l.e2e_s.p99 >= l.e2e_s.p50, `ITL and E2E, ${where}`);
      eq(l.first_error, null, `first_error, ${where}`);
    }
  });

  await checks.run('vision server: table on stdout, progress on stderr', async () => {
    const r = await bench([vision.base, ...common, '--concurrency', '2']);
    eq(r.code, 0, `exit code (${show(r)})`);
    assert(/^\| concurrency \| requests \| done \| errors \| pages\/s \| output tok\/s \|/m.test(r.stdout), show(r));
    assert(new RegExp(`^\\| +2 \\| +${REQUESTS} \\| +${REQUESTS} \\| +0 \\|`, 'm').test(r.stdout), show(r));
    assert(/concurrency 2: 4\/4 sent, 4 done, 0 errors/.test(r.stderr), `progress line: ${show(r)}`);
  });

  textOnly = await Server.start(env.TF_BIN, [env.TF_CKPT]);
  await textOnly.waitHealthy();

  await checks.run('text-only server: image requests are errors with the 400 message', async () => {
    const r = await bench([textOnly.base, ...common, '--concurrency', '2', '--json']);
    eq(r.code, 3, `exit code (${show(r)})`);
    const l = parse(r).levels[0];
    eq([l.done, l.errors], [0, REQUESTS], `done, errors: ${JSON.stringify(l)}`);
    assert(l.first_error.startsWith('HTTP 400: image inputs are unsupported'), `first_error: ${l.first_error}`);
    const t = await bench([textOnly.base, ...common, '--concurrency', '1']);
    eq(t.code, 3, `table run exit code (${show(t)})`);
    assert(t.stdout.includes(`concurrency 1: ${REQUESTS} of ${REQUESTS} requests failed; first: HTTP 400: image inputs`),
      show(t));
  });

  await checks.run('nothing listening: one line on stderr, exit 1', async () => {
    eq(await textOnly.stop(), 0, 'text-only server exit code on SIGTERM');
    const r = await bench([textOnly.base, ...common, '--json']);
    eq(r.code, 1, `exit code (${show(r)})`);
    eq(r.stdout, '', 'stdout');
    const lines = r.stderr.trimEnd().split('\n');
    eq(lines.length, 1, `stderr lines: ${show(r)}`);
    assert(lines[0].startsWith(`tensorfold bench: cannot reach ${textOnly.base}: `), show(r));
  });

  await checks.run('bad flags: exit 2', async () => {
    for (const args of [[vision.base], [vision.base, '--images', dir, '--concurrency', '0'],
      ['localhost:1', '--images', dir], [vision.base, '--images', dir, '--frobnicate']]) {
      const r = await bench(args);
      eq(r.code, 2, `${args.join(' ')}: ${show(r)}`);
    }
  });

  await checks.run('vision server: exits 0 on SIGTERM', async () => {
    eq(await vision.stop(), 0, `exit code; log:\n${vision.log.slice(-2000)}`);
  });
} finally {
  await vision.stop();
  if (textOnly) await textOnly.stop();
  rmSync(dir, { recursive: true, force: true });
}
console.log(`${checks.passes} passed, ${checks.failures} failed`);
process.exit(checks.failures ? 1 : 0);
