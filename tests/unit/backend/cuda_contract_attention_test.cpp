// The flash attention (attention_tc.cu, attention_tc_wide.cu, attention_merge.cu) against the CPU reference:
// bf16 held to the CPU op by a stated tolerance with planted controls, f32 bit-identical; batch invariance
// (a row alone, chunked, inside other calls, paged or contiguous, in every variant, in one block or split
// over several) exact on the CUDA backend. Skips where create_backend("cuda") fails. The linear:
// cuda_contract_tc_test.cpp.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <utility>

#include "backend/test_hooks.h"
#include "cuda_contract_util.h"

using namespace tf;
using namespace tf::cudatest;

namespace {

constexpr DType kActs[] = {DType::BF16, DType::F32};
constexpr DType kBF16 = DType::BF16;

// ---- attention -------------------------------------------------------------------------------
enum class Keys { kCausal, kAll, kBlocks, kRandom };

// key_ranges[n_q, 2] for the last n_q positions of n_k keys (causal), all keys, a block-diagonal
// split at n/64, n/5 (vision images), or random non-empty ranges.
std::vector<int32_t> key_ranges(Keys kind, int64_t n_q, int64_t n_k, uint32_t seed) {
  std::vector<int32_t> r(static_cast<size_t>(2 * n_q));
  const int32_t cuts[] = {0, static_cast<int32_t>(n_k / 64 + 1), static_cast<int32_t>(n_k / 5 + 2),
                          static_cast<int32_t>(n_k)};
  std::mt19937 rng(seed);
  for (int64_t i = 0; i < n_q; ++i) {
    int32_t b = 0, e = static_cast<int32_t>(n_k);
    if (kind == Keys::kCausal) e = static_cast<int32_t>(n_k - n_q + i + 1);
    if (kind == Keys::kBlocks)
      for (int s = 0; s < 3; ++s)
        if (i >= cuts[s] && i < cuts[s + 1]) b = cuts[s], e = cuts[s + 1];
    if (kind == Keys::kRandom) {
      b = static_cast<int32_t>(rng() % static_cast<uint32_t>(n_k));
      e = b + 1 + static_cast<int32_t>(rng() % static_cast<uint32_t>(n_k - b));
      if (i % 5 == 0) b = 0, e = static_cast<int32_t>(n_k);  // some rows see every key
      if (i % 7 == 3) e = b + 1;                             // and some exactly one
    }
    r[2 * i] = b;
    r[2 * i + 1] = e;
  }
  return r;
}

Buffer run_attention(Backend& be, const Buffer& q, const Buffer& k, const Buffer& v, const Buffer& ranges) {
  auto dq = upload_new(be, q), dk = upload_new(be, k), dv = upload_new(be, v), dr = upload_new(be, ranges);
  auto out = be.alloc(q.dtype(), q.shape());
  be.attention(dq, dk, dv, dr, 1.0f / std::sqrt(static_cast<float>(q.shape()[2])), out);
  return fetch(be, out);
}

struct AttnCase {
  int64_t n_q, n_k, heads, kvh, d;
  Keys keys;
  float sd;
};

struct AttnInputs {
  Buffer q, k, v, ranges;
  AttnInputs(const AttnCase& c, DType act, uint32_t seed)
      : q(randn(act, {c.n_q, c.heads, c.d}, seed, c.sd)),
        k(randn(act, {c.n_k, c.kvh, c.d}, seed + 1, c.sd)),
        v(randn(act, {c.n_k, c.kvh, c.d}, seed + 2)),
        ranges(i32({c.n_q, 2}, key_ranges(c.keys, c.n_q, c.n_k, seed + 3))) {}
};

// bf16 attention with head_dim % 8 == 0 runs the flash kernel (attention_tc.cu): P is rounded to
// bf16 relative to the running maximum of its key tile instead of the row's global maximum, so each
// rnd(p_j) may differ from the CPU's by one bf16 step (2^-8 relative); out = Σ rnd(p_j) v_j / l then
// moves by at most 2^-8 · max|v| plus its own rounding (2^-8 |out| <= 2^-8 max|v|). Tolerance:
// |diff| <= max|v| / 128 per element. f32 (and odd head_dim) run the CPU's arithmetic: exact.
bool flash_attention(DType act, int64_t d) { return act == kBF16 && d % 8 == 0 && d <= 256; }
double attention_tol(const Buffer& v) {
  double m = 0;
  for (int64_t i = 0; i < v.numel(); ++i)
    m = std::max(m, std::fabs(static_cast<double>(load_f32(v.view(), i))));
  return m / 128;
}

TEST_F(CudaContract, Attention) {
  const AttnCase cases[] = {
      {7, 7, 4, 2, 64, Keys::kCausal, 1},        // prefill, GQA 2
      {1, 600, 8, 1, 128, Keys::kCausal, 1},     // decode over more than 512 keys, GQA 8
      {33, 1033, 16, 4, 128, Keys::kCausal, 1},  // chunk continuation on a cache
      {5, 520, 8, 2, 256, Keys::kCausal, 1},     // head_dim 256 (Qwen3.5)
      {333, 333, 4, 4, 72, Keys::kBlocks, 1},    // block-diagonal vision attention
      {300, 300, 2, 2, 64, Keys::kBlocks, 3},    // vision with peaky scores (Pixtral head_dim)
      {37, 700, 6, 3, 33, Keys::kRandom, 2},     // random ranges, odd head_dim, peaky scores
      {70, 700, 6, 3, 80, Keys::kRandom, 2},     // random ranges on the flash kernel
      {3, 1, 2, 1, 7, Keys::kAll, 1},            // a single key
  };
  uint32_t seed = 400;
  for (const AttnCase& c : cases)
    for (DType act : kActs) {
      AttnInputs in(c, act, seed += 10);
      const std::string what = cat("attention q [", c.n_q, ", ", c.heads, ", ", c.d, "] kv [", c.n_k, ", ",
                                   c.kvh, "] keys ", static_cast<int>(c.keys), " ", dtype_name(act));
      const Buffer ref = run_attention(cpu(), in.q, in.k, in.v, in.ranges),
                   got = run_attention(dev(), in.q, in.k, in.v, in.ranges);
      if (flash_attention(act, c.d))
        EXPECT_TRUE(NearAbs(ref, got, what, attention_tol(in.v)));
      else
        EXPECT_TRUE(Close(ref, got, what));
    }
}

TEST_F(CudaContract, AttentionPlantedControl) {
  const AttnCase c{5, 520, 8, 2, 256, Keys::kCausal, 1};
  for (DType act : kActs) {
    SCOPED_TRACE(dtype_name(act));
    AttnInputs in(c, act, 450);
    const Buffer got = run_attention(dev(), in.q, in.k, in.v, in.ranges);
    const Buffer ref = run_attention(cpu(), in.q, in.k, in.v, in.ranges);
    const int64_t q0 = (2 * 8 + 3) * 256, k0 = (100 * 2 + 1) * 256;  // q[2][3][:], k[100][1][:]
    if (flash_attention(act, c.d)) {
      const double tol = attention_tol(in.v);
      EXPECT_TRUE(NearAbs(ref, got, "attention control baseline", tol));
      EXPECT_FALSE(
          NearAbs(poke(ref, q0 + 5, static_cast<float>(3 * tol)), got, "control: out[2][3][5] + 3 tol", tol));
      Buffer v2 = clone(in.v);  // v[100][1][:] += 200: every row attends key 100
      for (int64_t i = k0; i < k0 + 256; ++i) store_f32(v2.view(), i, load_f32(v2.view(), i) + 200.0f);
      EXPECT_FALSE(
          NearAbs(run_attention(cpu(), in.q, in.k, v2, in.ranges), got, "control: v[100][1] + 200", tol));
      continue;
    }
    EXPECT_TRUE(Close(ref, got, "attention control baseline"));
    auto run_q = [&](const Buffer& q) { return run_attention(cpu(), q, in.k, in.v, in.ranges); };
    auto run_k = [&](const Buffer& k) { return run_attention(cpu(), in.q, k, in.v, in.ranges); };
    EXPECT_TRUE(Differs(run_q(visible_bump(in.q, q0, q0 + 256, run_q)), got)) << "q[2][3] + 1 ulp";
    EXPECT_TRUE(Differs(run_k(visible_bump(in.k, k0, k0 + 256, run_k)), got)) << "k[100][1] + 1 ulp";
  }
}

// Query rows alone, in chunks (prefill split into calls), or inside calls of 37 and 150 rows over a
// 600-key cache give the same bits on the CUDA backend; so do vision rows next to other images.
TEST_F(CudaContract, BatchInvarianceAttention) {
  for (int64_t d : {64, 128, 256})
    for (DType act : kActs) {
      SCOPED_TRACE(cat("head_dim ", d, " ", dtype_name(act)));
      const AttnCase c{150, 600, 16, 4, d, Keys::kCausal, 1};
      AttnInputs in(c, act, 500);
      const Buffer full = run_attention(dev(), in.q, in.k, in.v, in.ranges);
      auto part = [&](int64_t r0, int64_t r1) {
        return run_attention(dev(), rows_of(in.q, r0, r1), in.k, in.v, rows_of(in.ranges, r0, r1));
      };
      for (int64_t r : {0, 1, 18, 36, 64, 149})
        EXPECT_TRUE(Exact(rows_of(full, r, r + 1), part(r, r + 1))) << "row " << r;
      for (auto [r0, r1] : {std::pair<int64_t, int64_t>{0, 37}, {37, 101}, {101, 150}, {5, 13}})
        EXPECT_TRUE(Exact(rows_of(full, r0, r1), part(r0, r1))) << "rows " << r0 << ".." << r1;
      EXPECT_TRUE(Differs(rows_of(full, 1, 2),
                          run_attention(dev(), rows_of(in.q, 0, 1), in.k, in.v, rows_of(in.ranges, 1, 2))))
          << "control: row 0's query with row 1's range";
    }
  for (DType act : kActs) {  // block-diagonal: images of 10, 66 and 257 patches in one call
    const AttnCase c{333, 333, 4, 4, 64, Keys::kBlocks, 1};
    AttnInputs in(c, act, 520);
    const Buffer full = run_attention(dev(), in.q, in.k, in.v, in.ranges);
    for (int64_t r : {0, 9, 10, 70, 332})
      EXPECT_TRUE(Exact(rows_of(full, r, r + 1), run_attention(dev(), rows_of(in.q, r, r + 1), in.k, in.v,
                                                               rows_of(in.ranges, r, r + 1))))
          << "vision row " << r << " " << dtype_name(act);
  }
}

// ---- paged attention ---------------------------------------------------------------------------
// Segments of several sequences in one call over a shared block pool (the batched engine's step):
// decode rows, a draft verification, a prefill chunk. Their blocks are scattered over the pool.
struct PagedCase {
  std::vector<int64_t> q_rows, n_keys;  // per segment: query rows (the last ones), keys
};

struct PagedInputs {
  Buffer q, k_pool, v_pool, tables, seg_rows, ranges;
  std::vector<std::vector<int32_t>> blocks;  // per segment
  int64_t n_q = 0, max_blocks = 1;
  PagedInputs(const PagedCase& c, DType act, int64_t heads, int64_t kvh, int64_t d, uint32_t seed) {
    const size_t n_seg = c.q_rows.size();
    int64_t need = 0;
    for (size_t s = 0; s < n_seg; ++s) {
      n_q += c.q_rows[s];
      need += (c.n_keys[s] + kKvBlock - 1) / kKvBlock;
      max_blocks = std::max(max_blocks, (c.n_keys[s] + kKvBlock - 1) / kKvBlock);
    }
    const int64_t pool_blocks = need + 5;
    std::vector<int32_t> ids(static_cast<size_t>(pool_blocks));
    for (int64_t i = 0; i < pool_blocks; ++i) ids[static_cast<size_t>(i)] = static_cast<int32_t>(i);
    std::shuffle(ids.begin(), ids.end(), std::mt19937(seed));
    std::vector<int32_t> tab(n_seg * static_cast<size_t>(max_blocks), 0), sr{0}, rg;
    size_t next = 0;
    for (size_t s = 0; s < n_seg; ++s) {
      blocks.emplace_back();
      for (int64_t b = 0; b * kKvBlock < c.n_keys[s]; ++b) {
        blocks[s].push_back(ids[next++]);
        tab[s * static_cast<size_t>(max_blocks) + static_cast<size_t>(b)] = blocks[s].back();
      }
      sr.push_back(sr.back() + static_cast<int32_t>(c.q_rows[s]));
      for (int64_t i = 0; i < c.q_rows[s]; ++i) {  // causal: the segment's last q_rows positions
        rg.push_back(0);
        rg.push_back(static_cast<int32_t>(c.n_keys[s] - c.q_rows[s] + i + 1));
      }
    }
    q = randn(act, {n_q, heads, d}, seed + 1);
    k_pool = randn(act, {pool_blocks * kKvBlock, kvh, d}, seed + 2);
    v_pool = randn(act, {pool_blocks * kKvBlock, kvh, d}, seed + 3);
    tables = i32({static_cast<int64_t>(n_seg), max_blocks}, tab);
    seg_rows = i32({static_cast<int64_t>(n_seg) + 1}, sr);
    ranges = i32({n_q, 2}, rg);
  }
  // Segment s's keys gathered contiguously: [n_keys, kvh, d].
  Buffer gather(const Buffer& pool, size_t s, int64_t n_keys) const {
    const int64_t row = pool.numel() / pool.shape()[0];
    Buffer out(pool.dtype(), {n_keys, pool.shape()[1], pool.shape()[2]});
    const size_t es = dtype_size(pool.dtype());
    for (int64_t j = 0; j < n_keys; ++j) {
      const int64_t src = blocks[s][static_cast<size_t>(j / kKvBlock)] * kKvBlock + j % kKvBlock;
      std::memcpy(static_cast<char*>(out.data()) + static_cast<size_t>(j * row) * es,
                  static_cast<const char*>(pool.data()) + static_cast<size_t>(src * row) * es,
                  static_cast<size_t>(row) * es);
    }
    return out;
  }
};

Buffer run_paged(Backend& be, const PagedInputs& in, const Buffer* tables = nullptr) {
  auto dq = upload_new(be, in.q), dk = upload_new(be, in.k_pool), dv = upload_new(be, in.v_pool),
       dt = upload_new(be, tables ? *tables : in.tables), ds = upload_new(be, in.seg_rows),
       dr = upload_new(be, in.ranges);
  auto out = be.alloc(in.q.dtype(), in.q.shape());
  be.paged_attention(dq, dk, dv, dt, ds, dr, 1.0f / std::sqrt(static_cast<float>(in.q.shape()[2])), out);
  return fetch(be, out);
}

// CUDA against the CPU reference (the flash tolerance for bf16, exact for f32), and each segment's rows
// bit-identical to attention() over its keys laid out contiguously, alone: neither the pool layout nor
// the other segments of the step change a row. Control: one swapped table entry must change the rows.
TEST_F(CudaContract, PagedAttention) {
  const PagedCase c{{1, 1, 5, 130, 1, 64}, {1, 700, 69, 300, 64, 64}};
  for (int64_t d : {64, 128})
    for (DType act : kActs) {
      SCOPED_TRACE(cat("head_dim ", d, " ", dtype_name(act)));
      PagedInputs in(c, act, 8, 2, d, 900 + static_cast<uint32_t>(d));
      const Buffer ref = run_paged(cpu(), in), got = run_paged(dev(), in);
      if (flash_attention(act, d))
        EXPECT_TRUE(NearAbs(ref, got, cat("paged attention d ", d), attention_tol(in.v_pool)));
      else
        EXPECT_TRUE(Close(ref, got, cat("paged attention d ", d)));
      int64_t r0 = 0;
      for (size_t s = 0; s < c.q_rows.size(); ++s) {
        const int64_t r1 = r0 + c.q_rows[s];
        const Buffer k = in.gather(in.k_pool, s, c.n_keys[s]), v = in.gather(in.v_pool, s, c.n_keys[s]);
        EXPECT_TRUE(Exact(rows_of(got, r0, r1),
                          run_attention(dev(), rows_of(in.q, r0, r1), k, v, rows_of(in.ranges, r0, r1))))
            << "segment " << s << " against contiguous attention";
        EXPECT_TRUE(Exact(rows_of(ref, r0, r1),
                          run_attention(cpu(), rows_of(in.q, r0, r1), k, v, rows_of(in.ranges, r0, r1))))
            << "CPU segment " << s << " against contiguous attention";
        r0 = r1;
      }
      Buffer swapped = clone(in.tables.view());  // segment 1 (700 keys): its first two blocks exchanged
      auto* t = static_cast<int32_t*>(swapped.data());
      std::swap(t[in.max_blocks], t[in.max_blocks + 1]);
      EXPECT_TRUE(Differs(rows_of(got, 1, 2), rows_of(run_paged(dev(), in, &swapped), 1, 2)))
          << "control: a swapped block table entry";
    }
}

// The attention variants (test_hooks::set_cuda_attention_variant; attention_tc_wide.cu: wider query tiles,
// q in registers, deeper K/V pipelines, unmasked full tiles, skipped dead tiles) run each row's
// arithmetic exactly as variant 0: every call below must give variant 0's bits, whole, for causal
// chunks over a cache (GQA), vision images side by side, random ranges (many passes, rows that see one
// key, dead tiles), a large all-keys call, the paged form with long segments, and calls they leave to
// variant 0 (head_dim 256, few rows). Rows of a variant call cut into other calls (>= 64 rows, so they
// run the variant too) match as well; and one case per variant is held to the CPU tolerance.
TEST_F(CudaContract, AttentionVariants) {
  struct Restore {
    ~Restore() { test_hooks::set_cuda_attention_variant(test_hooks::cuda_attention_default()); }
  } restore;
  const int n_var = test_hooks::cuda_attention_variants();
  ASSERT_GE(n_var, 1);
  const AttnCase cases[] = {
      {150, 600, 16, 4, 64, Keys::kCausal, 1}, {150, 600, 16, 4, 128, Keys::kCausal, 1},
      {333, 333, 4, 4, 64, Keys::kBlocks, 1},  {333, 333, 4, 4, 72, Keys::kBlocks, 1},
      {300, 700, 6, 3, 80, Keys::kRandom, 2},  {1100, 1100, 2, 2, 64, Keys::kAll, 3},
      {200, 520, 8, 2, 256, Keys::kCausal, 1}, {7, 7, 4, 2, 64, Keys::kCausal, 1},
      {129, 129, 16, 16, 64, Keys::kAll, 1},
  };
  uint32_t seed = 700;
  for (const AttnCase& c : cases) {
    AttnInputs in(c, kBF16, seed += 10);
    const std::string what = cat("attention q [", c.n_q, ", ", c.heads, ", ", c.d, "] kv [", c.n_k, ", ",
                                 c.kvh, "] keys ", static_cast<int>(c.keys));
    ASSERT_TRUE(test_hooks::set_cuda_attention_variant(0));
    const Buffer ref = run_attention(dev(), in.q, in.k, in.v, in.ranges);
    for (int var = 1; var < n_var; ++var) {
      ASSERT_TRUE(test_hooks::set_cuda_attention_variant(var));
      const Buffer got = run_attention(dev(), in.q, in.k, in.v, in.ranges);
      EXPECT_TRUE(Exact(ref, got)) << what << ": variant " << var << " against variant 0";
      if (c.n_q >= 128) {
        const int64_t r0 = c.n_q / 3, r1 = c.n_q;  // a later chunk of >= 64 rows, alone
        EXPECT_TRUE(Exact(rows_of(got, r0, r1), run_attention(dev(), rows_of(in.q, r0, r1), in.k, in.v,
                                                              rows_of(in.ranges, r0, r1))))
            << what << ": variant " << var << ", rows " << r0 << ".." << r1 << " alone";
      }
      if (&c == &cases[2] || &c == &cases[4]) {
        EXPECT_TRUE(NearAbs(run_attention(cpu(), in.q, in.k, in.v, in.ranges), got,
                            cat(what, " variant ", var, " vs cpu"), attention_tol(in.v)));
      }
    }
  }
  const PagedCase pc{{130, 200, 64}, {200, 200, 700}};
  for (int64_t d : {64, 128}) {
    PagedInputs in(pc, kBF16, 8, 2, d, 950 + static_cast<uint32_t>(d));
    ASSERT_TRUE(test_hooks::set_cuda_attention_variant(0));
    const Buffer ref = run_paged(dev(), in);
    for (int var = 1; var < n_var; ++var) {
      ASSERT_TRUE(test_hooks::set_cuda_attention_variant(var));
      EXPECT_TRUE(Exact(ref, run_paged(dev(), in))) << "paged d " << d << ": variant " << var << " against 0";
    }
  }
}

// ---- key splits --------------------------------------------------------------------------------
// attention_split.cuh: a row's keys are folded every 512 keys (256 at head_dim > 64) from its range begin,
// inside the block (prefill, vision) or one block per split and a merge (calls of few rows per sequence,
// whose blocks also pack the query heads of one kv head as rows). Decode rows (and 5-row verifications) over
// caches around and past the split points must have the bits of the same rows inside prefill chunks (the wide
// variant, or variant 0 at head_dim 256), of the same call folded in the block (partials off), of the call
// with a wider block table (a decode graph's), and of each row alone over its keys laid out contiguously; and
// stay within the CPU tolerance. Control: split points moved to every 256 keys (128 at head_dim > 64) must
// change exactly the rows with more keys than that, so the exact comparisons would see a fold placed by
// anything but the row's own range.
Buffer pick_rows(const Buffer& b, const std::vector<int64_t>& rows) {
  const int64_t row = b.numel() / b.shape()[0];
  const size_t bytes = static_cast<size_t>(row) * dtype_size(b.dtype());
  Shape shape = b.shape();
  shape[0] = static_cast<int64_t>(rows.size());
  Buffer out(b.dtype(), shape);
  for (size_t i = 0; i < rows.size(); ++i)
    std::memcpy(static_cast<char*>(out.data()) + i * bytes,
                static_cast<const char*>(b.data()) + static_cast<size_t>(rows[i]) * bytes, bytes);
  return out;
}

Buffer run_paged_rows(Backend& be, const PagedInputs& in, const Buffer& q, const Buffer& seg_rows,
                      const Buffer& ranges, const Buffer& tables) {
  auto dq = upload_new(be, q), dk = upload_new(be, in.k_pool), dv = upload_new(be, in.v_pool),
       dt = upload_new(be, tables), ds = upload_new(be, seg_rows), dr = upload_new(be, ranges);
  auto out = be.alloc(q.dtype(), q.shape());
  be.paged_attention(dq, dk, dv, dt, ds, dr, 1.0f / std::sqrt(static_cast<float>(q.shape()[2])), out);
  return fetch(be, out);
}

TEST_F(CudaContract, AttentionKeySplits) {
  struct Restore {
    ~Restore() {
      test_hooks::set_cuda_attention_split(0);
      test_hooks::set_cuda_attention_partials(true);
      test_hooks::set_cuda_attention_pack(-1);
      test_hooks::set_cuda_attention_decode_form(true);
      test_hooks::set_cuda_attention_decode_chunks(-1);
      test_hooks::set_cuda_attention_decode_warps(0);
      test_hooks::set_cuda_attention_fused_merge(0);
    }
  } restore;
  const PagedCase c{{130, 130, 130, 130, 130, 130}, {511, 512, 513, 1025, 2333, 4000}};
  const size_t n_seg = c.n_keys.size();
  for (int64_t d : {64, 128, 256}) {
    SCOPED_TRACE(cat("head_dim ", d));
    PagedInputs in(c, kBF16, 8, 2, d, 1200 + static_cast<uint32_t>(d));
    std::vector<int64_t> last;  // each segment's last row: its next decode position
    std::vector<int32_t> sr{0};
    for (size_t s = 0; s < n_seg; ++s) {
      last.push_back(static_cast<int64_t>(s + 1) * 130 - 1);
      sr.push_back(static_cast<int32_t>(s + 1));
    }
    const Buffer q1 = pick_rows(in.q, last), r1 = pick_rows(in.ranges, last);
    const Buffer s1 = i32({static_cast<int64_t>(n_seg) + 1}, sr);
    std::vector<int32_t> wide_tab(n_seg * 2 * static_cast<size_t>(in.max_blocks), 0);
    for (size_t s = 0; s < n_seg; ++s)
      for (int64_t b = 0; b < in.max_blocks; ++b)
        wide_tab[s * 2 * static_cast<size_t>(in.max_blocks) + static_cast<size_t>(b)] =
            static_cast<const int32_t*>(in.tables.data())[s * static_cast<size_t>(in.max_blocks) + b];
    const Buffer wide = i32({static_cast<int64_t>(n_seg), 2 * in.max_blocks}, wide_tab);

    const Buffer prefill = run_paged(dev(), in);
    const Buffer decode = run_paged_rows(dev(), in, q1, s1, r1, in.tables);
    EXPECT_TRUE(Exact(pick_rows(prefill, last), decode))
        << "decode rows against the same rows in prefill chunks";
    std::vector<int64_t> last5;  // a draft verification: each segment's last 5 rows (split-parallel, packed)
    std::vector<int32_t> sr5{0};
    for (size_t s = 0; s < n_seg; ++s) {
      for (int64_t r = 125; r < 130; ++r) last5.push_back(static_cast<int64_t>(s) * 130 + r);
      sr5.push_back(static_cast<int32_t>(5 * (s + 1)));
    }
    ASSERT_TRUE(test_hooks::set_cuda_attention_pack(1));  // packed, whatever the grid size
    EXPECT_TRUE(Exact(pick_rows(prefill, last5), run_paged_rows(dev(), in, pick_rows(in.q, last5),
                                                                i32({static_cast<int64_t>(n_seg) + 1}, sr5),
                                                                pick_rows(in.ranges, last5), in.tables)))
        << "verification rows (5 per segment) against the same rows in prefill chunks";
    ASSERT_TRUE(test_hooks::set_cuda_attention_pack(-1));
    EXPECT_TRUE(Exact(decode, run_paged_rows(dev(), in, q1, s1, r1, wide))) << "a block table twice as wide";
    for (int pack : {0, 1}) {  // kv-head groups packed into one block or not: the same bits
      ASSERT_TRUE(test_hooks::set_cuda_attention_pack(pack));
      EXPECT_TRUE(Exact(decode, run_paged_rows(dev(), in, q1, s1, r1, in.tables))) << "pack " << pack;
    }
    ASSERT_TRUE(test_hooks::set_cuda_attention_pack(-1));
    ASSERT_TRUE(test_hooks::set_cuda_attention_decode_form(false));  // attention_tc.cu's 64-row blocks
    EXPECT_TRUE(Exact(decode, run_paged_rows(dev(), in, q1, s1, r1, in.tables)))
        << "16-row blocks (attention_tc_decode.cu) against 64-row blocks with one live warp";
    ASSERT_TRUE(test_hooks::set_cuda_attention_decode_form(true));
    for (int chunks : {0, 1}) {  // attention_tc_decode_chunks.cu never / whenever the call does not fold
      ASSERT_TRUE(test_hooks::set_cuda_attention_decode_chunks(chunks));
      EXPECT_TRUE(Exact(decode, run_paged_rows(dev(), in, q1, s1, r1, in.tables))) << "chunks " << chunks;
      EXPECT_TRUE(Exact(decode, run_paged_rows(dev(), in, q1, s1, r1, wide)))
          << "wide table, chunks " << chunks;
      EXPECT_TRUE(Exact(pick_rows(prefill, last5), run_paged_rows(dev(), in, pick_rows(in.q, last5),
                                                                  i32({static_cast<int64_t>(n_seg) + 1}, sr5),
                                                                  pick_rows(in.ranges, last5), in.tables)))
          << "verification rows, chunks " << chunks;
    }
    ASSERT_TRUE(test_hooks::set_cuda_attention_decode_chunks(-1));
    for (int warps : {4, 8})  // the tile ring's warps per block, split-parallel and folded: the same bits
      for (bool partials : {true, false}) {
        ASSERT_TRUE(test_hooks::set_cuda_attention_decode_warps(warps));
        ASSERT_TRUE(test_hooks::set_cuda_attention_decode_chunks(0));
        ASSERT_TRUE(test_hooks::set_cuda_attention_partials(partials));
        EXPECT_TRUE(Exact(decode, run_paged_rows(dev(), in, q1, s1, r1, in.tables)))
            << warps << " warps, partials " << partials;
        EXPECT_TRUE(Exact(
            pick_rows(prefill, last5),
            run_paged_rows(dev(), in, pick_rows(in.q, last5), i32({static_cast<int64_t>(n_seg) + 1}, sr5),
                           pick_rows(in.ranges, last5), in.tables)))
            << "verification rows, " << warps << " warps, partials " << partials;
      }
    ASSERT_TRUE(test_hooks::set_cuda_attention_decode_warps(0));
    for (int chunks : {0, 1}) {  // the last block's fold instead of the merge launch: the same bits
      ASSERT_TRUE(test_hooks::set_cuda_attention_decode_chunks(chunks));
      ASSERT_TRUE(test_hooks::set_cuda_attention_fused_merge(1));
      EXPECT_TRUE(Exact(decode, run_paged_rows(dev(), in, q1, s1, r1, in.tables)))
          << "last block's fold, chunks " << chunks;
      EXPECT_TRUE(Exact(pick_rows(prefill, last5), run_paged_rows(dev(), in, pick_rows(in.q, last5),
                                                                  i32({static_cast<int64_t>(n_seg) + 1}, sr5),
                                                                  pick_rows(in.ranges, last5), in.tables)))
          << "verification rows, last block's fold, chunks " << chunks;
      ASSERT_TRUE(test_hooks::set_cuda_attention_fused_merge(0));
    }
    ASSERT_TRUE(test_hooks::set_cuda_attention_decode_chunks(-1));
    ASSERT_TRUE(test_hooks::set_cuda_attention_partials(false));
    EXPECT_TRUE(Exact(decode, run_paged_rows(dev(), in, q1, s1, r1, in.tables)))
        << "split-parallel against folded in the block";
    ASSERT_TRUE(test_hooks::set_cuda_attention_partials(true));
    for (size_t s = 0; s < n_seg; ++s) {
      const Buffer k = in.gather(in.k_pool, s, c.n_keys[s]), v = in.gather(in.v_pool, s, c.n_keys[s]);
      const auto r = static_cast<int64_t>(s);
      EXPECT_TRUE(Exact(rows_of(decode, r, r + 1),
                        run_attention(dev(), rows_of(q1, r, r + 1), k, v, rows_of(r1, r, r + 1))))
          << "segment " << s << " alone over contiguous keys";
    }
    EXPECT_TRUE(NearAbs(run_paged_rows(cpu(), in, q1, s1, r1, in.tables), decode, cat("decode rows d ", d),
                        attention_tol(in.v_pool)));

    const int64_t control = d > 64 ? 128 : 256;  // production: 256 / 512
    ASSERT_TRUE(test_hooks::set_cuda_attention_split(static_cast<int>(control)));
    const Buffer moved = run_paged_rows(dev(), in, q1, s1, r1, in.tables);
    ASSERT_TRUE(test_hooks::set_cuda_attention_split(0));
    for (size_t s = 0; s < n_seg; ++s) {
      const auto r = static_cast<int64_t>(s);
      EXPECT_EQ(static_cast<bool>(Differs(rows_of(moved, r, r + 1), rows_of(decode, r, r + 1))),
                c.n_keys[s] > control)
          << "control: split points every " << control << " keys, segment " << s << " (" << c.n_keys[s]
          << " keys)";
    }
  }
}

}  // namespace
