// Owns the range dimension of a kernel, the kernel at a point of a range, and the host measurer of
// shape-generic kernels compiled once with the runtime size (range_dims.h).
#include "bundle/range_dims.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <set>

#include "codegen/codegen.h"
#include "ir/builders.h"
#include "ir/families.h"
#include "ir/verifier.h"

namespace tessera::bundle {

struct SizedCompileCache {
  ir::Kernel maxKernel;
  TargetDesc target;
  bool runtimeM = true;  // false: maxKernel's own shape only (a fixed bucket's kernel)
  std::mutex mu;
  std::map<std::string, std::shared_ptr<const codegen::HostExecutable>> built;
  std::map<std::string, Error> failed;
};

namespace {

constexpr double kLongRunUs = 100000, kEnoughUs = 400000;

class SizedExecutable : public measure::Executable {
 public:
  std::shared_ptr<const codegen::HostExecutable> exe;
};

// Builds through the shared cache (one compile per config for every point); runs with the
// point's M as the runtime size.
class SizedBackend : public measure::ExecutionBackend {
 public:
  SizedBackend(std::shared_ptr<SizedCompileCache> c, int64_t m) : cache_(std::move(c)), m_(m) {}

  Expected<std::shared_ptr<const measure::Executable>> build(const ir::Config& c) override {
    const std::string key = c.str();
    auto box = std::make_shared<SizedExecutable>();
    box->config = c;
    {
      std::lock_guard<std::mutex> lock(cache_->mu);
      if (auto it = cache_->failed.find(key); it != cache_->failed.end()) return it->second;
      if (auto it = cache_->built.find(key); it != cache_->built.end()) {
        box->exe = it->second;
        return std::shared_ptr<const measure::Executable>(box);
      }
    }
    auto exe = codegen::compileHost(cache_->maxKernel, c, cache_->target, {.runtime = {.m = cache_->runtimeM}});
    std::lock_guard<std::mutex> lock(cache_->mu);
    if (!exe.ok()) {
      cache_->failed.emplace(key, exe.error());
      return exe.takeError();
    }
    box->compileSeconds = (*exe)->compileSeconds;
    box->exe = std::shared_ptr<const codegen::HostExecutable>(std::move(*exe));
    cache_->built.emplace(key, box->exe);
    return std::shared_ptr<const measure::Executable>(box);
  }

  Expected<std::vector<double>> run(const measure::Executable& e, KernelIO& io, const MeasureOptions& m) override {
    const auto& exe = *static_cast<const SizedExecutable&>(e).exe;
    std::vector<void*> bufs(io.buffers(), io.buffers() + io.count());
    alignas(64) int64_t sizes[codegen::kRuntimeSizeCount] = {m_, 0};
    if (cache_->runtimeM) bufs.push_back(sizes);
    auto raw = exe.raw();
    auto call = [&] { codegen::invokeRaw(raw, bufs.data(), bufs.size()); };
    const double firstUs = wallMicros(call);  // the checked run, and the warm-up
    MeasureOptions timed = m;
    timed.warmup = 0;
    // A run of a tenth of a second or more varies by a few percent between runs, far less than the
    // candidates differ: fewer samples (at least two, or `kEnoughUs` of them) decide as well, and
    // the long points of a range (N = K = 4096 up to M = 8192: seconds a run) stay affordable.
    if (firstUs >= kLongRunUs)
      timed.minRuns = std::max(2, std::min(timed.minRuns, int(std::ceil(kEnoughUs / firstUs))));
    timed.maxRuns = std::min(timed.maxRuns, 4096);
    std::function<void()> flush;
    if (m.flushCache) flush = flushHostCaches;
    return sampleRuns([&] { return wallMicros(call); }, timed, flush);
  }

 private:
  std::shared_ptr<SizedCompileCache> cache_;
  int64_t m_;
};

}  // namespace

Expected<int64_t> rangeExtent(const ir::Kernel& k) {
  if (k.family == ir::Family::Gemm) {
    TESSERA_ASSIGN(ir::GemmInfo g, ir::analyzeGemm(k));
    return g.m;
  }
  if (k.family == ir::Family::Elementwise) {
    TESSERA_ASSIGN(ir::ElementwiseRegion r, ir::analyzeElementwise(k));
    if (r.iter.empty()) return makeError(ErrorCode::InvalidArgument, "a range of rows needs a kernel of rank 1 or more");
    return r.iter[0];
  }
  TESSERA_ASSIGN(ir::AttentionInfo a, ir::analyzeAttention(k));
  // One runtime length serves both: a kernel whose lengths differ has no single sequence dimension.
  if (a.spec.seq_q != a.spec.seq_kv)
    return makeError(ErrorCode::InvalidArgument, "a range of seq moves the query and key lengths together; this kernel's differ (" +
                                                     std::to_string(a.spec.seq_q) + " and " + std::to_string(a.spec.seq_kv) + ")");
  return a.spec.seq_q;
}

const char* rangeDimName(const ir::Kernel& k) {
  switch (k.family) {
    case ir::Family::Elementwise: return "rows";
    case ir::Family::Attention: return "seq";
    case ir::Family::Gemm: break;
  }
  return "M";
}

std::vector<int> rangeKeyDims(const ir::Kernel& k) {
  // measure::hardKeyFor: attention {batch, heads, heads_kv, seq_q, seq_kv, head_dim}; a GEMM with a
  // range of M has no batch dimension (tuneRange refuses one), so M comes first.
  if (k.family == ir::Family::Attention) return {3, 4};
  return {0};
}

Expected<ir::Kernel> kernelAtExtent(const ir::Kernel& top, int64_t v) {
  TESSERA_ASSIGN(int64_t hi, rangeExtent(top));
  ir::Kernel k = top;
  if (top.family == ir::Family::Gemm) {
    // Two-dimensional tensors broadcast against [M, N]: a first dimension of M is M's (B is K x N).
    TESSERA_ASSIGN(ir::GemmInfo g, ir::analyzeGemm(top));
    for (auto& d : k.tensors)
      if (d.name != g.b && d.shape.size() == 2 && d.shape[0] == g.m) d.shape[0] = v;
  } else if (top.family == ir::Family::Elementwise) {
    TESSERA_ASSIGN(ir::ElementwiseRegion r, ir::analyzeElementwise(top));
    std::set<std::string> leading(r.outputs.begin(), r.outputs.end());
    for (const auto& op : r.operands)
      if (!op.dims.empty() && op.dims[0] == 0) leading.insert(op.tensor);
    for (auto& d : k.tensors)
      if ((leading.count(d.name) || d.role == ir::TensorRole::Temp) && d.shape.size() == r.iter.size() && d.shape[0] == hi)
        d.shape[0] = v;
  } else {
    // The lengths are in the stages too (reductions over keys, the causal limit): rebuilt.
    TESSERA_ASSIGN(ir::AttentionInfo a, ir::analyzeAttention(top));
    ir::AttentionSpec s = a.spec;
    s.seq_q = s.seq_kv = v;
    s.name.clear();
    TESSERA_ASSIGN(k, ir::buildAttention(s));
  }
  k.name = top.name + "_" + (top.family == ir::Family::Gemm ? std::string("m") : rangeDimName(top)) + std::to_string(v);
  TESSERA_TRY(ir::verify(k));
  return k;
}

std::shared_ptr<SizedCompileCache> makeSizedCompileCache(const ir::Kernel& maxKernel, const TargetDesc& t, bool runtimeM) {
  auto c = std::make_shared<SizedCompileCache>();
  c->maxKernel = maxKernel;
  c->target = t;
  c->runtimeM = runtimeM;
  return c;
}

std::unique_ptr<measure::Measurer> makeSizedHostMeasurer(const std::shared_ptr<SizedCompileCache>& cache,
                                                         const ir::Kernel& pointKernel,
                                                         const measure::MeasureSettings& s) {
  auto e = rangeExtent(pointKernel);
  const int64_t m = e.ok() ? *e : 0;
  return measure::makeProtocolMeasurer(pointKernel, cache->target, std::make_unique<SizedBackend>(cache, m), s);
}

}  // namespace tessera::bundle
