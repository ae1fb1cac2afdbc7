// Whether this test binary is built with AddressSanitizer (scripts/test.sh's asan-test gate, ~5-10x slower):
// the heaviest cases shrink there (fewer requests, cut points or long prompts) and run whole in the test
// gate.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define TF_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TF_TEST_SANITIZED 1
#endif
#endif

namespace tf::enginetest {
#ifdef TF_TEST_SANITIZED
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
}  // namespace tf::enginetest
