// Owns the `tessera` exit-code contract: one code per kind of outcome, the same for every command
// (README "Exit codes" lists this table; tests/cli/exit_codes_test.sh checks it per command).
#pragma once

#include "support/status.h"

namespace tessera::cli {

enum ExitCode : int {
  kExitOk = 0,
  kExitFailure = 1,       // anything below does not cover: an I/O error on output, a failed tune or worker
  kExitBadInput = 2,      // flags, kernel, config, shape, target, an unreadable or malformed input file
  kExitCompileError = 3,  // the kernel did not compile with that config
  kExitWrongResult = 4,   // a kernel's output disagreed with the reference
  kExitNotFound = 5,      // the answer is "none": no stored winner, a cache miss, an untuned bundle entry
  kExitRefused = 6,       // the service refused the credentials (HTTP 401 / 403: token unknown, revoked, scope)
  kExitUnreachable = 7,   // the service (or a worker) did not answer where an answer was required
  kExitInterrupted = 130  // Ctrl-C: a tune stopped after the batch in flight (what was measured is stored)
};

// The code for a library error category, and for an error.
int exitCodeFor(ErrorCode c);
int exitCodeFor(const Error& e);
// Prints "tessera: error: <category>: <message>" and exits with exitCodeFor(e).
[[noreturn]] void failWith(const Error& e);

}  // namespace tessera::cli
