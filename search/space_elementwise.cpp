// Owns the host elementwise space: vector lanes VW and vectors per step UNROLL along the
// innermost dimension (tails are masked, so any shape is legal), and non-temporal stores.
#include <algorithm>
#include <functional>

#include "ir/families.h"
#include "search/space.h"

namespace tessera::search {

Expected<ir::Space> elementwiseHostSpace(const ir::Kernel& k, const TargetDesc& t) {
  TESSERA_ASSIGN(ir::ElementwiseRegion r, ir::analyzeElementwise(k));
  int64_t inner = r.iter.back();
  int64_t lanes = std::max(4, t.simdBits / 32);
  double outBytes = 0;
  for (const auto* o : k.outputs()) outBytes += double(o->numel() * ir::byteSize(o->dtype));
  // Column blocks only matter for rank >= 2 with rows longer than a block.
  std::vector<ir::KnobValue> chunkDom = {int64_t(0)};
  if (r.iter.size() >= 2)
    for (int64_t c : {256, 512, 1024, 2048})
      if (c < inner) chunkDom.push_back(c);
  // Measured (4096x4096, y = x * s + b): whole rows 18 GB/s, 1024-column blocks 27 GB/s — s and
  // b rows of 16 KB each evict each other from a 32 KB L1 otherwise.
  bool rowBroadcast = false;
  for (const auto& op : r.operands)
    if (r.iter.size() >= 2 && (op.dims.size() < r.iter.size() || op.dims[0] < 0)) rowBroadcast = true;
  // Heavy kernels (transcendentals) need more vectors in flight before blocks and streaming
  // stores pay off: bias+GELU 4096x4096 ran at 14.6 GB/s on whole rows, 7-12 GB/s in column
  // blocks of 4x16 lanes, 20.5 GB/s in fully unrolled 256-column blocks (below); 1-D GELU ran
  // at 15 GB/s with streaming stores and 25 without.
  std::function<bool(const ir::ExprRef&)> heavy = [&](const ir::ExprRef& e) {
    if (ir::isUnaryValueOp(e->op) && e->op != ir::Op::Neg && e->op != ir::Op::Abs && e->op != ir::Op::Relu) return true;
    if (e->op == ir::Op::Div) return true;
    for (const auto& a : e->args)
      if (heavy(a)) return true;
    return false;
  };
  // erf, tanh and log expand into long polynomials (MLIR's approximations): unrolled 8 wide they
  // run out of registers (gelu_erf: 12.8 -> 8.9 GB/s), so they keep whole rows.
  std::function<bool(const ir::ExprRef&)> bigApprox = [&](const ir::ExprRef& e) {
    if (e->op == ir::Op::Erf || e->op == ir::Op::GeluErf || e->op == ir::Op::Tanh || e->op == ir::Op::Log) return true;
    for (const auto& a : e->args)
      if (bigApprox(a)) return true;
    return false;
  };
  bool cheap = true, big = false;
  for (const auto& v : r.values) {
    cheap = cheap && !heavy(v);
    big = big || bigApprox(v);
  }
  int64_t chunkDef = 0;
  if (rowBroadcast && !big)
    for (const auto& v : chunkDom)
      if (std::get<int64_t>(v) <= 256) chunkDef = std::get<int64_t>(v);
  bool ntDef = cheap && outBytes > t.l3Bytes / 2;
  // Rows per tile only matter when some operand is broadcast along the rows: its loads are then
  // shared by the tile's rows (measured, y = x * s + b 4096x4096 on a Zen 4 VM without AVX-512:
  // 12.4-12.8 GB/s with one row per tile, 20-26 GB/s with four; s and b are 16 KB rows each and
  // with one row per tile their loads compete with the x stream for L1). A partial last row tile
  // is peeled off by the schedule, so any row count takes any ROWS up to it.
  std::vector<ir::KnobValue> rowsDom = {int64_t(1)};
  if (rowBroadcast)
    for (int64_t rows : {2, 4})
      if (rows <= r.iter[r.iter.size() - 2]) rowsDom.push_back(rows);
  ir::Space s;
  s.family = "elementwise";
  std::vector<ir::KnobValue> vw = clampDomain({4, 8, 16, 32}, inner);
  std::vector<ir::KnobValue> un = {int64_t(1), int64_t(2), int64_t(4), int64_t(8)};
  int64_t nativeVw = 4;  // the widest offered width that fits one register
  for (const auto& v : vw)
    if (std::get<int64_t>(v) <= lanes) nativeVw = std::get<int64_t>(v);
  int64_t vwDef = nativeVw;
  int64_t unDef = 1;
  while (unDef < 4 && vwDef * unDef * 2 <= std::max<int64_t>(inner, vwDef)) unDef *= 2;
  // Heavy kernels with a row-broadcast operand: the exhaustive table of bias+GELU 4096x4096
  // (bench/data/host_bias_gelu_4096x4096) has one config within 5% of the best, 256-column
  // blocks fully unrolled (VW=2x lanes, 8 vectors) with streaming stores: 20.5 GB/s, 1.95x
  // the previous default. With whole rows and fewer vectors in flight heavy kernels stall.
  // VW=32 whatever the ISA: on AVX2 (8 lanes) that config is 1.00 and 0.89 of the best in the
  // 2048x8192 and 4096x4096 tables recorded on an x86-64-v3 VM, where 2x lanes (VW=16) would
  // need 16 vectors per step and the old fallback (VW=8, UNROLL=4, no streaming) ran at 0.46-0.53.
  if (rowBroadcast && !cheap && chunkDef == 256) {
    int64_t wide = std::min<int64_t>(32, std::get<int64_t>(vw.back()));
    if (256 % wide == 0 && 256 / wide <= 8) {
      vwDef = wide;
      unDef = 256 / wide;
      ntDef = true;
    }
  }
  // Several rows per tile share each load of the row-broadcast operands, which does what the
  // column blocks did without walking the matrix in 4 KB pieces: on a Zen 4 VM without AVX-512,
  // 4096x4096, y = x * s + b ran 12.7-22.7 ms with the block default above and 5.0-5.2 ms with
  // four rows and whole rows (tuned: 4.3); bias+GELU 12.1-15.4 ms against 9.7-11.1 ms with four
  // rows of two vectors of native width each (wider tiles spill AVX2's 16 registers).
  // AVX-512 too, since ROWS was measured there (Zen 4 VM with AVX-512, 4096x4096, one thread,
  // elementwise_bench --config, same run): x * s + b 1.09x -> 1.56x of memcpy, bias+GELU 0.77x ->
  // 0.87x, and in bf16 x * s + b 0.70x -> 1.00x (256-column blocks read rows of bf16 in 512-byte
  // pieces). The 2048x8192 AVX-512 table in bench/data predates ROWS (its best were the blocks).
  int64_t rowsDef = std::get<int64_t>(rowsDom.back());
  if (rowsDef > 1) {
    chunkDef = 0;
    ntDef = outBytes > t.l3Bytes / 2;  // streaming stores only for outputs the caches cannot keep
    if (!cheap) {
      vwDef = nativeVw;
      unDef = 2;
    }
  }
  s.knobs = {
      {"VW", vw, vwDef, "vector lanes per operation"},
      {"UNROLL", un, unDef, "vectors per loop step (tile = VW*UNROLL elements)"},
      {"CHUNK", chunkDom, chunkDef, "column block walked by all rows before the next (0: whole rows)"},
      {"NT", {int64_t(0), int64_t(1)}, int64_t(ntDef ? 1 : 0),
       "non-temporal stores: outputs stream past the caches (no read-for-ownership)"},
      {"ROWS", rowsDom, rowsDef, "rows per tile, sharing each load of a row-broadcast operand"},
  };
  // Cheaper approximations where the expression has something they change: sigmoid, SiLU, GELU
  // (2^t and a division), erf/gelu_erf (the rational), tanh, division. The precise forms stay the
  // default; the reference check decides per candidate whether the fast ones pass.
  std::function<bool(const ir::ExprRef&)> approximated = [&](const ir::ExprRef& e) {
    using ir::Op;
    if (e->op == Op::Sigmoid || e->op == Op::Silu || e->op == Op::Gelu || e->op == Op::GeluErf || e->op == Op::Erf ||
        e->op == Op::Tanh || e->op == Op::Div)
      return true;
    for (const auto& a : e->args)
      if (approximated(a)) return true;
    return false;
  };
  bool mathKnob = false;
  for (const auto& v : r.values) mathKnob = mathKnob || approximated(v);
  if (mathKnob)
    s.knobs.push_back({"MATH", {std::string("precise"), std::string("fast")}, std::string("precise"),
                       "precise: the default approximations; fast: degree-3 2^f, shorter rationals for erf and tanh, "
                       "divisions by a refined reciprocal estimate (checked against the reference like any candidate)"});
  // Threads share the outermost loop of the tiled kernel (rows, or column blocks with CHUNK).
  std::vector<ir::KnobValue> threadDom = hostThreadDomain(t);
  if (threadDom.size() > 1) {
    double bytes = outBytes;
    for (const auto* in : k.inputs()) bytes += double(in->numel() * ir::byteSize(in->dtype));
    s.knobs.push_back({"THREADS", threadDom, defaultThreads(t, bytes, kBytesPerThread),
                       "threads sharing the outermost loop"});
  }
  s.constraint = [inner](const ir::Config& c) -> std::optional<std::string> {
    int64_t tile = std::get<int64_t>(c.values.at("VW")) * std::get<int64_t>(c.values.at("UNROLL"));
    // A tile more than twice the row only adds masked-off lanes.
    if (tile > 2 * std::max<int64_t>(inner, 32)) return "VW*UNROLL=" + std::to_string(tile) + " exceeds twice the innermost dimension";
    return std::nullopt;
  };
  return s;
}

}  // namespace tessera::search
