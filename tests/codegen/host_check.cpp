// Owns checkHost: default config + overrides -> compile -> run -> compare with the reference.
#include "host_check.h"

#include "codegen/codegen.h"
#include "ir/reference.h"
#include "search/space.h"

namespace tessera::testutil {

CheckResult runAndCompare(const ir::Kernel& k, const codegen::HostExecutable& exe, const ir::Config& cfg, uint64_t seed) {
  CheckResult r;
  r.compiled = true;
  auto ins = ir::makeInputs(k, seed);
  auto outs = ir::makeOutputs(k);
  for (auto& o : outs) o.fill(12345.0);  // stale output values must not pass
  std::vector<void*> bufs;
  std::vector<const ir::Buffer*> inPtrs, outPtrs;
  for (auto& b : ins) { bufs.push_back(b.data()); inPtrs.push_back(&b); }
  for (auto& b : outs) { bufs.push_back(b.data()); outPtrs.push_back(&b); }
  exe.run(bufs.data());
  auto ref = ir::evaluateReference(k, inPtrs);
  if (!ref.ok()) { r.error = ref.error().str(); return r; }
  auto cmp = ir::compareOutputs(k, *ref, outPtrs);
  r.correct = cmp.ok;
  r.maxRelErr = cmp.maxRelErr;
  if (!cmp.ok) r.error = cmp.firstBad + " (max rel err " + std::to_string(cmp.maxRelErr) + ") [config " + cfg.str() + "]";
  return r;
}

CheckResult checkHost(const ir::Kernel& k, const ir::Config& overrides, uint64_t seed) {
  CheckResult r;
  const TargetDesc& host = hostTarget();
  auto space = search::makeSpace(k, host);
  if (!space.ok()) { r.error = space.error().str(); return r; }
  auto cfg = space->complete(overrides);
  if (!cfg.ok()) { r.error = cfg.error().str(); return r; }
  auto exe = codegen::compileHost(k, *cfg, host);
  if (!exe.ok()) { r.error = exe.error().str() + " [config " + cfg->str() + "]"; return r; }
  return runAndCompare(k, **exe, *cfg, seed);
}

}  // namespace tessera::testutil
