// End-to-end acceptance checks of `tensorfold serve` with the REAL engine on a tiny checkpoint, driven
// by the official OpenAI client (openai@6) and raw HTTP:
//   TF_BIN=build/tensorfold TF_CKPT=tests/golden/ckpt/lighton_ocr-tiny-bf16 node tests/e2e/server_e2e.mjs
// - 8 concurrent requests (greedy and seeded, text and images) return the ids they get alone;
// - a client that closes during prefill, or after 8 streamed tokens, is dropped (log line with
//   reason=client-left) and the next request's ids equal its solo ids;
// - every refusal of the list has its status, code and message, and a request after it
//   succeeds with its solo ids; --max-image-pixels refuses a decompression bomb from its header;
// - SIGTERM / SIGINT with work in flight: in-flight requests are cancelled, new connections are
//   refused, the process exits 0; --help lists every flag with its default.
// Exit 0: all passed; 1: a check failed; 77: skipped (a prerequisite is missing).
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import { assert, Checks, dataUrl, eq, makePng, RawConn, rawRequest, requireFiles, Server, SKIP, sleep, streamedIds }
  from './lib.mjs';

let OpenAI;
try {
  ({ default: OpenAI } = await import('openai'));
} catch {
  console.log('SKIP: the openai package is not installed (run tests/e2e/setup.sh)');
  process.exit(SKIP);
}

const env = process.env;
requireFiles([['TF_BIN', env.TF_BIN], ['TF_CKPT', env.TF_CKPT]]);
const imagesDir = new URL('../golden/images', import.meta.url).pathname;
const KEY = 'sk-e2e-test';
const AUTH = { Authorization: `Bearer ${KEY}`, 'Content-Type': 'application/json' };
const MAX_PIXELS = 4_000_000;  // above page_1583x2048 (3.24 M), far below the bomb below
const checks = new Checks();

const pagePng = readFileSync(`${imagesDir}/page_1583x2048.png`);
const text = (content) => [{ role: 'user', content }];
const withImage = (url, words) => [{ role: 'user', content: [
  { type: 'image_url', image_url: { url } }, { type: 'text', text: words }] }];

async function post(base, path, body, headers = AUTH) {
  const r = await fetch(base + path, { method: 'POST', headers, body: typeof body === 'string' ? body : JSON.stringify(body) });
  const raw = await r.text();
  let json = null;
  try {
    json = JSON.parse(raw);
  } catch {
    // not JSON: the assertions below say so
  }
  return { status: r.status, json, raw };
}

function expectError(r, status, message, code = null) {
  eq(r.status, status, `status (body ${r.raw.slice(0, 300)})`);
  assert(r.json?.error, `no error object in ${r.raw.slice(0, 300)}`);
  eq(Object.keys(r.json.error).sort(), ['code', 'message', 'param', 'type'], 'error keys');
  eq(r.json.error.message, message, 'message');
  eq(r.json.error.code, code, 'code');
}

// Words from a small LCG, so each long prompt is new to the prompt cache (a cached prefix would skip
// the prefill these tests need to interrupt).
function words(n, seed) {
  let x = seed >>> 0;
  const out = [];
  for (let i = 0; i < n; i++) {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    out.push(`w${x % 997}`);
  }
  return out.join(' ');
}

async function metric(base, name) {
  const t = await (await fetch(`${base}/metrics`)).text();
  const line = t.split('\n').find((l) => l.startsWith(name + ' '));
  return line ? Number(line.split(' ')[1]) : NaN;
}

// A port that nothing listens on any more refuses the connection.
function connectRefused(port) {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1', () => {
      s.destroy();
      resolve(false);
    });
    s.on('error', (e) => resolve(e.code === 'ECONNREFUSED'));
  });
}

await checks.run('serve --help lists every flag with its default', async () => {
  const r = spawnSync(env.TF_BIN, ['serve', '--help'], { encoding: 'utf8' });
  eq(r.status, 0, 'exit status');
  const help = r.stdout + r.stderr;
  for (const flag of ['--backend', '--vision', '--context', '--parallel', '--no-thinking', '--name', '--host', '--port',
    '--temperature', '--max-tokens', '--api-key', '--max-body-mb', '--max-image-pixels', '--allowed-media-dir']) {
    const line = help.split('\n').find((l) => l.trimStart().startsWith(flag + ' '));
    assert(line, `${flag} is not listed:\n${help}`);
    assert(/\(default: [^)]+\)/.test(line), `${flag} has no default: ${line}`);
  }
});

// ---- A text-only server (no --vision): refusals of images, then SIGINT with a request in flight.
{
  const s = await Server.start(env.TF_BIN, [env.TF_CKPT, '--name', 'e2e-text']);
  try {
    await s.waitHealthy();
    await checks.run('text-only server: 400 for an image, then a request succeeds', async () => {
      const r = await post(s.base, '/v1/chat/completions', { messages: withImage(dataUrl(pagePng), 'Read.'), max_tokens: 4 });
      expectError(r, 400, 'image inputs are unsupported: this server runs without a vision encoder ' +
                          '(start it with --vision on a vision checkpoint)');
      eq(r.json.error.param, 'messages[0].content[0]', 'param');
      const ok = await post(s.base, '/v1/chat/completions', { messages: text('Hello'), max_tokens: 4, temperature: 0 });
      eq(ok.status, 200, 'status after the refusal');
      eq(ok.json.usage.completion_tokens, 4, 'completion tokens');
    });
    await checks.run('SIGINT with a request in flight: it gets 503, new connections are refused, exit 0', async () => {
      const pending = post(s.base, '/v1/chat/completions',
        { messages: text(words(20, 5)), max_tokens: 3000, ignore_eos: true, temperature: 0 });
      // Wait until the engine works on it, so the signal lands mid-generation.
      for (let i = 0; i < 400 && !(await metric(s.base, 'tensorfold_active_sequences') >= 1); i++) await sleep(10);
      s.proc.kill('SIGINT');
      const r = await pending;
      expectError(r, 503, 'the server is shutting down');
      assert(await connectRefused(s.port), 'a new connection was accepted after SIGINT');
      eq(await s.exited, 0, 'exit code');
      assert(/received SIGINT/.test(s.log), 'no log line for SIGINT');
    });
  } finally {
    await s.stop('SIGKILL');
  }
}

// ---- The full server: vision, 8 sequences, API key, 1 MiB bodies, pixel limit, file:// images.
const s = await Server.start(env.TF_BIN, [env.TF_CKPT, '--vision', '--parallel', '8', '--name', 'e2e', '--api-key', KEY,
  '--max-body-mb', '1', '--max-image-pixels', String(MAX_PIXELS), '--allowed-media-dir', imagesDir]);
const client = new OpenAI({ baseURL: `${s.base}/v1`, apiKey: KEY, maxRetries: 0, timeout: 300_000 });
let context = 0;
const ref = { messages: text('Invoice No. 4711'), max_tokens: 8, temperature: 0, ignore_eos: true, return_token_ids: true };
let refIds = null;
// The reference request after a refusal or a dropped client: the same ids as before.
async function refStillEqual(what) {
  const r = await client.chat.completions.create(ref);
  eq(r.choices[0].token_ids, refIds, `reference ids after ${what}`);
}

try {
  await s.waitHealthy();
  await checks.run('reference request', async () => {
    const r = await client.chat.completions.create(ref);
    refIds = r.choices[0].token_ids;
    eq(refIds.length, 8, 'reference length');
    context = (await client.models.list()).data[0].max_model_len;
    assert(context > 0, 'max_model_len');
  });

  await checks.run('8 concurrent requests (greedy and seeded, text and images) return their solo ids', async () => {
    const make = (i) => {
      const messages = i % 2 === 0 ? text(i % 4 === 0 ? 'Invoice No. 4711' : 'Total: 1,234.56 EUR')
        : i % 4 === 1 ? withImage(dataUrl(pagePng), 'Transcribe the page.')
          : withImage(`file://${imagesDir}/photo_noise.png`, 'Describe.');
      const body = { messages, max_tokens: 20, ignore_eos: true, return_token_ids: true, temperature: 0 };
      if (i >= 4) Object.assign(body, { temperature: 0.8, top_p: 0.95, top_k: 20, seed: 100 + i });
      if (i >= 6) Object.assign(body, { stream: true });
      return body;
    };
    const run = async (i) => {
      const body = make(i);
      if (!body.stream) {
        const r = await client.chat.completions.create(body);
        const c = r.choices[0];
        eq(c.token_ids.length, r.usage.completion_tokens, `request ${i}: token_ids vs usage`);
        return { ids: c.token_ids, prompt: r.prompt_token_ids, text: c.message.content };
      }
      const out = { ids: [], prompt: null, text: '' };
      for await (const ch of await client.chat.completions.create(body)) {
        out.prompt ??= ch.prompt_token_ids ?? null;
        out.ids.push(...(ch.choices[0]?.token_ids ?? []));
        out.text += ch.choices[0]?.delta?.content ?? '';
      }
      return out;
    };
    const solo = [];
    for (let i = 0; i < 8; i++) solo.push(await run(i));
    for (const [i, o] of solo.entries()) eq(o.ids.length, 20, `solo ${i} length`);
    assert(JSON.stringify(solo[4].ids) !== JSON.stringify(solo[0].ids), 'seeded sampling equals greedy');
    const together = await Promise.all(Array.from({ length: 8 }, (_, i) => run(i)));
    for (let i = 0; i < 8; i++) {
      eq(together[i].prompt, solo[i].prompt, `request ${i} prompt ids`);
      eq(together[i].ids, solo[i].ids, `request ${i} ids next to 7 others`);
      eq(together[i].text, solo[i].text, `request ${i} text`);
    }
  });

  await checks.run('a stop string held back at the length limit adds no placeholder id', async () => {
    const r0 = await client.chat.completions.create(ref);
    const last = [...r0.choices[0].message.content].pop() ?? 'x';
    // The output ends with the first character of this stop string, so it is held back to the end.
    const r = await client.chat.completions.create({ ...ref, stop: [`${last}\u0001`] });
    eq(r.choices[0].token_ids, refIds, 'ids');
    eq(r.choices[0].message.content, r0.choices[0].message.content, 'text');
    eq(r.choices[0].finish_reason, 'length', 'finish_reason');
  });

  await checks.run('client closes during prefill: client-left, tokens=0, next request has its solo ids', async () => {
    // A prompt of ~2,900 tokens takes seconds to prefill on the tiny checkpoints (64-256 per step).
    const messages = text(words(1000, 1234));
    const n = (await post(s.base, '/v1/tokenize', { messages })).json.count;
    assert(n > 1000 && n + 16 <= context, `prompt of ${n} tokens`);
    const steps0 = await metric(s.base, 'tensorfold_step_seconds_count');
    const c = await RawConn.open(s.port);
    c.send(rawRequest('/v1/chat/completions', JSON.stringify({ messages, max_tokens: 16, stream: true }), AUTH));
    // Close once the engine has run a step on it (admitted, prefilling).
    for (let i = 0; i < 1000 && !(await metric(s.base, 'tensorfold_step_seconds_count') > steps0); i++) await sleep(5);
    c.destroy();
    eq(c.data, '', 'nothing was sent before the first token');
    const m = await s.waitLog(new RegExp(`reason=client-left prompt=${n} tokens=(\\d+)`));
    eq(Number(m[1]), 0, 'tokens generated before the drop (the close came during prefill)');
    await refStillEqual('a drop during prefill');
  });

  await checks.run('client closes during image decoding / vision encoding: client-left, tokens=0', async () => {
    // Eight full pages (file:// URLs keep the body small): decoding, resizing and encoding them
    // takes far longer than the close below needs to be noticed.
    const content = Array.from({ length: 8 }, () => ({ type: 'image_url', image_url: { url: `file://${imagesDir}/page_1583x2048.png` } }));
    content.push({ type: 'text', text: words(5, 77) });
    const messages = [{ role: 'user', content }];
    const n = (await post(s.base, '/v1/tokenize', { messages })).json.count;
    const from = s.log.length;
    const t0 = Date.now();
    const c = await RawConn.open(s.port);
    c.send(rawRequest('/v1/chat/completions', JSON.stringify({ messages, max_tokens: 16, stream: true }), AUTH));
    await sleep(30);
    c.destroy();
    const m = await s.waitLog(new RegExp(`reason=(\\S+) prompt=(\\d+) tokens=(\\d+)[^\\n]*\\n`), 90000, from);
    console.log(`     (tokenize ${n} tokens; dropped ${Date.now() - t0} ms after sending: ${m[0].trim()})`);
    eq(m[1], 'client-left', 'reason');
    assert(Number(m[2]) === n || Number(m[2]) === 0, `prompt=${m[2]} (expected ${n}, or 0 if dropped while queued)`);
    eq(Number(m[3]), 0, 'tokens generated before the drop');
    await refStillEqual('a drop during image work');
  });

  await checks.run('client closes after 8 streamed tokens: client-left, next request has its solo ids', async () => {
    const messages = text(words(30, 99));
    const n = (await post(s.base, '/v1/tokenize', { messages })).json.count;
    const maxTokens = Math.min(3000, context - n);
    const c = await RawConn.open(s.port);
    c.send(rawRequest('/v1/chat/completions', JSON.stringify(
      { messages, max_tokens: maxTokens, ignore_eos: true, temperature: 0, stream: true, return_token_ids: true }), AUTH));
    assert(await c.waitFor((d) => streamedIds(d).length >= 8), `fewer than 8 tokens streamed: ${c.data.slice(0, 500)}`);
    c.destroy();
    const m = await s.waitLog(new RegExp(`reason=client-left prompt=${n} tokens=(\\d+)`));
    const t = Number(m[1]);
    assert(t >= 8 && t < maxTokens, `dropped after ${t} of ${maxTokens} tokens`);
    await refStillEqual('a drop mid-stream');
  });

  await checks.run('client closes a non-streamed request during decode: client-left long before the end', async () => {
    const messages = text(words(30, 4242));
    const n = (await post(s.base, '/v1/tokenize', { messages })).json.count;
    const maxTokens = Math.min(3000, context - n);
    const out0 = await metric(s.base, 'tensorfold_output_tokens_total');
    const c = await RawConn.open(s.port);
    c.send(rawRequest('/v1/chat/completions', JSON.stringify(
      { messages, max_tokens: maxTokens, ignore_eos: true, temperature: 0 }), AUTH));
    // Tokens flow faster than the server's poll interval here; it must still notice the close.
    for (let i = 0; i < 1000 && !(await metric(s.base, 'tensorfold_active_sequences') >= 1); i++) await sleep(5);
    await sleep(100);
    c.destroy();
    const m = await s.waitLog(new RegExp(`reason=(\\S+) prompt=${n} tokens=(\\d+)`));
    eq(m[1], 'client-left', 'reason');
    assert(Number(m[2]) < maxTokens, `dropped after ${m[2]} of ${maxTokens} tokens`);
    assert(await metric(s.base, 'tensorfold_output_tokens_total') - out0 < maxTokens, 'output tokens counted');
    await refStillEqual('a dropped non-streamed request');
  });

  // Every refusal: status, code and message; then the reference request still gets its ids.
  const refusals = [
    ['image bytes that are no image', { messages: withImage('data:image/png;base64,aGVsbG8gd29ybGQ=', 'x') },
      400, 'image 1 is not PNG, JPEG or WebP; send one of those'],
    ['truncated PNG', { messages: withImage(dataUrl(pagePng.subarray(0, pagePng.length >> 1)), 'x') },
      400, 'image 1 could not be decoded; send PNG, JPEG or WebP'],
    ['corrupt PNG (bytes zeroed mid-stream)', {
      messages: withImage(dataUrl(Buffer.concat([pagePng.subarray(0, 4000), Buffer.alloc(4000), pagePng.subarray(8000)])), 'x'),
    }, 400, 'image 1 could not be decoded; send PNG, JPEG or WebP'],
    ['audio part', { messages: [{ role: 'user', content: [{ type: 'input_audio', input_audio: { data: 'AAAA', format: 'wav' } }] }] },
      400, 'content parts must be text or image_url; audio and video inputs are unsupported'],
    ['video part', { messages: [{ role: 'user', content: [{ type: 'video_url', video_url: { url: 'data:video/mp4;base64,AAAA' } }] }] },
      400, 'content parts must be text or image_url; audio and video inputs are unsupported'],
    ['http(s) image URL', { messages: withImage('https://example.com/a.png', 'x') },
      400, 'image 1: http(s) image URLs are not fetched by this server; send the image inline as a base64 data: URL'],
    ['file:// outside --allowed-media-dir', { messages: withImage('file:///etc/passwd', 'x') },
      400, 'image 1: file path is outside --allowed-media-dir'],
    ['malformed JSON', '{"messages": [', 400, 'request body is not valid JSON'],
    ['wrong type: messages', { messages: 'hi' }, 400, "'messages' must be a non-empty array"],
    ['wrong type: max_tokens', { messages: text('x'), max_tokens: '10' }, 400, "'max_tokens' must be an integer"],
    ['n > 1', { messages: text('x'), n: 2 }, 400, 'only n=1 is supported, got n=2'],
    ['negative max_tokens', { messages: text('x'), max_tokens: -5 }, 400, "'max_tokens' must be at least 1, got -5"],
    ['absurd max_tokens', { messages: text('x'), max_tokens: 99999999999 }, 400, "'max_tokens' is too large, got 99999999999"],
    ['absurd temperature', { messages: text('x'), temperature: 1e9 }, 400, "'temperature' must be between 0 and 100, got 1e+09"],
    ['negative top_k', { messages: text('x'), top_k: -1 }, 400, "'top_k' must be 0 (off) or positive, got -1"],
    ['unknown model', { model: 'gpt-4o', messages: text('x') }, 404,
      "model 'gpt-4o' is not served here; this server serves 'e2e'", 'model_not_found'],
  ];
  for (const [name, body, status, message, code] of refusals) {
    await checks.run(`${status}: ${name}, then a request succeeds`, async () => {
      expectError(await post(s.base, '/v1/chat/completions', body), status, message, code ?? null);
      await refStillEqual(name);
    });
  }

  await checks.run('400 context_length_exceeded one over the context; exactly equal is accepted', async () => {
    const n = (await post(s.base, '/v1/tokenize', { messages: ref.messages })).json.count;
    const over = await post(s.base, '/v1/chat/completions', { messages: ref.messages, max_tokens: context - n + 1 });
    expectError(over, 400, `this model's context is ${context} tokens; the prompt has ${n} and max_tokens asks for ` +
                           `${context - n + 1}`, 'context_length_exceeded');
    // Exactly equal: accepted (a stream starts); the client then leaves.
    const controller = new AbortController();
    const stream = await client.chat.completions.create(
      { messages: ref.messages, max_tokens: context - n, temperature: 0, stream: true }, { signal: controller.signal });
    let chunks = 0;
    try {
      for await (const c of stream) if (++chunks === 2) controller.abort();
    } catch (e) {
      assert(e.name === 'APIUserAbortError' || e.name === 'AbortError', `unexpected ${e}`);
    }
    assert(chunks >= 2, 'the exactly-full request streamed no tokens');
    await refStillEqual('context_length_exceeded');
  });

  await checks.run('401 without or with a wrong API key, then a request succeeds', async () => {
    const msg = "missing or wrong API key; send 'Authorization: Bearer KEY'";
    expectError(await post(s.base, '/v1/chat/completions', ref, { 'Content-Type': 'application/json' }), 401, msg, 'invalid_api_key');
    expectError(await post(s.base, '/v1/chat/completions', ref, { ...AUTH, Authorization: 'Bearer sk-wrong' }), 401, msg,
      'invalid_api_key');
    await refStillEqual('401');
  });

  await checks.run('413 over --max-body-mb, then a request succeeds', async () => {
    const body = JSON.stringify({ messages: text('a'.repeat(1100 * 1024)) });
    const c = await RawConn.open(s.port);
    c.send(rawRequest('/v1/chat/completions', body, AUTH));
    await c.waitFor((d) => /\r\n\r\n[\s\S]*\}\}/.test(d), 20000);
    c.destroy();
    assert(c.data.startsWith('HTTP/1.1 413'), `status line: ${c.data.slice(0, 100)}`);
    const j = JSON.parse(c.data.slice(c.data.indexOf('\r\n\r\n') + 4));
    eq(j.error.message, "request body is larger than the server's limit of 1 MiB (--max-body-mb)", 'message');
    eq(j.error.code, 'request_too_large', 'code');
    await refStillEqual('413');
  });

  await checks.run('400 over --max-image-pixels from the header of a decompression bomb; memory stays flat', async () => {
    // 20000 x 20000 1-bit pixels: ~50 KB of PNG that would decode to 1.2 GB of RGB.
    const bomb = makePng(20000, 20000, { bits1: true });
    assert(bomb.length < 200_000, `bomb is ${bomb.length} bytes`);
    const peak0 = s.peakRssMb();
    const r = await post(s.base, '/v1/chat/completions', { messages: withImage(dataUrl(bomb), 'x'), max_tokens: 4 });
    expectError(r, 400, `image 1 is 20000x20000 pixels, over the limit of ${MAX_PIXELS} pixels (and 65535 per side); ` +
                        'send a smaller image');
    const grew = s.peakRssMb() - peak0;
    assert(grew < 64, `peak RSS grew by ${grew.toFixed(1)} MiB while refusing the bomb`);
    await refStillEqual('the pixel limit');
  });

  await checks.run('tokenize: a raw prompt keeps image placeholders as single ids; messages with an image expand them', async () => {
    const one = await post(s.base, '/v1/tokenize', { prompt: '<|image_pad|>' });
    eq(one.status, 200, `status (${one.raw.slice(0, 200)})`);
    eq(one.json.count, 1, 'one special token');
    const pad = one.json.tokens[0];
    const end = (await post(s.base, '/v1/tokenize', { prompt: '<|vision_end|>' })).json.tokens;
    eq(end.length, 1, 'vision_end is one token');
    const t = await post(s.base, '/v1/tokenize', { prompt: '<|image_pad|><|image_pad|><|vision_end|>' });
    eq(t.status, 200, `status (${t.raw.slice(0, 200)})`);
    eq(t.json.tokens, [pad, pad, end[0]], 'tokens as the tokenizer gives them');
    const img = await post(s.base, '/v1/tokenize', { messages: withImage(`file://${imagesDir}/rgba_alpha.png`, 'x') });
    eq(img.status, 200, `image status (${img.raw.slice(0, 200)})`);
    assert(img.json.tokens.filter((x) => x === pad).length > 1, 'an image part expands its placeholder');
  });

  await checks.run('completions from a prompt string and from its token ids agree; detokenize inverts tokenize', async () => {
    const prompt = 'Invoice No. 4711, total 1,234.56 EUR';
    const t = await post(s.base, '/v1/tokenize', { prompt });
    eq(t.status, 200, 'tokenize status');
    eq(t.json.count, t.json.tokens.length, 'count');
    const d = await post(s.base, '/v1/detokenize', { tokens: t.json.tokens });
    eq(d.json.prompt, prompt, 'detokenized text');
    const body = { max_tokens: 12, temperature: 0, ignore_eos: true, return_token_ids: true };
    const a = await client.completions.create({ ...body, prompt });
    const b = await client.completions.create({ ...body, prompt: t.json.tokens });
    eq(a.choices[0].token_ids.length, 12, 'length');
    eq(b.choices[0].token_ids, a.choices[0].token_ids, 'ids from token-id prompt');
    eq(b.choices[0].text, a.choices[0].text, 'text');
  });

  await checks.run('/metrics: requests by status, finish reasons, token counters, queue depth, step histogram', async () => {
    const m = await (await fetch(`${s.base}/metrics`)).text();
    for (const re of [/^tensorfold_http_requests_total\{route="\/v1\/chat\/completions",status="200"\} [1-9]/m,
      /^tensorfold_http_requests_total\{route="\/v1\/chat\/completions",status="400"\} [1-9]/m,
      /^tensorfold_http_requests_total\{route="\/v1\/chat\/completions",status="401"\} 2$/m,
      /^tensorfold_requests_finished_total\{reason="length"\} [1-9]/m,
      /^tensorfold_requests_finished_total\{reason="client-left"\} [4-9]/m,
      /^tensorfold_prompt_tokens_total [1-9]/m, /^tensorfold_output_tokens_total [1-9]/m,
      /^tensorfold_cached_tokens_total \d+$/m, /^tensorfold_queue_depth 0$/m,
      /^tensorfold_step_seconds_bucket\{le="\+Inf"\} [1-9]/m, /^tensorfold_step_seconds_count [1-9]/m]) {
      assert(re.test(m), `no line matching ${re} in:\n${m}`);
    }
  });

  await checks.run('400 over --max-image-pixels for JPEG and WebP headers that declare huge sizes', async () => {
    // Real files with their size fields rewritten: the refusal must come from the header alone.
    const jpeg = Buffer.from(readFileSync(`${imagesDir}/jpeg_exif6.jpg`));
    const sof = jpeg.indexOf(Buffer.from([0xff, 0xc0]));
    assert(sof > 0, 'no SOF0 marker');
    jpeg.writeUInt16BE(20000, sof + 5);  // height
    jpeg.writeUInt16BE(20000, sof + 7);  // width
    const webp = Buffer.from(readFileSync(`${imagesDir}/webp_lossless.webp`));
    eq(webp.toString('latin1', 12, 16), 'VP8L', 'lossless WebP chunk');
    const bits = webp.readUInt32LE(21);
    webp.writeUInt32LE(((bits & 0xf0000000) | 16383 | (16383 << 14)) >>> 0, 21);  // 16384 x 16384
    for (const [bytes, mime, w, h] of [[jpeg, 'image/jpeg', 20000, 20000], [webp, 'image/webp', 16384, 16384]]) {
      const r = await post(s.base, '/v1/chat/completions', { messages: withImage(dataUrl(bytes, mime), 'x'), max_tokens: 4 });
      expectError(r, 400, `image 1 is ${w}x${h} pixels, over the limit of ${MAX_PIXELS} pixels (and 65535 per side); ` +
                          'send a smaller image');
    }
    await refStillEqual('the pixel limit (JPEG, WebP)');
  });

  await checks.run('SIGTERM with a stream and a request in flight: both cancelled, connections refused, exit 0', async () => {
    const long = { messages: text(words(20, 7)), max_tokens: Math.min(3000, context - 200), ignore_eos: true, temperature: 0 };
    const c = await RawConn.open(s.port);
    c.send(rawRequest('/v1/chat/completions', JSON.stringify({ ...long, stream: true, return_token_ids: true }), AUTH));
    const pending = post(s.base, '/v1/chat/completions', long);
    assert(await c.waitFor((d) => streamedIds(d).length >= 2), 'the stream did not start');
    s.proc.kill('SIGTERM');
    expectError(await pending, 503, 'the server is shutting down');
    assert(await c.waitFor((d) => d.includes('data: [DONE]')), `the stream did not end: ${c.data.slice(-300)}`);
    assert(c.data.includes('"message":"the server is shutting down"'), 'the stream has no shutdown error event');
    c.destroy();
    assert(await connectRefused(s.port), 'a new connection was accepted after SIGTERM');
    eq(await s.exited, 0, 'exit code');
    assert(/received SIGTERM/.test(s.log), 'no log line for SIGTERM');
  });
} catch (e) {
  checks.failures++;
  console.log(`FAIL setup: ${e?.stack ?? e}`);
} finally {
  await s.stop('SIGKILL');
  if (checks.failures) console.log(`--- server log (last 60 lines) ---\n${s.log.split('\n').slice(-60).join('\n')}`);
}
console.log(`${checks.passes} passed, ${checks.failures} failed`);
process.exit(checks.failures ? 1 : 0);
