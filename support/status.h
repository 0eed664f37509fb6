// Owns the library-boundary error idiom: an Error with a small category enum and an Expected<T>.
#pragma once

#include <cassert>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace tessera {

// Categories double as the candidate statuses recorded by the tuner (ARCHITECTURE.md §2.9), so a failed
// candidate is a value with a category rather than an exception.
enum class ErrorCode {
  InvalidArgument,  // bad user input (flags, shapes, JSON)
  ParseError,       // IR text or expression language could not be parsed
  VerifyError,      // kernel is structurally wrong (shape mismatch, dtype clash, ...)
  InvalidConfig,    // a config the strategy cannot lower (illegal knob values)
  CompileError,     // lowering or LLVM code generation failed
  RuntimeError,     // execution failed in a recoverable way
  Timeout,
  Crash,
  WrongResult,
  NotFound,
  IOError,
  Unsupported,      // e.g. a target without a runner here
  Internal,
  PermissionDenied,  // a service refused the credentials (HTTP 401 / 403)
  Unavailable,       // a service that had to answer did not (down, unreachable, timed out)
};

std::string_view errorCodeName(ErrorCode c);

struct Error {
  ErrorCode code = ErrorCode::Internal;
  std::string message;
  std::string str() const;
};

inline Error makeError(ErrorCode c, std::string msg) { return Error{c, std::move(msg)}; }

template <class T>
class [[nodiscard]] Expected {
 public:
  Expected(T v) : v_(std::move(v)) {}                // NOLINT: implicit by design
  Expected(Error e) : v_(std::move(e)) {}            // NOLINT
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { assert(ok()); return std::get<0>(v_); }
  const T& value() const& { assert(ok()); return std::get<0>(v_); }
  T&& value() && { assert(ok()); return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const Error& error() const { assert(!ok()); return std::get<1>(v_); }
  Error takeError() { assert(!ok()); return std::move(std::get<1>(v_)); }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Expected<void> {
 public:
  Expected() = default;
  Expected(Error e) : err_(std::move(e)), ok_(false) {}  // NOLINT
  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { assert(!ok_); return err_; }
  Error takeError() { assert(!ok_); return std::move(err_); }

 private:
  Error err_;
  bool ok_ = true;
};

using Status = Expected<void>;

}  // namespace tessera

// Propagates an error from an Expected-returning expression.
#define TESSERA_TRY(expr)                              \
  do {                                                 \
    auto _st = (expr);                                 \
    if (!_st.ok()) return _st.takeError();             \
  } while (0)

#define TESSERA_CONCAT_INNER(a, b) a##b
#define TESSERA_CONCAT(a, b) TESSERA_CONCAT_INNER(a, b)
// TESSERA_ASSIGN(auto x, f()); binds the value or returns the error.
#define TESSERA_ASSIGN(decl, expr) TESSERA_ASSIGN_IMPL(TESSERA_CONCAT(_ex_, __LINE__), decl, expr)
#define TESSERA_ASSIGN_IMPL(tmp, decl, expr) \
  auto tmp = (expr);                         \
  if (!tmp.ok()) return tmp.takeError();     \
  decl = std::move(tmp).value()
