/* The C API of an ahead-of-time Tessera kernel bundle (`tessera bundle`): find a tuned kernel by
 * family (or name), shape, dtype and arch, ask what was chosen and why, and run it on the host
 * (a direct call) or on a CUDA / HIP device (driver loaded with dlopen at run time).
 *
 * Build: cc -O2 -c tessera_runtime.c tessera_runtime_gpu.c tessera_bundle_table.c, link them with
 * the objects under host/ and -ldl -lm (no LLVM, no MLIR, no CUDA or ROCm at link time).
 * -DTESSERA_BUNDLE_NO_GPU leaves the CUDA/HIP launchers out. */
#ifndef TESSERA_BUNDLE_H
#define TESSERA_BUNDLE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tessera_status {
  TESSERA_OK = 0,
  TESSERA_ERR_NOT_FOUND = 1,    /* no kernel for that family/name, shape, dtype and arch */
  TESSERA_ERR_ARGUMENT = 2,     /* null, misaligned or wrongly counted buffers, bad shape text */
  TESSERA_ERR_UNSUPPORTED = 3,  /* not here: no driver or device, another GPU arch, a CPU below the ISA level */
  TESSERA_ERR_DEVICE = 4,       /* the driver reported an error */
  TESSERA_ERR_MEMORY = 5        /* host or device allocation failed */
} tessera_status;

/* A kernel of the bundle; lives as long as the program. */
typedef struct tessera_kernel tessera_kernel;

#define TESSERA_MAX_RANK 8

typedef struct tessera_tensor_info {
  const char* name;  /* "A", "x", "Q", ... */
  const char* dtype; /* "f32", "f16", "bf16" */
  int is_output;
  int rank;
  int64_t dims[TESSERA_MAX_RANK];
  size_t bytes;      /* row-major, dense */
} tessera_tensor_info;

typedef struct tessera_kernel_info {
  const char* name;        /* kernel name */
  const char* family;      /* "gemm", "elementwise", "attention" */
  const char* shape;       /* the key shape it was compiled for: gemm [B x]MxNxK, attention BxHxHkvxSqxSkvxD */
  const char* dtype;
  const char* target;      /* "host", "sm_90", "gfx942", ... */
  const char* arch;        /* "x86-64-v4", "sm_90", "gfx942", ... */
  const char* config;      /* the schedule it was compiled with (JSON) */
  const char* source;      /* "exact": tuned at this shape; "nearest": the config tuned at tuned_shape, legal here;
                              "default": no tuned config was found, the space's default */
  const char* tuned_shape; /* the shape the config was tuned at ("" for default) */
  const char* time_kind;   /* "measured", "estimated" or "none" */
  double time_us;          /* median at tuned_shape (measured or estimated; 0: none) */
  const char* estimator;   /* estimated only: the model, e.g. "analytic-v1" */
  const char* bound;       /* estimated only: "compute", "memory", "latency", "launch" */
  int num_inputs, num_outputs;
  int runtime_m;           /* 1: shape-generic, runs every size in [m_lo, m_hi] of range_dim (tessera_run_dims) */
  int64_t m_lo, m_hi;      /* a range's fixed bucket (runtime_m 0, range_dim set): m_lo == m_hi, its one size */
  const char* range_dim;   /* a range's kernel: "M" (GEMM), "rows" (elementwise) or "seq" (attention); "" otherwise */
} tessera_kernel_info;

/* The kernel for `family` ("gemm", "elementwise", "attention", or a kernel name), the key shape
 * text ("1024x1024x1024"), dtype ("f32") and arch: "host" (the best ISA level this CPU runs),
 * "x86-64-v3", "sm_90", "gfx942", or "cuda" / "hip" (the arch of device 0, which needs the driver).
 * NULL when the bundle has none; tessera_last_message() then lists the shapes it does have.
 * Kernels are compiled for fixed shapes: a config tuned at another shape was checked against the
 * space rules of this shape when the bundle was built (source "nearest"). */
const tessera_kernel* tessera_find(const char* family, const char* shape, const char* dtype, const char* arch);
const tessera_kernel* tessera_find_dims(const char* family, const int64_t* dims, int rank, const char* dtype,
                                        const char* arch);

/* Shape-generic kernels (a bundle made with `tessera bundle --dispatch RULE`): one kernel serves
 * every size of a range of one dimension: GEMM's M (dims[0]), an elementwise kernel's rows (its
 * leading dimension, dims[0]) or attention's sequence length (query and key lengths together,
 * dims[3] = dims[4] of B x H x Hkv x Sq x Skv x D); "M" below stands for any of them. A shape whose
 * M lies in a range (its other dimensions and dtype equal) is answered by the kernel of M's
 * bucket; tessera_last_message() and tessera_last_dispatch() say which range, bucket and config.
 * A shape outside every range gets NULL and a message saying so. A kernel found this way runs with
 * tessera_run_dims (the shape's M is passed at run time); its tensors are described at M = m_hi.
 * A range may answer single sizes of its bucket list with kernels compiled for that one shape (a
 * rule's fixed buckets: few-row kernels with no shape-generic form); tessera_run_dims runs those
 * too. A kernel compiled for the exact shape outside any range is preferred. */
typedef struct tessera_dispatch_info {
  int in_range;       /* 1: the last tessera_find on this thread was answered from a range */
  const char* rule;   /* the range's name (the kernel tuned over it) */
  int64_t lo, hi;     /* the range of M */
  int bucket, num_buckets;
  int64_t bucket_lo, bucket_hi;
  const tessera_kernel* kernel;
  const char* dim;    /* the range's dimension: "M", "rows" or "seq" */
} tessera_dispatch_info;
tessera_status tessera_last_dispatch(tessera_dispatch_info* out);
/* Runs `k` at the shape `dims` (for a fixed-shape kernel: its own shape; for a shape-generic one:
 * its shape with any M of its range). Buffers as for tessera_run, sized for `dims`. */
tessera_status tessera_run_dims(const tessera_kernel* k, const int64_t* dims, int rank, void* const* buffers);

/* One line: what the last tessera_find chose and why, or why the last call failed (per thread). */
const char* tessera_last_message(void);
const char* tessera_status_name(tessera_status s);

int tessera_kernel_count(void);
const tessera_kernel* tessera_kernel_at(int i);
tessera_status tessera_info(const tessera_kernel* k, tessera_kernel_info* out);
/* Tensors in calling order: inputs, then outputs. */
int tessera_num_tensors(const tessera_kernel* k);
tessera_status tessera_tensor(const tessera_kernel* k, int i, tessera_tensor_info* out);

/* Runs `k` on host buffers: one per tensor (inputs then outputs), row-major, dense, 64-byte
 * aligned, not overlapping. Host kernels are called directly; GPU kernels go through
 * tessera_cuda_run / tessera_hip_run on device 0. */
tessera_status tessera_run(const tessera_kernel* k, void* const* buffers);
tessera_status tessera_host_call(const tessera_kernel* k, void* const* buffers);

/* GPU kernels on host buffers: uploads, pads/packs operands into zeroed workspaces, launches once
 * per batch, copies the results back and downloads them (the same host wrapper Tessera's own
 * runners use). `elapsed_ms` (may be NULL) gets the device time of the launches (events).
 * Without a driver or device: TESSERA_ERR_UNSUPPORTED and a message, never a crash. */
tessera_status tessera_cuda_run(const tessera_kernel* k, void* const* buffers, int device, float* elapsed_ms);
tessera_status tessera_hip_run(const tessera_kernel* k, void* const* buffers, int device, float* elapsed_ms);

/* GPU kernels on device buffers, enqueued on a stream: for a framework that owns the memory and
 * the stream (PyTorch's caching allocator and current stream). `buffers` are device pointers of
 * CUDA device `device`, one per tensor (inputs then outputs, row-major, dense) sized for `dims`
 * (as for tessera_run_dims); `stream` is a CUstream (NULL: the legacy default stream). The padded
 * and transposed operand copies, zeroed workspaces, runtime sizes and tensor maps the launch needs
 * live in `workspace`, device memory of tessera_cuda_workspace_bytes bytes (256-byte aligned; NULL
 * when that is 0) that the caller keeps until the stream has run the launch. Everything is ordered
 * on `stream` (memsets, device-to-device copies, launches): no allocation, no host copy, no
 * synchronisation, so the call can be captured in a CUDA graph. A transposed operand is copied in
 * min(rows, cols) strided copies per batch (see tessera_cuda_launch_packed). Without the driver's stream entry points (or a
 * driver): TESSERA_ERR_UNSUPPORTED and a message. */
tessera_status tessera_cuda_workspace_bytes(const tessera_kernel* k, const int64_t* dims, int rank, size_t* bytes);
tessera_status tessera_cuda_launch(const tessera_kernel* k, const int64_t* dims, int rank, void* const* buffers,
                                   void* workspace, void* stream, int device);

/* The strided copies of a transposed operand are one driver operation per row or column: hundreds
 * per call for a weight matrix. A caller that can transpose on the device (a framework's own copy
 * kernel) passes the copy instead. tessera_cuda_transposed_operand: for user tensor `tensor` at
 * `dims`, layout[5] = {slices, rows, cols, prows, pcols} when the launch would copy it transposed:
 * the tensor is `slices` consecutive [cols][rows] matrices and the kernel reads each as a
 * [prows][pcols] matrix holding its transpose (zeros past rows and cols); layout[0] = 0 when the
 * launch reads the tensor otherwise. tessera_cuda_launch_packed: tessera_cuda_launch with packed[t]
 * (packed NULL, or a NULL entry: none) device memory holding tensor t in that layout, 16-byte
 * aligned, read in place of the copies (the workspace size is unchanged); kept by the caller until
 * the stream has run. */
tessera_status tessera_cuda_transposed_operand(const tessera_kernel* k, const int64_t* dims, int rank, int tensor,
                                               int64_t* layout);
tessera_status tessera_cuda_launch_packed(const tessera_kernel* k, const int64_t* dims, int rank, void* const* buffers,
                                          void* const* packed, void* workspace, void* stream, int device);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_BUNDLE_H */
