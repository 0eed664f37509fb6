// Owns checkHost: default config + overrides -> compile -> run -> compare with the reference.
#include "host_check.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "codegen/codegen.h"
#include "ir/reference.h"
#include "search/space.h"
#include "targets/kernel_io.h"

namespace tessera::testutil {

CheckResult runAndCompare(const ir::Kernel& k, const codegen::HostExecutable& exe, const ir::Config& cfg, uint64_t seed) {
  CheckResult r;
  r.compiled = true;
  KernelIO io(k, seed);
  io.poisonOutputs();  // stale output values must not pass
  exe.run(io.buffers());
  auto cmp = io.check();
  if (!cmp.ok()) { r.error = cmp.error().str(); return r; }
  r.correct = cmp->ok;
  r.maxRelErr = cmp->maxRelErr;
  if (!cmp->ok) r.error = cmp->firstBad + " (max rel err " + std::to_string(cmp->maxRelErr) + ") [config " + cfg.str() + "]";
  return r;
}

CheckResult checkHost(const ir::Kernel& k, const ir::Config& overrides, uint64_t seed) {
  return checkHostOn(hostTarget(), k, overrides, seed);
}

CheckResult checkHostOn(const TargetDesc& host, const ir::Kernel& k, const ir::Config& overrides, uint64_t seed,
                        const std::string& cpu) {
  CheckResult r;
  auto space = search::makeSpace(k, host);
  if (!space.ok()) { r.error = space.error().str(); return r; }
  auto cfg = space->complete(overrides);
  if (!cfg.ok()) { r.error = cfg.error().str(); return r; }
  auto exe = codegen::compileHost(k, *cfg, host, {.cpu = cpu});
  if (!exe.ok()) { r.error = exe.error().str() + " [config " + cfg->str() + "]"; return r; }
  return runAndCompare(k, **exe, *cfg, seed);
}

ir::Config spaceConfig(const ir::Kernel& k, const TargetDesc& t, const std::string& overrides) {
  auto space = search::makeSpace(k, t);
  EXPECT_TRUE(space.ok()) << space.error().str();
  auto c = space->complete(*ir::Config::parseAssignments(overrides));
  EXPECT_TRUE(c.ok()) << c.error().str();
  return *c;
}

std::string runWithSizes(const codegen::HostExecutable& exe, const ir::Kernel& actual, uint64_t seed,
                         std::initializer_list<int64_t> sizes) {
  KernelIO io(actual, seed);
  io.poisonOutputs();
  std::vector<void*> bufs(io.buffers(), io.buffers() + io.count());
  alignas(64) int64_t given[codegen::kRuntimeSizeCount] = {};
  std::copy_n(sizes.begin(), std::min<size_t>(sizes.size(), codegen::kRuntimeSizeCount), given);
  bufs.push_back(given);
  exe.run(bufs.data());
  auto cmp = io.check();
  if (!cmp.ok()) return cmp.error().str();
  return cmp->ok ? "" : cmp->firstBad;
}

const TargetDesc& twoThreadHost() {
  static TargetDesc t = *hostTargetWithThreads(2);
  return t;
}

}  // namespace tessera::testutil
