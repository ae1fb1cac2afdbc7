// torchvision's uint8 antialiased bicubic resize, bit for bit, on the oracle's random inputs
// (tests/golden/resize/: cases.json + resize.safetensors with caseNN.input / caseNN.output).
#include <gtest/gtest.h>

#include "golden_util.h"
#include "image/resize_aa.h"

namespace tf {
namespace {

TEST(ResizeGolden, TorchvisionBicubicAntialiasBitExact) {
  const auto cases = test::read_json(test::golden_path("resize/cases.json"));
  if (!cases) GTEST_SKIP() << "missing golden tests/golden/resize/cases.json (oracle: ref.py resize)";
  const auto store = test::read_safetensors(test::golden_path("resize/resize.safetensors"));
  ASSERT_FALSE(store.empty()) << "tests/golden/resize/resize.safetensors missing or empty";
  int n_exact = 0, n = 0;
  for (const auto& c : *cases) {
    const std::string name = c["name"];
    if (c.contains("error")) {  // torch itself failed on this case (README: case07 asserts in torch 2.11)
      std::printf("%s: torch raised, skipped: %s\n", name.c_str(), c["error"].dump().c_str());
      continue;
    }
    const auto in_chw = c["in_chw"].get<std::vector<int>>();
    const auto out_hw = c["out_hw"].get<std::vector<int>>();
    ASSERT_EQ(c.value("interpolation", "bicubic"), "bicubic");
    const auto& in = store.at(name + ".input");
    const auto& want = store.at(name + ".output");
    const auto got =
        resize_aa_u8(in.bytes, in_chw[0], in_chw[1], in_chw[2], out_hw[0], out_hw[1], ResizeFilter::bicubic);
    ++n;
    size_t diff = 0;
    int max_diff = 0;
    for (size_t i = 0; i < got.size() && i < want.bytes.size(); ++i) {
      const int d = std::abs(int(got[i]) - int(want.bytes[i]));
      if (d) ++diff, max_diff = std::max(max_diff, d);
    }
    const bool same = got.size() == want.bytes.size() && diff == 0;
    n_exact += same;
    EXPECT_TRUE(same) << name << " " << in_chw[1] << "x" << in_chw[2] << " -> " << out_hw[0] << "x"
                      << out_hw[1] << ": " << diff << " of " << got.size() << " values differ, max "
                      << max_diff;
  }
  std::printf("resize goldens: %d of %d bit-exact\n", n_exact, n);
}

}  // namespace
}  // namespace tf
