// Errors cross module boundaries as values. Expected<T> holds a T or an Error; Status is Expected<void>.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <variant>

namespace tf {

struct Error {
  std::string message;  // one clear line, meant for the user
};

template <class T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}      // NOLINT(google-explicit-constructor)
  Expected(Error error) : v_(std::move(error)) {}  // NOLINT(google-explicit-constructor)
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Expected<void> {
 public:
  Expected() = default;
  Expected(Error error) : err_(std::move(error)), ok_(false) {}  // NOLINT(google-explicit-constructor)
  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { return err_; }

 private:
  Error err_;
  bool ok_ = true;
};

using Status = Expected<void>;

inline Error make_error(std::string message) { return Error{std::move(message)}; }

}  // namespace tf

// Propagate an error: TF_TRY(status_expr); or TF_ASSIGN(var, expected_expr);
#define TF_CONCAT_INNER(a, b) a##b
#define TF_CONCAT(a, b) TF_CONCAT_INNER(a, b)
#define TF_TRY(expr)                               \
  do {                                             \
    auto tf_try_s_ = (expr);                       \
    if (!tf_try_s_.ok()) return tf_try_s_.error(); \
  } while (0)
#define TF_ASSIGN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                   \
  if (!tmp.ok()) return tmp.error();   \
  lhs = std::move(tmp).value()
#define TF_ASSIGN(lhs, expr) TF_ASSIGN_IMPL(TF_CONCAT(tf_assign_, __LINE__), lhs, expr)

// Internal invariant checks (programming errors, never user input).
#define TF_CHECK(cond)                                                              \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                 \
    }                                                                               \
  } while (0)
