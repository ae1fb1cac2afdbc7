// Regenerates the goldens of the tokenizer variants with HF tokenizers (Rust; npm tokenizers@0.23.2, the
// version the oracle's meta.json records). Run from the repository root after `npm install` in bench/tokenizer:
//   node tests/data/tokenizer_variants/make_goldens.mjs
// For each variant: <name>.jsonl with one line per line of strings.jsonl, same order:
//   {"ids" (add_special_tokens=false), "ids_special" (true; only when it differs), "decoded" (only when it is
//    not the text itself), "decoded_skip_special" (only when it differs from decoded)}
// The patch logic is mirrored by tests/unit/text/tokenizer_variants_test.cpp.
import { readFileSync, writeFileSync, mkdtempSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";

const require = createRequire(join(process.cwd(), "bench/tokenizer/package.json"));
const { Tokenizer } = require("tokenizers");
const here = "tests/data/tokenizer_variants";
const base = JSON.parse(readFileSync("tests/golden/ckpt/qwen3_5-tiny-bf16/tokenizer.json", "utf8"));
const variants = JSON.parse(readFileSync(join(here, "variants.json"), "utf8"));
const strings = readFileSync(join(here, "strings.jsonl"), "utf8").split("\n").filter((l) => l).map((l) => JSON.parse(l).text);

export function applyPatch(base, patch) {
  const t = structuredClone(base);
  for (const [k, v] of Object.entries(patch)) {
    if (k === "extra_added_tokens") t.added_tokens.push(...v);
    else if (k === "merges_as_strings") t.model.merges = t.model.merges.map((m) => m.join(" "));
    else if (k === "model") Object.assign(t.model, v);
    else if (k === "extra_vocab") Object.assign(t.model.vocab, v);
    else t[k] = v;
  }
  return t;
}

const dir = mkdtempSync(join(tmpdir(), "tokvar-"));
for (const [name, patch] of Object.entries(variants)) {
  if (name.startsWith("_")) continue;
  const path = join(dir, name + ".json");
  writeFileSync(path, JSON.stringify(applyPatch(base, patch)));
  const tok = Tokenizer.fromFile(path);
  const out = [];
  for (const text of strings) {
    const ids = (await tok.encode(text, undefined, { addSpecialTokens: false })).getIds();
    const idsSpecial = (await tok.encode(text, undefined, { addSpecialTokens: true })).getIds();
    const decoded = await tok.decode(ids, false);
    const decodedSkip = await tok.decode(ids, true);
    const line = { ids };
    if (JSON.stringify(idsSpecial) !== JSON.stringify(ids)) line.ids_special = idsSpecial;
    if (decoded !== text) line.decoded = decoded;
    if (decodedSkip !== decoded) line.decoded_skip_special = decodedSkip;
    out.push(JSON.stringify(line));
  }
  writeFileSync(join(here, name + ".jsonl"), out.join("\n") + "\n");
  console.log(`${name}: ${out.length} strings`);
}

// Decoding arbitrary id sequences of the base tokenizer (mostly single bytes in this tiny vocab), so the
// goldens include invalid UTF-8 that HF repairs with U+FFFD: random_decode.jsonl, {"ids", "decoded",
// "decoded_skip_special"}. Seeded LCG, reproducible.
{
  const path = join(dir, "base.json");
  writeFileSync(path, JSON.stringify(base));
  const tok = Tokenizer.fromFile(path);
  let state = 20261129;
  const rnd = (n) => {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0;
    return (state >>> 8) % n;
  };
  const out = [];
  for (let k = 0; k < 400; ++k) {
    const ids = [];
    const len = 1 + rnd(12);
    for (let i = 0; i < len; ++i) ids.push(rnd(5) === 0 ? 1412 + rnd(28) : rnd(1412));
    out.push(JSON.stringify({ ids, decoded: await tok.decode(ids, false), decoded_skip_special: await tok.decode(ids, true) }));
  }
  writeFileSync(join(here, "random_decode.jsonl"), out.join("\n") + "\n");
  console.log(`random_decode: ${out.length} sequences`);
}
