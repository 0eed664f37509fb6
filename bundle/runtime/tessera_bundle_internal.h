/* The layout of a bundle's kernel table, shared by the generated tessera_bundle_table.c and the
 * runtime sources. Not part of the API: tessera_bundle.h is. */
#ifndef TESSERA_BUNDLE_INTERNAL_H
#define TESSERA_BUNDLE_INTERNAL_H

#include "tessera_bundle.h"

/* Kernels take at most this many tensors (codegen's limit). */
#define TSR_MAX_TENSORS 64

typedef struct tsr_tensor {
  const char* name;
  const char* dtype;
  int elem_bytes;
  int is_output;
  int rank;
  int64_t dims[TESSERA_MAX_RANK];
} tsr_tensor;

/* One argument of a GPU kernel and how the host wrapper makes it from the user's buffers
 * (codegen/gpu.h GpuArg). */
enum { TSR_ARG_TENSOR = 0, TSR_ARG_PACKED = 1, TSR_ARG_WORKSPACE = 2, TSR_ARG_TENSOR_MAP = 3, TSR_ARG_SIZES = 4 };
typedef struct tsr_gpu_arg {
  int kind;
  int tensor;        /* user buffer index, -1: none */
  int elem_bytes;    /* of this argument */
  int64_t batch_stride;
  int64_t rows, cols, prows, pcols;
  int transposed, copy_back, zero_first;
  int64_t pack_batches;  /* packed: consecutive slices, one per batch (a kernel that runs every batch in one launch) */
  /* tensor map (sm_90 TMA): a tiled map over argument map_of, encoded per launch once that
   * argument's device address is known, passed as a pointer to a 128-byte device copy;
   * map_type: CUtensorMapDataType (FLOAT16 6, FLOAT32 7, BFLOAT16 9). */
  int map_of, map_rank, map_swizzle_bytes, map_type;
  int64_t map_dims[3], map_strides[2], map_box[3];
  /* shape-generic kernel: rows (packed / workspace / zeroed tensor) are the runtime M */
  int rows_follow_m;
} tsr_gpu_arg;

typedef struct tsr_gpu {
  const char* symbol;  /* kernel function in the code object */
  int64_t grid[3], block[3];
  int64_t batches;
  int num_args;
  const tsr_gpu_arg* args;
  int num_params;      /* the launched function's parameters: indices into args */
  const int* params;
  const unsigned char* binary;  /* cubin / hsaco */
  size_t binary_size;
  const char* ptx;              /* NVIDIA: PTX text, NUL-terminated (NULL: none) */
  int ptx_portable;             /* the driver may JIT the PTX for newer devices (not for sm_XXa) */
  int64_t dyn_shared;           /* dynamic shared memory / LDS per block, bytes (the launch's) */
  /* shape-generic (runtime M, the kernel's m_hi the bound): grid[row_axis] =
   * min(ceil(M * units_per_row / rows_per_block), grid[row_axis]) (GEMM: grid.y, one unit a row;
   * attention: grid.x of query blocks; elementwise: grid.x of blocks of vectors); user tensors
   * whose bit is set in m_tensors hold M of their M dimension (the bound is m_hi). */
  int64_t rows_per_block;
  uint64_t m_tensors;
  int row_axis;
  int64_t units_per_row;
} tsr_gpu;

enum { TSR_HOST = 0, TSR_NVIDIA = 1, TSR_AMD = 2 };

struct tessera_kernel {
  const char* name;
  const char* family;
  const char* shape;
  const char* dtype;
  const char* target;
  const char* arch;
  int vendor;
  const char* config;
  const char* source;
  const char* tuned_shape;
  const char* time_kind;
  double time_us;
  const char* estimator;
  const char* bound;
  int rank;
  int64_t dims[TESSERA_MAX_RANK];
  int num_inputs, num_outputs;
  const tsr_tensor* tensors;
  void (*host_fn)(void* const* buffers);  /* host: calls the compiled entry point */
  const tsr_gpu* gpu;                     /* GPU: launch and code object */
  /* Shape-generic: host_fn takes one more pointer, to int64_t sizes[3] (codegen's RuntimeDims:
   * {M | rows | seq, batch, seq_kv}); a GPU kernel the same sizes as a launch argument
   * (TSR_ARG_SIZES) and a grid from M. Every size in [m_lo, m_hi] of dimension range_dim ("M",
   * "rows", "seq") runs. The key dimensions in range_mask (bit i: dims[i]) take that size and hold
   * m_hi here: GEMM's M and elementwise rows bit 0, attention's seq_q and seq_kv bits 3 and 4. */
  int runtime_m;
  int64_t m_lo, m_hi;
  const char* range_dim;
  unsigned range_mask;
};

extern const struct tessera_kernel tsr_kernels[];
extern const int tsr_kernel_count;

/* A dispatch rule: shapes equal to dims except the dimensions in mask (bit i: dims[i]), which are
 * equal and in [lo, hi], are answered by the bucket holding that size; each bucket names a kernel
 * of tsr_kernels. dim names the size ("M", "rows", "seq"). */
typedef struct tsr_bucket {
  int64_t lo, hi;
  int kernel;
} tsr_bucket;
typedef struct tsr_range {
  const char* name;
  const char* family;
  const char* dtype;
  const char* arch;
  int rank;
  int64_t dims[TESSERA_MAX_RANK];
  int64_t lo, hi;
  int num_buckets;
  const tsr_bucket* buckets;
  const char* dim;
  unsigned mask;
} tsr_range;

extern const tsr_range tsr_ranges[];
extern const int tsr_range_count;

/* runtime internals shared by the two runtime files */
void tsr_message(const char* fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
int tsr_index_of(const tessera_kernel* k);
tessera_status tsr_check_buffers(const tessera_kernel* k, void* const* buffers, size_t align);
/* The arch of CUDA device `device` ("sm_90"), or NULL with a message. */
const char* tsr_cuda_arch(int device);
/* Whether AMD kernel `k`'s code object loads on HIP device `device` (the runtime names no arch
 * portably, so "hip" picks the kernels whose hsaco the device accepts). */
int tsr_hip_loads(const tessera_kernel* k, int device);
/* Runs shape-generic GPU kernel `k` at runtime sizes `sizes` (int64_t[3], M first) on device 0. */
tessera_status tsr_gpu_run_sizes(const tessera_kernel* k, void* const* buffers, const int64_t* sizes);

/* The runtime sizes of `k` at shape `dims` (int64_t[3], zeros for a fixed-shape kernel), or why
 * `dims` is not a shape `k` runs. */
tessera_status tsr_sizes_of(const tessera_kernel* k, const int64_t* dims, int rank, int64_t* sizes);

/* tessera_cuda_workspace_bytes / tessera_cuda_launch at runtime sizes (tsr_sizes_of). */
tessera_status tsr_cuda_workspace(const tessera_kernel* k, const int64_t* sizes, size_t* bytes);
tessera_status tsr_cuda_stream_run(const tessera_kernel* k, void* const* buffers, void* const* packed, const int64_t* sizes,
                                   void* workspace, void* stream, int device);
tessera_status tsr_cuda_transposed(const tessera_kernel* k, const int64_t* sizes, int tensor, int64_t* layout);

#endif /* TESSERA_BUNDLE_INTERNAL_H */
