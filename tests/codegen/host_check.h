// Owns the test helper that compiles a kernel for the host and checks it against the reference.
#pragma once

#include <string>

#include "ir/ir.h"
#include "codegen/codegen.h"
#include "ir/schedule.h"

namespace tessera::testutil {

struct CheckResult {
  bool compiled = false, correct = false;
  std::string error;   // compile error or first mismatch
  double maxRelErr = 0;
};

// Runs a compiled kernel once on seeded inputs (outputs poisoned first) and compares every
// output with the reference evaluator; shared by the host and the GPU-emulation checks.
CheckResult runAndCompare(const ir::Kernel& k, const codegen::HostExecutable& exe, const ir::Config& cfg, uint64_t seed);

// Compiles `k` with `overrides` on top of the default config (seeded inputs), runs it once and
// compares every output with the reference evaluator.
CheckResult checkHost(const ir::Kernel& k, const ir::Config& overrides = {}, uint64_t seed = 1);
// The same on the host as `t` describes it (e.g. hostTargetWithThreads(2): the space offers THREADS
// up to 2 whatever the core count).
// `cpu` (an LLVM CPU name, "" = this one) compiles for another x86 CPU that this one can run:
// e.g. "x86-64-v3" with hostTargetAs("x86-64-v3") is an AVX2-only machine on any host.
CheckResult checkHostOn(const TargetDesc& t, const ir::Kernel& k, const ir::Config& overrides = {}, uint64_t seed = 1,
                        const std::string& cpu = "");

}  // namespace tessera::testutil
