// Owns the MLIR-free interface of the GPU code generator (ARCHITECTURE.md §2.5): (kernel, config, target)
// -> PTX + cubin or GCN assembly + hsaco with a resource report, and the emulated form — the
// target-independent pre-mapping IR of the same strategy, run on the CPU — as a HostExecutable.
//
// Every GPU kernel is described by a GpuProgram: the device function plus a small host wrapper
// (padding / transposition of GEMM operands into zeroed workspaces, a batch loop, copy-back).
// The emulated executable and the CUDA/HIP runners execute the same wrapper, so the kernel the CPU
// checks is the kernel the GPU runs.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "codegen/codegen.h"
#include "ir/dtype.h"
#include "ir/ir.h"
#include "ir/schedule.h"
#include "support/status.h"
#include "targets/target_desc.h"

namespace tessera::codegen {

// What ptxas -v (NVIDIA) or the AMDGPU backend's kernel metadata (AMD) report, plus the
// theoretical occupancy derived from it and the TargetDesc.
struct ResourceReport {
  Vendor vendor = Vendor::Host;
  std::string target;
  int64_t threadsPerBlock = 0;
  // NVIDIA (ptxas -v)
  int registers = 0;             // per thread
  int64_t sharedBytes = 0;       // static shared memory per block (LDS on AMD)
  int64_t dynamicSharedBytes = 0;  // dynamic shared memory per block (the launch's)
  int64_t spillStoreBytes = 0, spillLoadBytes = 0;
  int64_t localBytes = 0;        // stack frame / local memory per thread
  // ptxas's wgmma performance notes: warpgroup.arrive it injected before a wgmma whose registers
  // were written since the last wgmma.fence (C7519: that wgmma waits for the ones before it), and
  // whether it serialised the kernel's wgmmas altogether.
  int wgmmaArrivesInjected = 0;
  bool wgmmaSerialized = false;
  // AMD (amdhsa metadata)
  int vgprs = 0, sgprs = 0, agprs = 0;
  int64_t scratchBytes = 0;      // private segment per work-item
  int vgprSpills = 0, sgprSpills = 0;
  // Theoretical occupancy
  int blocksPerUnit = 0;         // resident blocks per SM / CU
  int wavesPerUnit = 0;          // resident warps / wavefronts per SM / CU
  double occupancy = 0;          // wavesPerUnit / the unit's maximum
  std::string limiter;           // what bounds blocksPerUnit: "registers", "shared memory", ...
  // Within the TargetDesc limits and without spills. `problems` says why not.
  bool ok = true;
  std::vector<std::string> problems;
  bool spills() const { return spillStoreBytes + spillLoadBytes + vgprSpills + sgprSpills > 0; }
  std::string summary() const;  // one line: "regs 102, smem 48 KB, spills 0 B, occupancy 25% (registers)"
};

// A tiled TMA tensor map (sm_90's CUtensorMap) over another launch argument: what the host encodes
// (cuTensorMapEncodeTiled on a device, the emulator's own form on the emulated one) once that
// argument's device address is known, and passes by pointer to a 128-byte copy in device memory.
struct TensorMapSpec {
  int of = -1;                      // the launch argument (GpuLaunch::args index) it describes
  int rank = 2;                     // 2..3 dimensions, innermost first
  std::array<int64_t, 3> dims{};    // elements per dimension (the tensor's extents; outside: zero fill)
  std::array<int64_t, 2> strides{}; // bytes between consecutive indices of dims 1 and 2
  std::array<int64_t, 3> box{};     // elements of one copy per dimension (the shared-memory tile)
  int swizzleBytes = 128;           // 0 (none), 32, 64 or 128: the shared-memory swizzle span
};

// One argument of the device kernel and how the host wrapper produces it from the user's
// buffers (kernel inputs then outputs, HostExecutable order).
struct GpuArg {
  enum class Kind {
    Tensor,     // the user buffer itself (offset by the batch index when batched)
    Packed,     // a zeroed [prows x pcols] copy of a (possibly transposed) [rows x cols] matrix
    Workspace,  // zero-initialized scratch; with copyBack, its valid part is copied to `tensor`
    TensorMap,  // a tensor map over argument `tensorMap.of`, encoded per launch (128 bytes)
    Sizes,      // int64_t[kRuntimeSizeCount]: the runtime sizes (codegen.h RuntimeDims), uploaded per launch
  };
  Kind kind = Kind::Tensor;
  int tensor = -1;                  // index in the user buffer list
  ir::ScalarType dtype = ir::ScalarType::F32;  // element type of this argument
  int64_t batchStride = 0;          // elements of the user buffer per batch step (0: same for all)
  int64_t rows = 0, cols = 0;       // Packed / Workspace: logical matrix
  int64_t prows = 0, pcols = 0;     // padded extents of the argument
  bool transposed = false;          // Packed: the user buffer is stored [cols][rows]
  bool copyBack = false;            // Workspace: copy [rows x cols] of it into `tensor` after the run
  bool zeroFirst = false;           // Tensor: zero its [rows x cols] batch slice before the launch
  // Packed / Workspace: consecutive [prows x pcols] slices, one per batch (a kernel that runs every
  // batch in one launch); Packed copies slice b from the user's b-th [rows x cols] matrix.
  int64_t packBatches = 1;
  TensorMapSpec tensorMap;          // TensorMap
  // Runtime M (GpuLaunch::runtime): Packed / Workspace rows, and a zeroFirst Tensor's, are the
  // runtime M (prows stays the upper bound's: the allocation and the kernel's strides).
  bool rowsFollowM = false;
  int64_t elements() const {
    if (kind == Kind::Sizes) return kRuntimeSizeCount;
    return kind == Kind::Tensor ? 0 : kind == Kind::TensorMap ? 128 / ir::byteSize(dtype) : prows * pcols * packBatches;
  }
};

struct GpuLaunch {
  std::string kernel;               // symbol in the binary
  std::array<int64_t, 3> grid{1, 1, 1}, block{1, 1, 1};
  int64_t batches = 1;              // host loop: one launch per batch index
  // Dynamic shared memory / LDS per block (gpu.launch's dynamic_shared_memory_size): what the
  // kernel's gpu.dynamic_shared_memory views; the runners pass it (and, past 48 KB on NVIDIA,
  // raise the function's limit first).
  int64_t dynamicSharedBytes = 0;
  std::vector<GpuArg> args;         // the device function's arguments (what the emulation calls)
  // Parameters of the outlined GPU kernel, as indices into `args`: one bare device pointer each
  // (use-bare-ptr-memref-call-conv). Only the arguments the kernel body uses appear.
  std::vector<int> kernelParams;
  // Shape-generic kernels (codegen.h RuntimeDims): the launch as compiled is the one at the upper
  // bounds; launchAtSizes specializes it to runtime sizes (grid, wrapper rows, batch count).
  struct Runtime {
    bool m = false, batch = false;
    int64_t maxM = 0, maxBatch = 0;
    // grid[rowAxis] = min(ceil(M * unitsPerRow / rowsPerBlock), its compiled extent): GEMM's row
    // blocks are grid.y (one unit a row), attention's query blocks grid.x, elementwise's blocks of
    // TPB*EPT vectors grid.x (unitsPerRow = vectors a row; a grid-stride kernel keeps its cap).
    int64_t rowsPerBlock = 0;
    int rowAxis = 1;
    int64_t unitsPerRow = 1;
    bool batchInGrid = false;     // batches run as grid.z (else one launch per batch)
    std::vector<int> mTensors;    // user tensors with an M dimension (at mDim): M of it at run time
    int mDim = 0;                 // where M is in their shapes (GEMM, elementwise: 0; attention's seq: 2)
    std::string dim = "M";        // the size's name in messages: "M", "rows", "seq"
    std::vector<int> batchTensors;  // user tensors whose outermost dimension is the batch
  } runtime;
  std::string str() const;          // "grid 8x8x1, block 256x1x1, 1 launch, args: A packed 1024x1024 ..."
  // The user tensors 0..tensors-1 as arguments, as they are, then the runtime sizes when the
  // kernel takes them (the argument list of the kernels that need no packing or workspace).
  void addUserArgs(int tensors, bool sizes);
};

// The host-wrapper steps shared by the emulation and the device runners.
namespace wrapper {
// Zeroed [prows x pcols] copy of the [rows x cols] matrix at `src` (stored [cols][rows] when
// transposed); element size from a.dtype.
void pack(const GpuArg& a, const void* src, void* dst);
// The valid [rows x cols] part of a padded workspace into the user's row-major buffer.
void copyBack(const GpuArg& a, const void* workspace, void* user);
size_t argBytes(const GpuArg& a);  // Packed / Workspace allocation size
}  // namespace wrapper

enum class GpuEmit {
  Payload,   // the strategy's input module (linalg on tensors, or the OpBuilder kernel)
  Schedule,  // the transform module with @pre / @map (empty for OpBuilder kernels)
  Pre,       // the pre-mapping IR: what the CPU emulation runs
  Mapped,    // after @map: gpu.launch form (tensor-core rewrites applied)
  Device,    // the gpu.module at the NVVM / ROCDL cut point: what the mapped-kernel emulator runs
  Asm,       // PTX (NVIDIA) or GCN assembly (AMD)
  Binary,    // cubin (NVIDIA) or hsaco code object (AMD)
};
// "payload", "schedule", "pre", "mlir", "nvvm"/"rocdl", "ptx"/"asm", "cubin"/"hsaco".
Expected<GpuEmit> parseGpuEmit(const std::string& s, Vendor v);
const char* gpuEmitName(GpuEmit e, Vendor v);

struct GpuBinary {
  std::string target;               // "sm_90", "gfx942"
  std::string mlirPre, mlirMapped;  // pre-mapping and mapped IR
  std::string mlirDevice;           // the gpu.module at the NVVM / ROCDL cut point (GpuObjects::deviceIr)
  std::string assembly;             // PTX text or GCN assembly
  std::string binary;               // cubin or hsaco bytes
  GpuLaunch launch;
  ResourceReport resources;
  std::string strategy;             // "simt", "mma.sync", "mfma", "flash-simt", "elementwise"
  double compileSeconds = 0;
};

// The launch of a shape-generic kernel at runtime sizes `sizes` (int64_t[kRuntimeSizeCount], the
// host's convention): grid rows and batches, wrapper rows; sizes outside 1..the compiled bound are
// refused in one line. A launch without runtime dimensions comes back as it is.
Expected<GpuLaunch> launchAtSizes(const GpuLaunch& l, const int64_t* sizes);
// Bytes of user tensor `tensor` (declared as `d`, at the compiled shape or at the runtime one:
// M or the batch is its outermost dimension) at runtime sizes `sizes` (null: as declared).
size_t userBytesAt(const GpuLaunch& l, int tensor, const ir::TensorDecl& d, const int64_t* sizes);

struct GpuCompileOptions {
  bool wantBinary = true;           // run ptxas (cubin) / the AMD linker (hsaco)
  // Dimensions taken at run time (GEMM: M, or the batch count; strategies simt, mma, mma-lane):
  // the kernel takes the sizes argument and its launch carries GpuLaunch::Runtime.
  RuntimeDims runtime;
  // The mma.sync GEMM's XOR swizzle of its shared tiles; off only to measure what it removes
  // (the bank-conflict comparison of bench/gpu_emulator_bench.cpp).
  bool sharedSwizzle = true;
};

// Lowers (kernel, config) for a GPU target: strategy -> @pre -> @map -> NVVM/ROCDL -> PTX + cubin
// or assembly + hsaco, then reads the resources. Illegal configs are InvalidConfig errors before
// anything is compiled; a config that compiles but spills or exceeds a TargetDesc limit comes back
// with resources.ok = false (the search rejects it).
Expected<GpuBinary> compileGpu(const ir::Kernel& k, const ir::Config& c, const TargetDesc& t,
                               const GpuCompileOptions& o = {});

// Text (or bytes for Binary) of one stage.
Expected<std::string> emitGpu(const ir::Kernel& k, const ir::Config& c, const TargetDesc& t, GpuEmit e);

struct EmulateOptions {
  // Also apply @map and lower to the target's assembly (no binary), so IR that emulates but
  // cannot be mapped is an error here (mlir-recipes/emulation REPORT §1.3).
  bool checkMapping = true;
  // LLVM optimization level of the emulation JIT (0-3). Warp tiles are fully unrolled vector
  // code: at O3 one 64x32x32 tile takes ~10 s to compile, at O0 ~1 s; results are the same.
  int optLevel = 0;
  // Fault injection for negative controls: rewrites the pre-mapping IR text before the CPU
  // clone is made (tests use it to show that a broken tile copy is caught).
  std::function<std::string(const std::string&)> preHook;
  // Runtime sizes (see GpuCompileOptions::runtime): the executable then takes one more pointer
  // after the tensors, to int64_t sizes[kRuntimeSizeCount], as host kernels do.
  RuntimeDims runtime;
};

// The pre-mapping IR of the GPU strategy for `t`, with GPU address spaces stripped and workgroup
// buffers filled with NaN, JIT-compiled for this CPU behind the same host wrapper as the GPU
// binary. Same calling convention as compileHost.
// Covered: tiling and grid/block decomposition, every workgroup tile element written before it is
// read (NaN fill), copy distribution, masking / padding / clamping of partial tiles, the warp-level
// contraction in f32 accumulation, online softmax and its state across key blocks, epilogues,
// the host wrapper. Not covered (checked by @map + ptxas / the AMDGPU backend + resources
// instead): barriers and races, cp.async groups and pipelining, mma.sync / MFMA fragment layouts
// and ldmatrix, alignment, hardware limits, the exact numerics of tensor cores and FMA contraction.
Expected<std::unique_ptr<HostExecutable>> compileEmulated(const ir::Kernel& k, const ir::Config& c,
                                                          const TargetDesc& t, const EmulateOptions& o = {});

// The strategy's own legality rules for (kernel, config) on `t`, without building any IR: the GPU
// spaces use it in their constraint, so the space and the code generator cannot disagree.
Status checkGpuConfig(const ir::Kernel& k, const ir::Config& c, const TargetDesc& t);

// Fills occupancy and limit checks of `r` from the target (used by compileGpu; exposed for tests).
void finishResourceReport(ResourceReport& r, const TargetDesc& t);

}  // namespace tessera::codegen
