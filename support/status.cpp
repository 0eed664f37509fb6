// Owns the names of error categories (stable: they are stored as record statuses).
#include "support/status.h"

namespace tessera {

std::string_view errorCodeName(ErrorCode c) {
  switch (c) {
    case ErrorCode::InvalidArgument: return "invalid-argument";
    case ErrorCode::ParseError: return "parse-error";
    case ErrorCode::VerifyError: return "verify-error";
    case ErrorCode::InvalidConfig: return "invalid-config";
    case ErrorCode::CompileError: return "compile-error";
    case ErrorCode::RuntimeError: return "runtime-error";
    case ErrorCode::Timeout: return "timeout";
    case ErrorCode::Crash: return "crash";
    case ErrorCode::WrongResult: return "wrong-result";
    case ErrorCode::NotFound: return "not-found";
    case ErrorCode::IOError: return "io-error";
    case ErrorCode::Unsupported: return "unsupported";
    case ErrorCode::Internal: return "internal";
    case ErrorCode::PermissionDenied: return "permission-denied";
    case ErrorCode::Unavailable: return "unavailable";
  }
  return "internal";
}

std::string Error::str() const { return std::string(errorCodeName(code)) + ": " + message; }

}  // namespace tessera
