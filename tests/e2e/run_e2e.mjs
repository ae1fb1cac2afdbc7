// End-to-end checks of `tensorfold serve` with the official OpenAI client (openai@6, Node 20).
//
// Either drives a running server (TF_BASE_URL=http://127.0.0.1:PORT) or starts one:
//   TF_BIN=build/tensorfold TF_CKPT=tests/golden/ckpt/lighton_ocr-tiny-bf16 [TF_SERVE_ARGS="--vision"]
// TF_E2E_VISION=0 expects image inputs to be refused (text-only server); TF_E2E_IMAGE=path.png sends
// that image (default: a 28x28 PNG made here). Exit 0: all passed; 1: a check failed; 77: skipped
// (a prerequisite is missing; CTest reports it as skipped, not passed).
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { deflateSync } from 'node:zlib';

const SKIP = 77;
let OpenAI;
try {
  ({ default: OpenAI } = await import('openai'));
} catch {
  console.log('SKIP: the openai package is not installed (run tests/e2e/setup.sh)');
  process.exit(SKIP);
}

const env = process.env;
let server = null;
let serverLog = '';
let serverExit = null;  // exit code once the spawned server has exited

async function startServer() {
  if (env.TF_BASE_URL) return env.TF_BASE_URL.replace(/\/$/, '');
  for (const [k, v] of [['TF_BIN', env.TF_BIN], ['TF_CKPT', env.TF_CKPT]]) {
    if (!v || !existsSync(v)) {
      console.log(`SKIP: ${k} (${v ?? 'unset'}) does not exist`);
      process.exit(SKIP);
    }
  }
  const extra = (env.TF_SERVE_ARGS ?? '').split(/\s+/).filter(Boolean);
  const args = ['serve', env.TF_CKPT, '--host', '127.0.0.1', '--port', '0', '--name', 'e2e-model', ...extra];
  server = spawn(env.TF_BIN, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  server.on('exit', (code) => { serverExit = code ?? -1; });
  const port = await new Promise((resolve, reject) => {
    const onData = (d) => {
      serverLog += d.toString();
      const m = serverLog.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/);
      if (m) resolve(Number(m[1]));
    };
    server.stdout.on('data', onData);
    server.stderr.on('data', onData);
    server.on('exit', (code) => reject(new Error(`server exited with ${code} before listening:\n${serverLog}`)));
  });
  return `http://127.0.0.1:${port}`;
}

const base = await startServer();
const apiKey = env.TF_API_KEY ?? 'unused';
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey, maxRetries: 0, timeout: 300_000 });

let failures = 0;
let passes = 0;
async function check(name, fn) {
  try {
    await fn();
    passes++;
    console.log(`ok   ${name}`);
  } catch (e) {
    failures++;
    console.log(`FAIL ${name}: ${e?.stack ?? e}`);
  }
}
function assert(cond, msg) {
  if (!cond) throw new Error(msg);
}
function eq(a, b, what) {
  assert(JSON.stringify(a) === JSON.stringify(b), `${what}: got ${JSON.stringify(a)}, expected ${JSON.stringify(b)}`);
}

async function waitHealthy() {
  const deadline = Date.now() + Number(env.TF_E2E_LOAD_TIMEOUT_S ?? 600) * 1000;
  for (;;) {
    if (serverExit !== null) throw new Error(`server exited with ${serverExit} while loading:\n${serverLog}`);
    try {
      const r = await fetch(`${base}/health`);
      if (r.status === 200) return;
      assert(r.status === 503, `/health answered ${r.status}`);
    } catch (e) {
      if (Date.now() > deadline) throw e;
    }
    if (Date.now() > deadline) throw new Error('server not healthy in time');
    await new Promise((r) => setTimeout(r, 200));
  }
}

async function metric(name) {
  const text = await (await fetch(`${base}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(name + ' '));
  return line ? Number(line.split(' ')[1]) : 0;
}

// A small valid RGB PNG (stored deflate via zlib, CRC-32 computed here).
function makePng(w, h) {
  const crcTable = Array.from({ length: 256 }, (_, n) => {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    return c >>> 0;
  });
  const crc = (buf) => {
    let c = 0xffffffff;
    for (const b of buf) c = crcTable[(c ^ b) & 0xff] ^ (c >>> 8);
    return (c ^ 0xffffffff) >>> 0;
  };
  const chunk = (type, data) => {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(data.length);
    const td = Buffer.concat([Buffer.from(type), data]);
    const c = Buffer.alloc(4);
    c.writeUInt32BE(crc(td));
    return Buffer.concat([len, td, c]);
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(w, 0);
  ihdr.writeUInt32BE(h, 4);
  ihdr[8] = 8; // bit depth
  ihdr[9] = 2; // RGB
  const rows = [];
  for (let y = 0; y < h; y++) {
    rows.push(0);
    for (let x = 0; x < w; x++) rows.push((x * 9) & 255, (y * 9) & 255, ((x + y) * 5) & 255);
  }
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr),
    chunk('IDAT', deflateSync(Buffer.from(rows))),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

const imageBytes = env.TF_E2E_IMAGE ? readFileSync(env.TF_E2E_IMAGE) : makePng(28, 28);
const imageMime = env.TF_E2E_IMAGE?.endsWith('.jpg') ? 'image/jpeg' : 'image/png';
const imageUrl = `data:${imageMime};base64,${imageBytes.toString('base64')}`;
const vision = env.TF_E2E_VISION !== '0';

try {
  await waitHealthy();
  let model = null;
  let maxLen = 0;
  const textMessages = [{ role: 'user', content: 'Write one short sentence about the sea.' }];
  let soloText = null;

  await check('models.list lists the served model', async () => {
    const page = await client.models.list();
    const ids = page.data.map((m) => m.id);
    assert(ids.length === 1, `expected one model, got ${JSON.stringify(ids)}`);
    model = ids[0];
    if (!env.TF_BASE_URL) eq(model, 'e2e-model', 'model id');
    maxLen = page.data[0].max_model_len ?? 0;
  });

  await check('chat.completions non-streaming', async () => {
    const r = await client.chat.completions.create({ model, messages: textMessages, max_tokens: 12, temperature: 0 });
    eq(r.object, 'chat.completion', 'object');
    assert(r.id.startsWith('chatcmpl-'), `id ${r.id}`);
    eq(r.model, model, 'model');
    eq(r.choices.length, 1, 'choices');
    eq(r.choices[0].message.role, 'assistant', 'role');
    assert(typeof r.choices[0].message.content === 'string', 'content is a string');
    assert(['stop', 'length'].includes(r.choices[0].finish_reason), `finish_reason ${r.choices[0].finish_reason}`);
    const u = r.usage;
    assert(u.prompt_tokens > 0 && u.completion_tokens > 0 && u.completion_tokens <= 12, JSON.stringify(u));
    eq(u.total_tokens, u.prompt_tokens + u.completion_tokens, 'total_tokens');
    assert(Number.isInteger(u.prompt_tokens_details?.cached_tokens), 'cached_tokens');
    soloText = r.choices[0].message.content;
  });

  await check('chat.completions streaming with include_usage equals the non-streamed answer', async () => {
    const stream = await client.chat.completions.create({
      model, messages: textMessages, max_tokens: 12, temperature: 0, stream: true,
      stream_options: { include_usage: true },
    });
    let text = '';
    let chunks = 0;
    let role = null;
    let finish = null;
    let usage = null;
    for await (const c of stream) {
      chunks++;
      if (c.usage) usage = c.usage;
      if (!c.choices.length) continue;
      role ??= c.choices[0].delta.role ?? null;
      text += c.choices[0].delta.content ?? '';
      finish = c.choices[0].finish_reason ?? finish;
    }
    eq(role, 'assistant', 'first delta role');
    assert(chunks >= 3, `only ${chunks} chunks`);
    assert(['stop', 'length'].includes(finish), `finish_reason ${finish}`);
    assert(usage && usage.completion_tokens > 0, `usage ${JSON.stringify(usage)}`);
    eq(text, soloText, 'greedy streamed text vs non-streamed');
  });

  await check('400: n > 1 is refused in OpenAI error shape', async () => {
    try {
      await client.chat.completions.create({ model, messages: textMessages, n: 2 });
      throw new Error('expected a 400');
    } catch (e) {
      assert(e instanceof OpenAI.BadRequestError, `got ${e}`);
      eq(e.status, 400, 'status');
      eq(e.error?.message, 'only n=1 is supported, got n=2', 'message');
      eq(e.param, 'n', 'param');
    }
  });

  await check('404: unknown model (model_not_found, like OpenAI)', async () => {
    try {
      await client.chat.completions.create({ model: 'no-such-model', messages: textMessages });
      throw new Error('expected a 404');
    } catch (e) {
      assert(e instanceof OpenAI.NotFoundError, `got ${e}`);
      eq(e.status, 404, 'status');
      eq(e.type, 'invalid_request_error', 'type');
      eq(e.error?.message, `model 'no-such-model' is not served here; this server serves '${model}'`, 'message');
      eq(e.code, 'model_not_found', 'code');
    }
    try {
      await client.completions.create({ model: 'no-such-model', prompt: 'x', max_tokens: 1 });
      throw new Error('expected a 404 from /v1/completions');
    } catch (e) {
      assert(e instanceof OpenAI.NotFoundError, `completions: got ${e}`);
      eq(e.code, 'model_not_found', 'completions code');
    }
    for (const [route, body] of [['tokenize', { prompt: 'x' }], ['detokenize', { tokens: [1] }]]) {
      const r = await fetch(`${base}/v1/${route}`, {
        method: 'POST', headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${apiKey}` },
        body: JSON.stringify({ model: 'no-such-model', ...body }),
      });
      eq(r.status, 404, `${route} status`);
      eq((await r.json()).error?.code, 'model_not_found', `${route} code`);
    }
  });

  await check('400: malformed JSON (raw HTTP)', async () => {
    const r = await fetch(`${base}/v1/chat/completions`, {
      method: 'POST', headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${apiKey}` },
      body: '{"messages": [',
    });
    eq(r.status, 400, 'status');
    const j = await r.json();
    eq(Object.keys(j.error).sort(), ['code', 'message', 'param', 'type'], 'error keys');
    eq(j.error.message, 'request body is not valid JSON', 'message');
  });

  await check('client abort mid-stream: counted as client-left, next request unaffected', async () => {
    const before = await metric('tensorfold_http_finished_total{reason="client-left"}');
    const tok = await (await fetch(`${base}/v1/tokenize`, {
      method: 'POST', headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${apiKey}` },
      body: JSON.stringify({ messages: textMessages }),
    })).json();
    const room = maxLen ? maxLen - tok.count - 8 : 2000;
    const controller = new AbortController();
    const stream = await client.chat.completions.create(
      { model, messages: textMessages, max_tokens: Math.max(16, Math.min(2000, room)), temperature: 0,
        ignore_eos: true, stream: true },
      { signal: controller.signal });
    let n = 0;
    try {
      for await (const c of stream) {
        if (c.choices[0]?.delta?.content !== undefined && ++n === 3) controller.abort();
      }
    } catch (e) {
      assert(e.name === 'APIUserAbortError' || e.name === 'AbortError', `unexpected ${e}`);
    }
    let after = before;
    for (let i = 0; i < 100 && after === before; i++) {
      await new Promise((r) => setTimeout(r, 100));
      after = await metric('tensorfold_http_finished_total{reason="client-left"}');
    }
    eq(after, before + 1, 'client-left count');
    if (server) {  // the engine logs the dropped request's line
      for (let i = 0; i < 100 && !/reason=client-left/.test(serverLog); i++) await new Promise((r) => setTimeout(r, 100));
      assert(/reason=client-left/.test(serverLog), 'no log line with reason=client-left');
    }
    const r = await client.chat.completions.create({ model, messages: textMessages, max_tokens: 12, temperature: 0 });
    eq(r.choices[0].message.content, soloText, 'text after the abort');
  });

  // The batched engine's paged K/V pool: a client that leaves while its request is in vision encoding,
  // prefill or decode gives every block back within a step or two, and the next request reads as alone.
  await check('client leaves in vision / prefill / decode: its K/V blocks are freed, next request unaffected', async () => {
    const total = await metric('tensorfold_kv_blocks{state="total"}');
    if (!total) return;  // a family without a paged pool (its caches are per sequence)
    const longText = Array.from({ length: 120 }, (_, i) => `word${i % 17}`).join(' ');
    const cases = [
      ['vision', vision ? [{ role: 'user', content: [{ type: 'image_url', image_url: { url: imageUrl } },
                                                      { type: 'text', text: 'Transcribe the page.' }] }] : null, 0],
      ['prefill', [{ role: 'user', content: longText }], 1],
      ['decode', textMessages, 25],
    ];
    for (const [phase, messages, waitMs] of cases) {
      if (!messages) continue;
      const controller = new AbortController();
      const pending = fetch(`${base}/v1/chat/completions`, {
        method: 'POST', signal: controller.signal,
        headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${apiKey}` },
        body: JSON.stringify({ model, messages, max_tokens: 400, temperature: 0, ignore_eos: true, stream: true }),
      }).then((r) => r.body?.getReader().read()).catch(() => null);
      await new Promise((r) => setTimeout(r, waitMs));
      controller.abort();
      await pending;
      let free = -1;
      for (let i = 0; i < 100 && free !== total; i++) {
        await new Promise((r) => setTimeout(r, 20));
        free = await metric('tensorfold_kv_blocks{state="free"}') + await metric('tensorfold_kv_blocks{state="prompt_cache"}');
      }
      eq(free, total, `${phase}: K/V blocks free (+ held by the prompt cache) after the client left`);
      const r = await client.chat.completions.create({ model, messages: textMessages, max_tokens: 12, temperature: 0 });
      eq(r.choices[0].message.content, soloText, `${phase}: text after the client left`);
    }
  });

  const imageMessages = [{ role: 'user', content: [
    { type: 'image_url', image_url: { url: imageUrl } },
    { type: 'text', text: 'Transcribe the page.' },
  ] }];
  if (vision) {
    let imageText = null;
    await check('chat with an image, non-streaming', async () => {
      const r = await client.chat.completions.create({ model, messages: imageMessages, max_tokens: 8, temperature: 0 });
      assert(r.usage.prompt_tokens > 0 && r.usage.completion_tokens > 0, JSON.stringify(r.usage));
      imageText = r.choices[0].message.content;
    });
    await check('chat with an image, streaming, equals non-streaming', async () => {
      const stream = await client.chat.completions.create({
        model, messages: imageMessages, max_tokens: 8, temperature: 0, stream: true });
      let text = '';
      for await (const c of stream) text += c.choices[0]?.delta?.content ?? '';
      eq(text, imageText, 'streamed image answer');
    });
    await check('400: image bytes that are not an image', async () => {
      const bad = [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:image/png;base64,aGVsbG8gd29ybGQ=' } }] }];
      try {
        await client.chat.completions.create({ model, messages: bad });
        throw new Error('expected a 400');
      } catch (e) {
        eq(e.status, 400, 'status');
        eq(e.error?.message, 'image 1 is not PNG, JPEG or WebP; send one of those', 'message');
      }
    });
  } else {
    await check('400: images on a text-only server', async () => {
      try {
        await client.chat.completions.create({ model, messages: imageMessages });
        throw new Error('expected a 400');
      } catch (e) {
        eq(e.status, 400, 'status');
      }
    });
  }
} catch (e) {
  failures++;
  console.log(`FAIL setup: ${e?.stack ?? e}`);
} finally {
  if (server) {
    const code = serverExit !== null ? serverExit : await new Promise((r) => {
      server.on('exit', (c) => r(c));
      server.kill('SIGTERM');
    });
    if (code !== 0) {
      failures++;
      console.log(`FAIL server exit code (0 expected after SIGTERM): ${code}`);
    }
    if (failures) console.log(`--- server log ---\n${serverLog}`);
  }
}
console.log(`${passes} passed, ${failures} failed`);
process.exit(failures ? 1 : 0);
