// The --max-repeat guard of `tensorfold ocr`: a page whose output ends in the same token cycle
// repeated N times (one token N times, or a block of up to kMaxCycle tokens N times in a row) is a
// repetition loop, the failure OCR users meet most; the command then stops it (finish reason
// "repetition"). Runs client-side on the token stream, so the engine is untouched.
#pragma once
#include <cstdint>
#include <vector>

namespace tf::cli {

class RepetitionGuard {
 public:
  static constexpr int kMaxCycle = 256;  // longest cycle looked for, in tokens
  // n_repeats < 2 disables the guard.
  explicit RepetitionGuard(int n_repeats) : n_(n_repeats) {}
  // Feeds one token; true once the output ends in some cycle of length L <= kMaxCycle repeated
  // n_repeats times (the last L * n_repeats tokens are one L-token block n_repeats times).
  bool push(int32_t token);
  int cycle() const { return cycle_; }  // the cycle length found (0 before)

 private:
  int n_;
  int cycle_ = 0;
  std::vector<int32_t> ids_;
  // run_[L-1]: how many of the latest tokens each equal the token L positions earlier; the output
  // ends in an L-cycle repeated k times exactly when run_[L-1] >= L * (k - 1).
  std::vector<int64_t> run_ = std::vector<int64_t>(kMaxCycle, 0);
};

}  // namespace tf::cli
