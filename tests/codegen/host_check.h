// Owns the test helper that compiles a kernel for the host and checks it against the reference.
#pragma once

#include <cstdint>
#include <initializer_list>
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

// The space's default config of `k` on `t` with `overrides` ("knob=value,...") applied; a test
// failure when the space or an override is refused.
ir::Config spaceConfig(const ir::Kernel& k, const TargetDesc& t, const std::string& overrides);

// Runs `exe`, compiled with runtime sizes (CompileOptions::runtime), on seeded inputs of the kernel
// of the actual shape (outputs poisoned first) with `sizes` as its last argument (the rest 0), and
// checks every output against the reference: "" when all match, else the first mismatch.
std::string runWithSizes(const codegen::HostExecutable& exe, const ir::Kernel& actual, uint64_t seed,
                         std::initializer_list<int64_t> sizes);

// The host with two threads whatever its core count (hostTargetWithThreads(2)).
const TargetDesc& twoThreadHost();

}  // namespace tessera::testutil
