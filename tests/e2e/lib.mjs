// Helpers shared by the end-to-end scripts: start `tensorfold serve` on a free loopback port, watch
// its log, talk raw HTTP over a socket (for disconnects and oversized bodies), and build test images.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import net from 'node:net';
import { deflateSync } from 'node:zlib';

export const SKIP = 77;
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export function assert(cond, msg) {
  if (!cond) throw new Error(msg);
}
export function eq(a, b, what) {
  assert(JSON.stringify(a) === JSON.stringify(b), `${what}: got ${JSON.stringify(a)}, expected ${JSON.stringify(b)}`);
}

// Runs named checks, counting passes and failures; a failure does not stop the later checks.
export class Checks {
  constructor() {
    this.passes = 0;
    this.failures = 0;
  }
  async run(name, fn) {
    const t0 = Date.now();
    try {
      await fn();
      this.passes++;
      console.log(`ok   ${name} (${((Date.now() - t0) / 1000).toFixed(1)}s)`);
    } catch (e) {
      this.failures++;
      console.log(`FAIL ${name}: ${e?.stack ?? e}`);
    }
  }
}

export function requireFiles(pairs) {
  for (const [k, v] of pairs) {
    if (!v || !existsSync(v)) {
      console.log(`SKIP: ${k} (${v ?? 'unset'}) does not exist`);
      process.exit(SKIP);
    }
  }
}

// A running `tensorfold serve`: its base URL, pid, log so far and exit code once it has exited.
export class Server {
  static async start(bin, args) {
    const s = new Server();
    s.proc = spawn(bin, ['serve', ...args, '--host', '127.0.0.1', '--port', '0'], { stdio: ['ignore', 'pipe', 'pipe'] });
    s.pid = s.proc.pid;
    s.exited = new Promise((resolve) => s.proc.on('exit', (code, signal) => {
      s.exitCode = code ?? `signal ${signal}`;
      resolve(s.exitCode);
    }));
    const port = await new Promise((resolve, reject) => {
      const onData = (d) => {
        s.log += d.toString();
        const m = s.log.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/);
        if (m) resolve(Number(m[1]));
      };
      s.proc.stdout.on('data', onData);
      s.proc.stderr.on('data', onData);
      s.exited.then((c) => reject(new Error(`server exited with ${c} before listening:\n${s.log}`)));
    });
    s.port = port;
    s.base = `http://127.0.0.1:${port}`;
    return s;
  }
  constructor() {
    this.log = '';
    this.exitCode = null;
  }
  async waitHealthy(timeoutS = 300) {
    const deadline = Date.now() + timeoutS * 1000;
    for (;;) {
      if (this.exitCode !== null) throw new Error(`server exited with ${this.exitCode} while loading:\n${this.log}`);
      try {
        const r = await fetch(`${this.base}/health`);
        if (r.status === 200) return;
        assert(r.status === 503, `/health answered ${r.status}`);
      } catch (e) {
        if (Date.now() > deadline) throw e;
      }
      if (Date.now() > deadline) throw new Error('server not healthy in time');
      await sleep(100);
    }
  }
  // Waits until the log matches `re` (from character `from` on); returns the match.
  async waitLog(re, timeoutMs = 90000, from = 0) {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const m = this.log.slice(from).match(re);
      if (m) return m;
      if (Date.now() > deadline) throw new Error(`no log line matching ${re} within ${timeoutMs} ms`);
      await sleep(20);
    }
  }
  // Peak resident memory of the server process so far (MiB).
  peakRssMb() {
    const m = readFileSync(`/proc/${this.pid}/status`, 'utf8').match(/VmHWM:\s+(\d+) kB/);
    return m ? Number(m[1]) / 1024 : NaN;
  }
  async stop(signal = 'SIGTERM') {
    if (this.exitCode === null) this.proc.kill(signal);
    return this.exited;
  }
}

export function rawRequest(path, body, headers = {}) {
  const h = { Host: '127.0.0.1', 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body), ...headers };
  return `POST ${path} HTTP/1.1\r\n` + Object.entries(h).map(([k, v]) => `${k}: ${v}\r\n`).join('') + '\r\n' + body;
}

// A raw HTTP connection: send bytes, read what comes back, close whenever the test decides.
export class RawConn {
  static open(port) {
    return new Promise((resolve, reject) => {
      const c = new RawConn();
      c.sock = net.connect(port, '127.0.0.1', () => resolve(c));
      c.sock.on('error', (e) => {
        c.error = e;
        reject(e);
      });
      c.sock.on('data', (d) => { c.data += d.toString(); });
      c.sock.on('close', () => { c.closed = true; });
    });
  }
  constructor() {
    this.data = '';
    this.closed = false;
    this.error = null;
  }
  send(s) {
    this.sock.write(s);
  }
  async waitFor(pred, timeoutMs = 60000) {
    const deadline = Date.now() + timeoutMs;
    while (!pred(this.data)) {
      if (this.closed || Date.now() > deadline) return false;
      await sleep(5);
    }
    return true;
  }
  destroy() {
    this.sock.destroy();
  }
}

// Token ids streamed so far in an SSE body sent with return_token_ids (HTTP chunked framing and all).
export function streamedIds(raw) {
  const ids = [];
  for (const m of raw.matchAll(/^data: (\{.*\})$/gm)) {
    try {
      const j = JSON.parse(m[1]);
      for (const c of j.choices ?? []) ids.push(...(c.token_ids ?? []));
    } catch {
      // a chunk split by the transfer encoding; the complete tests below never depend on it
    }
  }
  return ids;
}

const crcTable = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});
function crc32(buf) {
  let c = 0xffffffff;
  for (const b of buf) c = crcTable[(c ^ b) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}
function pngChunk(type, data) {
  const len = Buffer.alloc(4);
  len.writeUInt32BE(data.length);
  const td = Buffer.concat([Buffer.from(type), data]);
  const c = Buffer.alloc(4);
  c.writeUInt32BE(crc32(td));
  return Buffer.concat([len, td, c]);
}

// A valid PNG of w x h pixels: 8-bit RGB with a gradient, or (bits1) 1-bit grayscale all black,
// which deflates ~1000:1 — a decompression bomb when w x h is large.
export function makePng(w, h, { bits1 = false } = {}) {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(w, 0);
  ihdr.writeUInt32BE(h, 4);
  ihdr[8] = bits1 ? 1 : 8;
  ihdr[9] = bits1 ? 0 : 2;
  let raw;
  if (bits1) {
    raw = Buffer.alloc((1 + Math.ceil(w / 8)) * h);  // filter byte 0 + zero bits per row
  } else {
    const rows = [];
    for (let y = 0; y < h; y++) {
      rows.push(0);
      for (let x = 0; x < w; x++) rows.push((x * 9) & 255, (y * 9) & 255, ((x + y) * 5) & 255);
    }
    raw = Buffer.from(rows);
  }
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    pngChunk('IHDR', ihdr),
    pngChunk('IDAT', deflateSync(raw, { level: 9 })),
    pngChunk('IEND', Buffer.alloc(0)),
  ]);
}

export const dataUrl = (bytes, mime = 'image/png') => `data:${mime};base64,${Buffer.from(bytes).toString('base64')}`;
