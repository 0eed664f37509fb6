// Owns the mapping from library error categories to the CLI's exit codes (exit_codes.h).
#include "cli/exit_codes.h"

#include "cli/commands.h"

namespace tessera::cli {

int exitCodeFor(ErrorCode c) {
  switch (c) {
    case ErrorCode::InvalidArgument:
    case ErrorCode::ParseError:
    case ErrorCode::VerifyError:
    case ErrorCode::InvalidConfig:
    case ErrorCode::IOError:
    case ErrorCode::Unsupported: return kExitBadInput;
    case ErrorCode::CompileError: return kExitCompileError;
    case ErrorCode::WrongResult: return kExitWrongResult;
    case ErrorCode::NotFound: return kExitNotFound;
    case ErrorCode::PermissionDenied: return kExitRefused;
    case ErrorCode::Unavailable: return kExitUnreachable;
    default: return kExitFailure;
  }
}

int exitCodeFor(const Error& e) { return exitCodeFor(e.code); }

void failWith(const Error& e) { fail(e.str(), exitCodeFor(e)); }

}  // namespace tessera::cli
