// The CUDA sample op (backend/cuda/sample.cu) against the CPU op (the host sampler itself).
//
// Tolerance, and why: the CUDA kernel selects by exact thresholds (argmax, the top-k key, the top-p value
// and its ties in index order) but weighs tokens with expf (2 ulp) in fixed point (2^-q per token) and
// sums them exactly, where the reference sums f32 probabilities one after the other (ascending for
// top-p, by id for the draw). So
//   - greedy ids and top-n logprob ids are identical;
//   - a sampled id equals the CPU's, or is a choice the CPU makes for some u' within eps of the row's u
//     (at top_p itself or top_p +- eps): the draw or the top-p cut lies within the reference's rounding of
//     a cumulative boundary. eps = max(1e-5, n 2^-24) for a reference summing n f32 terms one by one (its
//     error is systematic where the terms are equal: a flat row of 151,936 drifts by 1e-3, measured with
//     a host model of the kernel's arithmetic). Rows whose distribution is peaked (the reference keeps
//     <= 64 tokens, like LightOnOCR's temperature 0.2 with top_k 50) differ in at most 1 %;
//   - logprobs within 1e-5 (plus 1e-6 relative): lse's sum is accumulated in another order.
// Invariance is exact: a row's record is the same alone, among others, in another slot or width.
// Planted controls (test_hooks::set_cuda_sample_variant): the RNG counter of the next position must fail
// the tolerance check, and a row reading row 0's temperature must fail the invariance check.
#include <chrono>
#include <cstring>
#include <numeric>

#include "backend/sampling.h"
#include "backend/test_hooks.h"
#include "base/rng.h"
#include "cuda_contract_util.h"
#include "sample_rows.h"

namespace tf::cudatest {
namespace {

// The reference's rounding of a cumulative over n f32 terms, bounded (see the top).
double eps_for(int64_t n) { return std::max(1e-5, std::ldexp(static_cast<double>(n), -24)); }

struct Rows {
  int64_t vocab = 0;
  Buffer logits;                // [n, vocab] F32
  std::vector<SampleRow> rows;  // [n]
  int64_t width = 1;
  int64_t n() const { return static_cast<int64_t>(rows.size()); }
};

// Rows of several shapes and parameters (sample_rows.h).
Rows make_rows(int64_t vocab, int64_t n, uint32_t seed, bool greedy_only = false) {
  Rows c;
  c.vocab = vocab;
  c.logits = Buffer(DType::F32, {n, vocab});
  c.width = samplerows::fill(vocab, n, seed, greedy_only, c.logits.as<float>(), &c.rows);
  return c;
}

// The op on rows `order` of c (in that order): records [order.size(), width].
Buffer run(Backend& b, const Rows& c, const std::vector<int64_t>& order, int64_t width) {
  const int64_t n = static_cast<int64_t>(order.size());
  Buffer lg(DType::F32, {n, c.vocab});
  std::vector<SampleRow> ps;
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(lg.as<float>() + i * c.vocab, c.logits.as<float>() + order[i] * c.vocab, c.vocab * 4);
    ps.push_back(c.rows[static_cast<size_t>(order[i])]);
  }
  DeviceBuffer dl = upload_new(b, lg);
  DeviceBuffer dp = b.alloc(DType::I32, {n, kSampleRowWords});
  b.upload(dp, ps.data());
  DeviceBuffer out = b.alloc(DType::I32, {n, width});
  b.sample(dl, dp, out);
  return fetch(b, out);
}

std::vector<int64_t> all_rows(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

float f32_of(int32_t bits) {
  float v;
  std::memcpy(&v, &bits, 4);
  return v;
}

// The reference's choice at an explicit u and top_p (sampling::draw with u given).
int32_t draw_at(std::span<const float> l, const SampleRow& p, float top_p, double u,
                std::vector<int32_t>* kept) {
  std::vector<float> probs;
  sampling::filtered(l, p.temperature, p.top_k, top_p, kept, &probs);
  double cum = 0;
  for (size_t j = 0; j < kept->size(); ++j) {
    cum += probs[j];
    if (u < cum) return (*kept)[j];
  }
  return kept->back();
}

// A sampled id the CPU does not pick is explained when the CPU picks it for some u' in [u - eps, u + eps]
// (the draw is monotone in u) at top_p or top_p +- eps, eps for the terms the reference sums (top-k's).
bool explained(std::span<const float> l, const SampleRow& p, int32_t got) {
  const double u = uniform_at(p.seed, p.position);
  std::vector<int32_t> kept;
  std::vector<float> probs;
  sampling::filtered(l, p.temperature, p.top_k, 1.0f, &kept, &probs);
  const double eps = eps_for(static_cast<int64_t>(kept.size()));
  for (const double dp : {0.0, -eps, eps}) {
    const float tp = static_cast<float>(std::min(1.0, p.top_p + dp));
    const int32_t lo = draw_at(l, p, tp, std::max(0.0, u - eps), &kept);
    const int32_t hi = draw_at(l, p, tp, std::min(std::nextafter(1.0, 0.0), u + eps), &kept);
    if (got >= lo && got <= hi && std::binary_search(kept.begin(), kept.end(), got)) return true;
  }
  return false;
}

struct Verdict {
  int64_t sampled = 0, differ = 0, unexplained = 0, greedy_differ = 0, logprob_bad = 0;
  int64_t peaked = 0, peaked_differ = 0;  // sampled rows whose reference keeps <= 64 tokens
  double worst_lp = 0;
  std::string first;
};

// Compares CUDA records with the CPU's row by row (the tolerance stated at the top).
Verdict judge(const Rows& c, const Buffer& cpu_out, const Buffer& gpu_out) {
  Verdict v;
  const int64_t w = c.width;
  for (int64_t r = 0; r < c.n(); ++r) {
    const SampleRow& p = c.rows[static_cast<size_t>(r)];
    const std::span<const float> l(c.logits.as<float>() + r * c.vocab, static_cast<size_t>(c.vocab));
    const int32_t* a = cpu_out.as<int32_t>() + r * w;
    const int32_t* g = gpu_out.as<int32_t>() + r * w;
    v.sampled += p.temperature > 0;
    bool peaked = false;
    if (p.temperature > 0) {
      std::vector<int32_t> kept;
      std::vector<float> probs;
      sampling::filtered(l, p.temperature, p.top_k, p.top_p, &kept, &probs);
      peaked = kept.size() <= 64;
      v.peaked += peaked;
      v.peaked_differ += peaked && a[0] != g[0];
    }
    if (a[0] != g[0]) {
      ++v.differ;
      const bool ok = p.temperature > 0 && g[0] >= 0 && g[0] < c.vocab && explained(l, p, g[0]);
      if (p.temperature <= 0) ++v.greedy_differ;
      if (!ok && v.unexplained++ == 0)
        v.first = cat("row ", r, " (T ", p.temperature, ", top_k ", p.top_k, ", top_p ", p.top_p, "): cuda ",
                      g[0], " vs cpu ", a[0]);
    }
    if (w == 1 || p.n_logprobs < 0) continue;
    // Logprobs of the CUDA id (the CPU's own function on it), and the top ids exactly.
    const int64_t k = std::min<int64_t>({p.n_logprobs, (w - 2) / 2, c.vocab});
    std::vector<int32_t> ids(static_cast<size_t>(k));
    std::vector<float> lps(static_cast<size_t>(k));
    const int32_t gid = (g[0] >= 0 && g[0] < c.vocab) ? g[0] : 0;
    const float lp = sampling::logprobs(l, gid, static_cast<int32_t>(k), ids.data(), lps.data());
    auto check = [&](float want, float got) {
      if (want == got) return;  // equal, -inf (a -inf logit's logprob) included
      const double e = std::fabs(static_cast<double>(want) - got);
      v.worst_lp = std::max(v.worst_lp, std::isnan(e) ? INFINITY : e);
      if (!(e <= 1e-5 + 1e-6 * std::fabs(want))) ++v.logprob_bad;
    };
    check(lp, f32_of(g[1]));
    for (int64_t j = 0; j < k; ++j) {
      if (g[2 + 2 * j] != ids[static_cast<size_t>(j)]) ++v.logprob_bad;
      check(lps[static_cast<size_t>(j)], f32_of(g[3 + 2 * j]));
    }
  }
  return v;
}

void print(const std::string& what, const Verdict& v) {
  std::printf(
      "[ contract ] sample %s: %lld sampled rows, ids differ in %lld (%lld unexplained, %lld greedy; %lld of "
      "%lld peaked rows), logprobs: worst |diff| %.3g, %lld out of tolerance%s%s\n",
      what.c_str(), static_cast<long long>(v.sampled), static_cast<long long>(v.differ),
      static_cast<long long>(v.unexplained), static_cast<long long>(v.greedy_differ),
      static_cast<long long>(v.peaked_differ), static_cast<long long>(v.peaked), v.worst_lp,
      static_cast<long long>(v.logprob_bad), v.first.empty() ? "" : "; first: ", v.first.c_str());
}

struct Variant {
  explicit Variant(int which) { EXPECT_TRUE(test_hooks::set_cuda_sample_variant(which)); }
  ~Variant() { test_hooks::set_cuda_sample_variant(0); }
};

const int64_t kVocabs[] = {1, 2, 7, 1000, 5003, 32771, 151936};

TEST_F(CudaContract, SampleGreedyIdsAndLogprobs) {
  for (const int64_t vocab : kVocabs) {
    const Rows c = make_rows(vocab, 24, static_cast<uint32_t>(vocab) + 3u, /*greedy_only=*/true);
    const Verdict v =
        judge(c, run(cpu(), c, all_rows(c.n()), c.width), run(dev(), c, all_rows(c.n()), c.width));
    print(cat("greedy, vocab ", vocab), v);
    EXPECT_EQ(v.differ, 0) << v.first;
    EXPECT_EQ(v.logprob_bad, 0);
  }
}

TEST_F(CudaContract, SampleWithinBoundaryEpsilon) {
  Verdict total;
  for (const int64_t vocab : kVocabs) {
    const int64_t n = vocab > 40000 ? 64 : 256;
    const Rows c = make_rows(vocab, n, static_cast<uint32_t>(vocab) * 31u + 7u);
    const Verdict v = judge(c, run(cpu(), c, all_rows(n), c.width), run(dev(), c, all_rows(n), c.width));
    print(cat("vocab ", vocab), v);
    EXPECT_EQ(v.unexplained, 0) << "vocab " << vocab << ": " << v.first;
    EXPECT_EQ(v.logprob_bad, 0) << "vocab " << vocab;
    total.peaked += v.peaked;
    total.peaked_differ += v.peaked_differ;
  }
  EXPECT_GT(total.peaked, 200);
  EXPECT_LE(total.peaked_differ * 100, total.peaked) << "more than 1% of the peaked rows' ids differ";
}

TEST_F(CudaContract, SampleRowIsInvariant) {
  for (const int64_t vocab : {1000, 151936}) {
    const Rows c = make_rows(vocab, 24, static_cast<uint32_t>(vocab) + 99u);
    const Buffer all = run(dev(), c, all_rows(c.n()), c.width);
    std::vector<int64_t> rev = all_rows(c.n());
    std::reverse(rev.begin(), rev.end());
    const Buffer reversed = run(dev(), c, rev, c.width);
    for (int64_t r = 0; r < c.n(); ++r) {
      const Buffer alone = run(dev(), c, {r}, c.width);
      EXPECT_TRUE(Exact(rows_of(all, r, r + 1), alone))
          << "vocab " << vocab << " row " << r << " among others";
      EXPECT_TRUE(Exact(rows_of(reversed, c.n() - 1 - r, c.n() - r), alone)) << "row " << r << " reversed";
      EXPECT_EQ(run(dev(), c, {r}, 1).as<int32_t>()[0], alone.as<int32_t>()[0]) << "row " << r << " ids only";
    }
  }
}

TEST_F(CudaContract, SamplePlantedControlsAreCaught) {
  const Rows c = make_rows(5003, 256, 5003u * 31u + 7u);
  const Buffer ref = run(cpu(), c, all_rows(c.n()), c.width);
  {
    Variant next_counter(1);
    const Verdict v = judge(c, ref, run(dev(), c, all_rows(c.n()), c.width));
    print("planted: next position's counter", v);
    EXPECT_GT(v.unexplained, 10) << "the tolerance check misses a wrong RNG counter";
  }
  {
    Variant row0_temperature(2);
    const Buffer all = run(dev(), c, all_rows(c.n()), c.width);
    int64_t differ = 0;
    for (int64_t r = 0; r < c.n(); ++r)
      differ += diff(rows_of(all, r, r + 1), run(dev(), c, {r}, c.width)).differ > 0;
    std::printf(
        "[ contract ] sample planted: row 0's temperature: %lld of %lld rows differ alone vs among others\n",
        static_cast<long long>(differ), static_cast<long long>(c.n()));
    EXPECT_GT(differ, 10) << "the invariance check misses a row reading another row's parameters";
  }
}

// Not a timed test: prints the op's time for LightOnOCR's vocabulary (generation_config: temperature 0.2,
// HF's default top_k 50), and with top-p, and the greedy steps' argmax, for the lead's notes.
TEST_F(CudaContract, SamplePrintsItsSpeed) {
  for (const int64_t n : {1, 64}) {
    {  // greedy: Backend::argmax over the step's rows
      Rows c = make_rows(151936, n, 17u);
      DeviceBuffer dl = upload_new(dev(), c.logits);
      DeviceBuffer out = dev().alloc(DType::I32, {n});
      dev().argmax(dl, out);
      dev().synchronize();
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < 50; ++i) dev().argmax(dl, out);
      dev().synchronize();
      const double us =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / 50;
      std::printf("[ contract ] sample speed: argmax, %lld rows x 151936: %.1f us per call\n",
                  static_cast<long long>(n), us);
      EXPECT_GT(us, 0.0);
    }
    for (const float top_p : {1.0f, 0.9f}) {
      Rows c = make_rows(151936, n, 17u);
      for (SampleRow& p : c.rows) p = SampleRow{0.2f, top_p, 50, -1, 7, 3};
      DeviceBuffer dl = upload_new(dev(), c.logits);
      DeviceBuffer dp = dev().alloc(DType::I32, {n, kSampleRowWords});
      dev().upload(dp, c.rows.data());
      DeviceBuffer out = dev().alloc(DType::I32, {n, 1});
      dev().sample(dl, dp, out);
      dev().synchronize();
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < 50; ++i) dev().sample(dl, dp, out);
      dev().synchronize();
      const double us =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / 50;
      std::printf(
          "[ contract ] sample speed: %lld rows x 151936, T 0.2, top_k 50, top_p %.1f: %.1f us per call\n",
          static_cast<long long>(n), static_cast<double>(top_p), us);
      EXPECT_GT(us, 0.0);
    }
  }
}

}  // namespace
}  // namespace tf::cudatest
