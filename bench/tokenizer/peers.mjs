// Times the npm peers on the benchmark corpus: HF tokenizers (Rust via napi, `tokenizers@0.23.2`) and the
// pure-JS `@huggingface/tokenizers@0.2.0`. Same documents, same order, one at a time, encode without
// special-token post-processing (add_special_tokens=false), which is what tensorfold's bench measures too.
// Usage: node peers.mjs TOKENIZER_JSON TOKENIZER_CONFIG CORPUS [repeats]
// Prints one line per peer, as tokenizer_bench: name, MB/s by CPU time, MB/s by wall time, CPU s, wall s,
// n_tokens, ids checksum (tab-separated). CPU time is process.cpuUsage() (all threads, user + system).
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";

const [, , tokPath, cfgPath, corpusPath, repeatsArg] = process.argv;
const repeats = Number(repeatsArg || 1);
const corpus = readFileSync(corpusPath, "utf8");
const docs = corpus.split("\x1e");
const bytes = Buffer.byteLength(corpus, "utf8") - (docs.length - 1);

function checksum(acc, ids) {
  // FNV-1a over the ids, order-sensitive; the C++ bench computes the same.
  for (const id of ids) {
    acc = Math.imul(acc ^ (id & 0xff), 16777619) >>> 0;
    acc = Math.imul(acc ^ ((id >>> 8) & 0xff), 16777619) >>> 0;
    acc = Math.imul(acc ^ ((id >>> 16) & 0xff), 16777619) >>> 0;
    acc = Math.imul(acc ^ ((id >>> 24) & 0xff), 16777619) >>> 0;
  }
  return acc;
}

async function timeIt(name, encodeDoc) {
  let best = Infinity, bestWall = Infinity, nTok = 0, sum = 0;
  for (let r = 0; r < repeats; ++r) {
    nTok = 0;
    sum = 2166136261;
    const t0 = process.hrtime.bigint();
    const c0 = process.cpuUsage();
    for (const d of docs) {
      const ids = await encodeDoc(d);
      nTok += ids.length;
      sum = checksum(sum, ids);
    }
    const c = process.cpuUsage(c0);
    bestWall = Math.min(bestWall, Number(process.hrtime.bigint() - t0) / 1e9);
    best = Math.min(best, (c.user + c.system) / 1e6);
  }
  const mbs = (t) => (bytes / 1e6 / t).toFixed(2);
  console.log(`${name}\t${mbs(best)}\t${mbs(bestWall)}\t${best.toFixed(3)}\t${bestWall.toFixed(3)}\t${nTok}\t` +
              `${sum.toString(16).padStart(8, "0")}`);
}

const require = createRequire(import.meta.url);
const rust = require("tokenizers");
const rtok = rust.Tokenizer.fromFile(tokPath);
await timeIt("npm tokenizers@0.23.2 (HF Rust, napi)", async (d) =>
  (await rtok.encode(d, undefined, { addSpecialTokens: false })).getIds());

const { Tokenizer } = await import("@huggingface/tokenizers");
const jtok = new Tokenizer(JSON.parse(readFileSync(tokPath, "utf8")), JSON.parse(readFileSync(cfgPath, "utf8")));
await timeIt("npm @huggingface/tokenizers@0.2.0 (JS)", async (d) =>
  jtok.encode(d, { add_special_tokens: false }).ids);
