// Owns the C source of a bundle's kernel table (tessera_bundle_table.c, read by the runtime in
// runtime/): one `struct tessera_kernel` per compiled kernel, with its tensors, the trampoline that
// calls a host object's entry point from a buffer array, and for GPU kernels the launch (grid,
// block, batches, the host wrapper's arguments) and the code object bytes
// (tessera_bundle_images.c).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "codegen/gpu.h"

namespace tessera::bundle {

struct TableTensor {
  std::string name, dtype;
  int elemBytes = 4;
  bool output = false;
  std::vector<int64_t> dims;
};

struct TableEntry {
  std::string name, family, shape, dtype, target, arch;
  std::string vendor;  // "host", "nvidia", "amd"
  std::string config, source, tunedShape;
  std::string timeKind = "none";  // "measured", "estimated", "none"
  double timeUs = 0;
  std::string estimator, bound;
  std::vector<int64_t> dims;  // the key shape
  std::vector<TableTensor> tensors;  // inputs then outputs
  int numInputs = 0, numOutputs = 0;
  std::string hostSymbol;  // host: the object's entry point (one bare pointer per tensor)
  std::optional<codegen::GpuLaunch> launch;  // GPU
  std::string binary;  // cubin / hsaco
  std::string ptx;     // NVIDIA: PTX text
  bool ptxPortable = false;
  // Shape-generic host kernel (tessera tune --m/--rows/--seq LO..HI): the range's size is read at
  // run time from one more pointer after the tensors (int64_t sizes[3]); the key dimensions in
  // rangeDimMask (bit i: dims[i]; GEMM M and elementwise rows: bit 0, attention seq_q and seq_kv:
  // bits 3 and 4) take it and hold the range's top here.
  bool runtimeM = false;
  int64_t mLo = 0, mHi = 0;
  std::string rangeDim;       // "M", "rows", "seq"
  uint32_t rangeDimMask = 0;
};

// A dispatch rule of the bundle: shapes equal to `dims` except the dimensions of dimMask (all
// equal, within [lo, hi]) are answered by the bucket holding that size, each naming an entry
// (index into the table's entries).
struct TableRange {
  std::string name, family, dtype, arch;
  std::vector<int64_t> dims;
  int64_t lo = 0, hi = 0;
  std::string dim = "M";    // the range's dimension: "M", "rows", "seq"
  uint32_t dimMask = 1;     // bit i: dims[i] takes the size (M, rows: bit 0; seq: bits 3 and 4)
  struct Bucket {
    int64_t lo = 0, hi = 0;
    int entry = 0;
  };
  std::vector<Bucket> buckets;
};

struct TableSources {
  std::string table;   // tessera_bundle_table.c
  std::string images;  // tessera_bundle_images.c
};
TableSources tableSources(const std::vector<TableEntry>& entries, const std::vector<TableRange>& ranges = {});

// A C string literal of `s` (octal escapes for anything unusual).
std::string cString(const std::string& s);

}  // namespace tessera::bundle
