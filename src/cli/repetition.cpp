#include "cli/repetition.h"

namespace tf::cli {

bool RepetitionGuard::push(int32_t token) {
  ids_.push_back(token);
  if (n_ < 2) return false;
  const int64_t i = static_cast<int64_t>(ids_.size()) - 1;
  bool hit = false;
  for (int l = 1; l <= kMaxCycle && l <= i; ++l) {
    int64_t& r = run_[l - 1];
    r = ids_[i] == ids_[i - l] ? r + 1 : 0;
    if (!hit && r >= static_cast<int64_t>(l) * (n_ - 1)) {
      hit = true;
      cycle_ = l;
    }
  }
  return hit;
}

}  // namespace tf::cli
