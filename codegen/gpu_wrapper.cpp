// Owns the host-wrapper steps of GPU launches (padding and transposing GEMM operands into zeroed
// copies, copying the valid part of a workspace back) and the launch description printed by the
// CLI. MLIR-free: the emulation and the CUDA/HIP runners share it.
#include <algorithm>
#include <cstring>

#include "codegen/gpu.h"

namespace tessera::codegen {

namespace wrapper {

size_t argBytes(const GpuArg& a) { return size_t(a.elements()) * size_t(ir::byteSize(a.dtype)); }

void pack(const GpuArg& a, const void* src, void* dst) {
  const size_t es = size_t(ir::byteSize(a.dtype));
  std::memset(dst, 0, argBytes(a));
  for (int64_t b = 0; b < std::max<int64_t>(a.packBatches, 1); ++b) {
    auto* d = static_cast<char*>(dst) + size_t(b * a.prows * a.pcols) * es;
    const auto* s = static_cast<const char*>(src) + size_t(b * a.rows * a.cols) * es;
    if (!a.transposed) {
      for (int64_t r = 0; r < a.rows; ++r) std::memcpy(d + size_t(r * a.pcols) * es, s + size_t(r * a.cols) * es, size_t(a.cols) * es);
      continue;
    }
    for (int64_t r = 0; r < a.rows; ++r)
      for (int64_t c = 0; c < a.cols; ++c) std::memcpy(d + size_t(r * a.pcols + c) * es, s + size_t(c * a.rows + r) * es, es);
  }
}

void copyBack(const GpuArg& a, const void* workspace, void* user) {
  const size_t es = size_t(ir::byteSize(a.dtype));
  for (int64_t r = 0; r < a.rows; ++r)
    std::memcpy(static_cast<char*>(user) + size_t(r * a.cols) * es,
                static_cast<const char*>(workspace) + size_t(r * a.pcols) * es, size_t(a.cols) * es);
}

}  // namespace wrapper

Expected<GpuLaunch> launchAtSizes(const GpuLaunch& l, const int64_t* sizes) {
  const GpuLaunch::Runtime& rt = l.runtime;
  if (!rt.m && !rt.batch) return l;
  if (!sizes) return makeError(ErrorCode::InvalidArgument, "a shape-generic kernel needs its runtime sizes (int64_t sizes[" + std::to_string(kRuntimeSizeCount) + "])");
  GpuLaunch s = l;
  if (rt.m) {
    const int64_t m = sizes[0];
    if (m < 1 || m > rt.maxM)
      return makeError(ErrorCode::InvalidArgument, "runtime " + rt.dim + "=" + std::to_string(m) + " is outside 1.." + std::to_string(rt.maxM) + ", the range this kernel was compiled for");
    auto& g = s.grid[size_t(rt.rowAxis)];
    g = std::min(g, (m * rt.unitsPerRow + rt.rowsPerBlock - 1) / rt.rowsPerBlock);
    for (GpuArg& a : s.args)
      if (a.rowsFollowM) a.rows = m;
  }
  if (rt.batch) {
    const int64_t b = sizes[1];
    if (b < 1 || b > rt.maxBatch)
      return makeError(ErrorCode::InvalidArgument, "runtime batch=" + std::to_string(b) + " is outside 1.." + std::to_string(rt.maxBatch) + ", the range this kernel was compiled for");
    if (rt.batchInGrid) s.grid[2] = b;
    else s.batches = b;
    for (GpuArg& a : s.args)
      if (a.packBatches == rt.maxBatch && rt.maxBatch > 1) a.packBatches = b;
  }
  return s;
}

size_t userBytesAt(const GpuLaunch& l, int tensor, const ir::TensorDecl& d, const int64_t* sizes) {
  const GpuLaunch::Runtime& rt = l.runtime;
  auto has = [&](const std::vector<int>& v) { return std::find(v.begin(), v.end(), tensor) != v.end(); };
  const size_t bytes = size_t(d.numel()) * size_t(ir::byteSize(d.dtype));
  if (!sizes || d.shape.empty() || d.shape[0] <= 0) return bytes;
  size_t n = bytes;
  if (rt.m && has(rt.mTensors) && size_t(rt.mDim) < d.shape.size() && d.shape[size_t(rt.mDim)] > 0)
    n = n / size_t(d.shape[size_t(rt.mDim)]) * size_t(sizes[0]);
  if (rt.batch && has(rt.batchTensors)) n = n / size_t(d.shape[0]) * size_t(sizes[1]);
  return n;
}

void GpuLaunch::addUserArgs(int tensors, bool sizes) {
  for (int i = 0; i < tensors; ++i) {
    GpuArg a;
    a.tensor = i;
    args.push_back(a);
  }
  if (sizes) {
    GpuArg sz;
    sz.kind = GpuArg::Kind::Sizes;
    sz.dtype = ir::ScalarType::Index;
    args.push_back(sz);
  }
}

std::string GpuLaunch::str() const {
  auto dims = [](const std::array<int64_t, 3>& d) {
    return std::to_string(d[0]) + "x" + std::to_string(d[1]) + "x" + std::to_string(d[2]);
  };
  std::string s = "kernel " + kernel + ": grid " + dims(grid) + ", block " + dims(block) + ", " +
                  std::to_string(batches) + (batches == 1 ? " launch" : " launches (one per batch)");
  if (dynamicSharedBytes) s += ", " + std::to_string(dynamicSharedBytes) + " B dynamic shared memory";
  if (runtime.m)
    s += ", runtime " + runtime.dim + " 1.." + std::to_string(runtime.maxM) + " (grid." + std::string(1, "xyz"[runtime.rowAxis]) +
         " = ceil(" + runtime.dim +
         (runtime.unitsPerRow != 1 ? "*" + std::to_string(runtime.unitsPerRow) : std::string()) + "/" +
         std::to_string(runtime.rowsPerBlock) + "))";
  if (runtime.batch) s += ", runtime batch 1.." + std::to_string(runtime.maxBatch) + (runtime.batchInGrid ? " (grid.z)" : " (launches)");
  int i = 0;
  for (const auto& a : args) {
    s += i++ ? "; " : "; args: ";
    switch (a.kind) {
      case GpuArg::Kind::Tensor: s += "buffer " + std::to_string(a.tensor) + (a.zeroFirst ? " (zeroed)" : ""); break;
      case GpuArg::Kind::Packed:
        s += "buffer " + std::to_string(a.tensor) + " padded to " + std::to_string(a.prows) + "x" + std::to_string(a.pcols) +
             (a.packBatches > 1 ? " x" + std::to_string(a.packBatches) : "") + (a.transposed ? " (transposed)" : "");
        break;
      case GpuArg::Kind::Workspace:
        s += "f32 workspace " + std::to_string(a.prows) + "x" + std::to_string(a.pcols) +
             (a.packBatches > 1 ? " x" + std::to_string(a.packBatches) : "") +
             (a.copyBack ? " -> buffer " + std::to_string(a.tensor) : "");
        break;
      case GpuArg::Kind::Sizes: s += "runtime sizes (int64 x" + std::to_string(kRuntimeSizeCount) + ")"; break;
      case GpuArg::Kind::TensorMap: {
        const TensorMapSpec& m = a.tensorMap;
        s += "tensor map of arg " + std::to_string(m.of) + " (box";
        for (int d = 0; d < m.rank; ++d) s += (d ? "x" : " ") + std::to_string(m.box[size_t(d)]);
        s += ", " + std::to_string(m.swizzleBytes) + "B swizzle)";
        break;
      }
    }
  }
  return s;
}

}  // namespace tessera::codegen
