// Bounded load run against `tensorfold serve` (prints a table; also a CTest check of the limits below).
//   TF_BASE_URL=http://127.0.0.1:PORT [TF_SERVER_PID=pid] node tests/e2e/load.mjs   (a running server)
//   TF_BIN=build/tensorfold TF_CKPT=ckpt node tests/e2e/load.mjs   (starts one: --vision --parallel 8)
//   [TF_LOAD_N=500] [TF_LOAD_CONC=32] [TF_LOAD_MAX_TOKENS=16]
// Runs the same mix twice (chat, streamed chat, completions, a request that must get 400, and a
// stream the client abandons after its first chunk) and
// fails on any 5xx, any unexpected status, server RSS growth between the two runs beyond
// TF_LOAD_RSS_SLACK_MB (default 8), or (when it started the server) a SIGTERM exit other than 0.
import { readFileSync } from 'node:fs';
import { requireFiles, Server, SKIP } from './lib.mjs';

const env = process.env;
let server = null;
if (!env.TF_BASE_URL && (env.TF_BIN || env.TF_CKPT)) {
  requireFiles([['TF_BIN', env.TF_BIN], ['TF_CKPT', env.TF_CKPT]]);
  server = await Server.start(env.TF_BIN, [env.TF_CKPT, '--vision', '--parallel', '8']);
  await server.waitHealthy();
  env.TF_SERVER_PID = String(server.pid);
}
const base = server ? server.base : (env.TF_BASE_URL ?? '').replace(/\/$/, '');
if (!base) {
  console.log('SKIP: set TF_BASE_URL, or TF_BIN and TF_CKPT');
  process.exit(SKIP);
}
const N = Number(env.TF_LOAD_N ?? 500);
const CONC = Number(env.TF_LOAD_CONC ?? 32);
const maxTokens = Number(env.TF_LOAD_MAX_TOKENS ?? 16);
const headers = { 'Content-Type': 'application/json', Authorization: `Bearer ${env.TF_API_KEY ?? 'unused'}` };

function rssMb() {
  if (!env.TF_SERVER_PID) return NaN;
  const m = readFileSync(`/proc/${env.TF_SERVER_PID}/status`, 'utf8').match(/VmRSS:\s+(\d+) kB/);
  return m ? Number(m[1]) / 1024 : NaN;
}

function request(i) {
  const messages = [{ role: 'user', content: `Request ${i % 50}: say something short.` }];
  switch (i % 5) {
    case 0: return ['/v1/chat/completions', { messages, max_tokens: maxTokens, temperature: 0 }, 200];
    case 4: return ['/v1/chat/completions', { messages, max_tokens: 2000, ignore_eos: true, stream: true }, 'abort'];
    case 1: return ['/v1/chat/completions', { messages, max_tokens: maxTokens, temperature: 0.7, seed: i, stream: true,
                                             stream_options: { include_usage: true } }, 200];
    case 2: return ['/v1/completions', { prompt: `Item ${i % 50}:`, max_tokens: maxTokens, temperature: 0 }, 200];
    default: return ['/v1/chat/completions', { messages, n: 2 }, 400];
  }
}

async function one(i, stats) {
  const [path, body, want] = request(i);
  const t0 = performance.now();
  if (want === 'abort') {
    // The client leaves after the first chunk: the engine drops the request and frees its memory
    // (checked by the RSS comparison of the two runs).
    const ac = new AbortController();
    const r = await fetch(base + path, { method: 'POST', headers, body: JSON.stringify(body), signal: ac.signal });
    const reader = r.body.getReader();
    await reader.read();
    ac.abort();
    // Not another read(): when the whole response had already arrived before the abort, undici can
    // leave that read pending forever. cancel() settles at once on an errored or closed stream.
    await reader.cancel().catch(() => {});
    stats.latency.push(performance.now() - t0);
    stats.status[`${r.status} aborted`] = (stats.status[`${r.status} aborted`] ?? 0) + 1;
    if (r.status !== 200) stats.unexpected.push(`${path} ${r.status} (stream to abort)`);
    return;
  }
  const r = await fetch(base + path, { method: 'POST', headers, body: JSON.stringify(body) });
  const text = await r.text();
  stats.latency.push(performance.now() - t0);
  stats.status[r.status] = (stats.status[r.status] ?? 0) + 1;
  if (r.status !== want) stats.unexpected.push(`${path} ${r.status}: ${text.slice(0, 200)}`);
  if (body.stream && r.status === 200 && !text.endsWith('data: [DONE]\n\n')) stats.unexpected.push('stream without [DONE]');
}

async function run() {
  const stats = { status: {}, latency: [], unexpected: [] };
  let next = 0;
  const t0 = performance.now();
  await Promise.all(Array.from({ length: CONC }, async () => {
    for (let i = next++; i < N; i = next++) {
      try {
        await one(i, stats);
      } catch (e) {
        stats.unexpected.push(`request ${i}: ${e}`);
      }
    }
  }));
  stats.seconds = (performance.now() - t0) / 1000;
  stats.latency.sort((a, b) => a - b);
  return stats;
}

const rss0 = rssMb();
const runs = [];
for (let k = 0; k < 2; k++) runs.push({ stats: await run(), rss: rssMb() });
console.log(`requests=${N} connections=${CONC} max_tokens=${maxTokens} server RSS before=${rss0.toFixed(1)} MiB`);
console.log('run | seconds | req/s | p50 ms | p99 ms | statuses | RSS after (MiB)');
runs.forEach(({ stats, rss }, k) => {
  const p = (q) => stats.latency[Math.min(stats.latency.length - 1, Math.floor(q * stats.latency.length))].toFixed(1);
  console.log(`${k + 1} | ${stats.seconds.toFixed(2)} | ${(N / stats.seconds).toFixed(1)} | ${p(0.5)} | ${p(0.99)} | ` +
              `${JSON.stringify(stats.status)} | ${rss.toFixed(1)}`);
});
let bad = 0;
for (const { stats } of runs) {
  for (const u of stats.unexpected.slice(0, 10)) console.log(`unexpected: ${u}`);
  bad += stats.unexpected.length + Object.keys(stats.status).filter((s) => Number(s) >= 500).length;
}
const growth = runs[1].rss - runs[0].rss;
const slack = Number(env.TF_LOAD_RSS_SLACK_MB ?? 8);
if (!Number.isNaN(growth)) {
  console.log(`RSS growth over the second run: ${growth.toFixed(1)} MiB (slack ${slack})`);
  if (growth > slack) bad++;
}
if (server) {
  const code = await server.stop('SIGTERM');
  console.log(`server exit code after SIGTERM: ${code}`);
  if (code !== 0) bad++;
  if (bad) console.log(`--- server log (last 30 lines) ---\n${server.log.split('\n').slice(-30).join('\n')}`);
}
process.exit(bad ? 1 : 0);
