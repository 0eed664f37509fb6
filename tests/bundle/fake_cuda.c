/* A stand-in for the CUDA driver (built with the soname libcuda.so.1) for testing the GPU host
 * wrapper of a bundle's C runtime (bundle/runtime/tessera_runtime_gpu.c) without a GPU. "Device"
 * memory is host memory (64-byte aligned, padded, filled with a pattern, never zeroed). A launch
 * either calls the test's kernel (the GPU kernel's emulated form, so results can be checked
 * against the reference) or, without one, hashes every byte its parameters can see (from each
 * pointer to the end of its allocation: padding, zeroing and batch offsets all count) and rewrites
 * those bytes from the hash, so two wrappers that behave alike produce identical outputs. Stream
 * operations (async memsets and copies, launches) are checked against the caller's stream and
 * can be captured and replayed like a CUDA graph; synchronisation, host copies and allocations are
 * counted (and refused during a capture, as the real driver does). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

#define MAX_ALLOCS 4096
static struct { unsigned char* p; size_t n; } allocs[MAX_ALLOCS];
static int live, launches, nparams = -2 /* unset: launches fail */, moduleLoads;
static void (*kernelFn)(void* ctx, void** params, int n);
static void* kernelCtx;

/* Test controls. */
void fake_cuda_set_params(int n) { nparams = n; }
void fake_cuda_set_kernel(void (*fn)(void*, void**, int), void* ctx) {
  kernelFn = fn;
  kernelCtx = ctx;
}
int fake_cuda_live_allocations(void) { return live; }
int fake_cuda_launches(void) { return launches; }
int fake_cuda_module_loads(void) { return moduleLoads; }
/* The grid of the last launch (shape-generic kernels compute it from the runtime M). */
static unsigned lastGrid[3];
void fake_cuda_last_grid(unsigned* g) { memcpy(g, lastGrid, sizeof lastGrid); }

CUresult cuInit(unsigned f) { (void)f; return 0; }
CUresult cuDeviceGet(int* d, int i) { *d = i; return i == 0 ? 0 : 101; /* CUDA_ERROR_INVALID_DEVICE */ }
CUresult cuDeviceGetName(char* s, int n, int d) { (void)d; strncpy(s, "fake device", (size_t)n); return 0; }
CUresult cuDeviceGetAttribute(int* v, int attr, int d) {
  (void)d;
  *v = attr == 75 ? 9 : attr == 76 ? 0 : 0; /* compute capability 9.0: sm_90 */
  return 0;
}
static int ctxRetains;
/* Primary context retains (the runtime should retain once per device, not per call). */
int fake_cuda_ctx_retains(void) { return ctxRetains; }
CUresult cuDevicePrimaryCtxRetain(void** c, int d) { (void)d; *c = (void*)0x1; ++ctxRetains; return 0; }
CUresult cuCtxSetCurrent(void* c) { (void)c; return 0; }
CUresult cuModuleLoadData(void** m, const void* image) {
  ++moduleLoads;
  *m = (void*)image;
  return image ? 0 : 200; /* CUDA_ERROR_INVALID_IMAGE */
}
CUresult cuModuleGetFunction(void** f, void* m, const char* name) { (void)m; *f = (void*)name; return 0; }

static int refuse(void);
static int allocCalls, hostCopies, syncs;
CUresult cuMemAlloc_v2(CUdeviceptr* p, size_t n) {
  ++allocCalls;
  if (refuse()) return 900;
  for (int i = 0; i < MAX_ALLOCS; ++i)
    if (!allocs[i].p) {
      size_t padded = (n + 63) / 64 * 64 + 64;  /* emulated vector tails may touch the last line */
      allocs[i].p = aligned_alloc(64, padded);
      if (!allocs[i].p) return 2;
      memset(allocs[i].p, 0xA5, padded);  /* never zero: a wrapper that forgets to zero shows */
      allocs[i].n = n;
      ++live;
      *p = (CUdeviceptr)(uintptr_t)allocs[i].p;
      return 0;
    }
  return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
}
CUresult cuMemFree_v2(CUdeviceptr p) {
  for (int i = 0; i < MAX_ALLOCS; ++i)
    if ((uintptr_t)allocs[i].p == p) {
      free(allocs[i].p);
      allocs[i].p = NULL;
      --live;
      return 0;
    }
  return 1;
}

/* The allocation holding p and the bytes from p to its end (0: not device memory). */
static size_t rest(CUdeviceptr p) {
  for (int i = 0; i < MAX_ALLOCS; ++i) {
    uintptr_t b = (uintptr_t)allocs[i].p;
    if (allocs[i].p && p >= b && p < b + allocs[i].n) return b + allocs[i].n - p;
  }
  return 0;
}

static int inside(CUdeviceptr p, size_t n) { return n == 0 || rest(p) >= n; }
/* For a test's kernel: the bytes of device memory from p to the end of its allocation. */
size_t fake_cuda_bytes_from(const void* p) { return rest((CUdeviceptr)(uintptr_t)p); }
CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void* s, size_t n) {
  ++hostCopies;
  if (refuse()) return 900;
  if (!inside(d, n)) return 1;
  memcpy((void*)(uintptr_t)d, s, n);
  return 0;
}
CUresult cuMemcpyDtoH_v2(void* d, CUdeviceptr s, size_t n) {
  ++hostCopies;
  if (refuse()) return 900;
  if (!inside(s, n)) return 1;
  memcpy(d, (const void*)(uintptr_t)s, n);
  return 0;
}
CUresult cuMemsetD8_v2(CUdeviceptr d, unsigned char v, size_t n) {
  ++syncs; /* synchronous with respect to the host */
  if (refuse()) return 900;
  if (!inside(d, n)) return 1;
  memset((void*)(uintptr_t)d, v, n);
  return 0;
}

/* The real driver refuses a launch asking for more than 48 KB of dynamic shared memory unless the
   function opted in (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8); so does this one. */
static int optedInShared = 48 * 1024;
CUresult cuFuncSetAttribute(void* f, int attr, int value) {
  (void)f;
  if (attr != 8 || value < 0 || value > 227 * 1024) return 1; /* CUDA_ERROR_INVALID_VALUE */
  optedInShared = value > optedInShared ? value : optedInShared;
  return 0;
}

/* fake_cuda_skip_ops(1): stream operations (launches, memsets, copies) are counted and checked as
 * usual but not run (a benchmark of the host side: the launch's hash over every byte its pointers
 * reach, or a memset of a workspace on the CPU, costs more than the call it measures). */
static int skipOps;
void fake_cuda_skip_ops(int on) { skipOps = on; }

/* A launch with its parameters' values (the driver copies them when the launch is enqueued). */
static CUresult run_launch(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shmem,
                           const CUdeviceptr* vals, int count) {
  if (count < 0) return 1;
  if ((int)shmem > optedInShared) return 1; /* CUDA_ERROR_INVALID_VALUE */
  ++launches;
  lastGrid[0] = gx, lastGrid[1] = gy, lastGrid[2] = gz;
  if (skipOps) return 0;
  if (kernelFn) {
    void* ptrs[64];
    for (int j = 0; j < count && j < 64; ++j) ptrs[j] = (void*)(uintptr_t)vals[j];
    kernelFn(kernelCtx, ptrs, count);
    return 0;
  }
  /* the dynamic shared memory asked for is part of the hash: both wrappers must pass the same */
  uint64_t h = 1469598103934665603ull ^ ((uint64_t)gx << 40 ^ (uint64_t)gy << 20 ^ gz ^ (uint64_t)bx << 48 ^ (uint64_t)by << 32 ^ bz) ^
               ((uint64_t)shmem * 0xff51afd7ed558ccdull);
  for (int j = 0; j < count; ++j) {
    CUdeviceptr p = vals[j];
    size_t n = rest(p);
    if (!n) return 1; /* CUDA_ERROR_INVALID_VALUE: not a device pointer */
    const unsigned char* b = (const unsigned char*)(uintptr_t)p;
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
    h = (h ^ (uint64_t)n) * 1099511628211ull;
  }
  for (int j = 0; j < count; ++j) {
    unsigned char* b = (unsigned char*)(uintptr_t)vals[j];
    size_t n = rest(vals[j]);
    uint64_t x = h + (uint64_t)j * 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < n; ++i) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      b[i] = (unsigned char)(b[i] + (x >> 56));
    }
  }
  return 0;
}

/* Streams and graph capture. The test names the stream the caller owns; an operation on another
 * stream, a synchronisation, a host copy or an allocation is counted. While capturing, operations
 * on that stream are recorded (not run) and replayed by fake_cuda_replay, as a CUDA graph would be;
 * what the real driver refuses during capture (synchronous copies, memsets and allocations,
 * synchronisation) fails with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED (900). */
enum { OP_SET8, OP_SET32, OP_COPY2D, OP_LAUNCH };
typedef struct {
  int kind;
  CUdeviceptr dst, src;
  size_t n, height, dpitch, spitch;
  unsigned value;
  unsigned dims[7];
  int count; /* launch parameters */
  CUdeviceptr vals[64];
} fake_op;
#define MAX_OPS 65536
static fake_op* ops;
static int numOps, capturing, wrongStream, refused;
static void* ownStream;
static fake_op lastLaunch;
static int lastCount;
static void* lastStream;
void fake_cuda_expect_stream(void* s) { ownStream = s; }
void fake_cuda_capture(int on) {
  capturing = on;
  if (on) numOps = 0;
}
int fake_cuda_capturing(void) { return capturing; }
/* {synchronisations, host copies, allocations, operations on another stream, refused during capture} */
void fake_cuda_counts(int* out) {
  out[0] = syncs, out[1] = hostCopies, out[2] = allocCalls, out[3] = wrongStream, out[4] = refused;
}
static int refuse(void) { return capturing ? (++refused, 900) : 0; }

static CUresult run_op(const fake_op* o) {
  switch (o->kind) {
    case OP_SET8:
      if (!inside(o->dst, o->n)) return 1;
      memset((void*)(uintptr_t)o->dst, (int)o->value, o->n);
      return 0;
    case OP_SET32:
      if (!inside(o->dst, 4 * o->n) || o->dst % 4) return 1;
      for (size_t i = 0; i < o->n; ++i) memcpy((char*)(uintptr_t)o->dst + 4 * i, &o->value, 4);
      return 0;
    case OP_COPY2D:
      if (o->dpitch < o->n || o->spitch < o->n) return 1;
      for (size_t r = 0; r < o->height; ++r) {
        if (!inside(o->dst + r * o->dpitch, o->n) || !inside(o->src + r * o->spitch, o->n)) return 1;
        memmove((char*)(uintptr_t)(o->dst + r * o->dpitch), (const char*)(uintptr_t)(o->src + r * o->spitch), o->n);
      }
      return 0;
    default:
      return run_launch(o->dims[0], o->dims[1], o->dims[2], o->dims[3], o->dims[4], o->dims[5], o->dims[6], o->vals, o->count);
  }
}
static int streamOps;
/* Operations enqueued on any stream (memsets, copies, launches): each is a driver call and a
 * device operation on a real GPU. */
int fake_cuda_stream_ops(void) { return streamOps; }
static CUresult enqueue(const fake_op* o, void* stream) {
  ++streamOps;
  if (stream != ownStream) ++wrongStream;
  if (skipOps && !capturing) return o->kind == OP_LAUNCH ? (++launches, 0) : 0;
  if (!capturing || stream != ownStream) return capturing ? refuse() : run_op(o);
  if (!ops && !(ops = malloc(MAX_OPS * sizeof *ops))) return 2;
  if (numOps == MAX_OPS) return 2;
  ops[numOps++] = *o;
  return 0;
}
/* Runs the captured operations in order; the number run, or -1 when one failed. */
int fake_cuda_replay(void) {
  for (int i = 0; i < numOps; ++i)
    if (run_op(&ops[i]) != 0) return -1;
  return numOps;
}

CUresult cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shmem, void* stream, void** params, void** extra) {
  (void)f; (void)extra;
  fake_op o;
  o.kind = OP_LAUNCH;
  o.count = 0;
  unsigned d[7] = {gx, gy, gz, bx, by, bz, shmem};
  memcpy(o.dims, d, sizeof d);
  /* nparams -1: as many as the parameter array holds before its NULL (the bundle runtime ends it so) */
  int n = nparams;
  if (n == -1)
    for (n = 0; n < 64 && params[n];) ++n;
  for (int j = 0; j < n && j < 64; ++j) o.vals[j] = *(CUdeviceptr*)params[j];
  o.count = n;
  lastLaunch = o;
  lastCount = n;
  lastStream = stream;
  return enqueue(&o, stream);
}
/* The last launch enqueued: its parameters' values (up to cap), stream, grid and block; the count. */
int fake_cuda_last_launch(unsigned long long* vals, int cap, void** stream, unsigned* dims) {
  for (int j = 0; j < lastCount && j < cap; ++j) vals[j] = lastLaunch.vals[j];
  *stream = lastStream;
  memcpy(dims, lastLaunch.dims, sizeof lastLaunch.dims);
  return lastCount;
}
CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, void* stream) {
  fake_op o = {.kind = OP_SET8, .dst = d, .n = n, .value = v};
  return enqueue(&o, stream);
}
CUresult cuMemsetD32Async(CUdeviceptr d, unsigned v, size_t n, void* stream) {
  fake_op o = {.kind = OP_SET32, .dst = d, .n = n, .value = v};
  return enqueue(&o, stream);
}
typedef struct { /* CUDA_MEMCPY2D */
  size_t srcXInBytes, srcY;
  int srcMemoryType;
  const void* srcHost;
  CUdeviceptr srcDevice;
  void* srcArray;
  size_t srcPitch;
  size_t dstXInBytes, dstY;
  int dstMemoryType;
  void* dstHost;
  CUdeviceptr dstDevice;
  void* dstArray;
  size_t dstPitch;
  size_t WidthInBytes, Height;
} fake_memcpy2d;
CUresult cuMemcpy2DAsync_v2(const fake_memcpy2d* c, void* stream) {
  if (c->srcMemoryType != 2 || c->dstMemoryType != 2 || c->srcXInBytes || c->srcY || c->dstXInBytes || c->dstY) return 1;
  fake_op o = {.kind = OP_COPY2D, .dst = c->dstDevice, .src = c->srcDevice, .n = c->WidthInBytes, .height = c->Height,
               .dpitch = c->dstPitch, .spitch = c->srcPitch};
  return enqueue(&o, stream);
}
CUresult cuStreamSynchronize(void* s) { (void)s; ++syncs; return refuse(); }
CUresult cuCtxSynchronize(void) { ++syncs; return refuse(); }

/* Tensor maps: the test's encoder where it set one (the emulated device's own form, for a kernel
 * run by the emulator); else a form made of everything the caller passed except the address
 * itself, which differs between two wrappers' allocations: the first 64 bytes the address points
 * at stand for it, so two wrappers that describe the same buffer alike encode the same bytes. */
typedef int (*fake_encoder)(void* out, int type, unsigned rank, void* global, const unsigned long long* dims,
                            const unsigned long long* strides, const unsigned* box, int swizzle);
static fake_encoder encoder;
static int mapsEncoded;
void fake_cuda_set_encoder(fake_encoder e) { encoder = e; }
int fake_cuda_maps_encoded(void) { return mapsEncoded; }
CUresult cuTensorMapEncodeTiled(void* out, int type, unsigned rank, void* global, const unsigned long long* dims,
                                const unsigned long long* strides, const unsigned* box, const unsigned* elementStrides,
                                int interleave, int swizzle, int l2, int oob) {
  if (rank < 1 || rank > 5 || !global || ((uintptr_t)global % 16)) return 1; /* CUDA_ERROR_INVALID_VALUE */
  ++mapsEncoded;
  if (encoder) return encoder(out, type, rank, global, dims, strides, box, swizzle);
  unsigned char* o = (unsigned char*)out;
  uint64_t h = 1469598103934665603ull;
#define MIX(x) (h = (h ^ (uint64_t)(x)) * 1099511628211ull)
  MIX(type); MIX(rank); MIX(interleave); MIX(swizzle); MIX(l2); MIX(oob);
  for (unsigned i = 0; i < rank; ++i) { MIX(dims[i]); MIX(box[i]); MIX(elementStrides[i]); }
  for (unsigned i = 0; i + 1 < rank; ++i) MIX(strides[i]);
#undef MIX
  memset(o, 0, 128);
  memcpy(o, &h, sizeof h);
  size_t n = rest((CUdeviceptr)(uintptr_t)global);
  memcpy(o + 64, global, n < 64 ? n : 64);
  return 0;
}

CUresult cuEventCreate(void** e, unsigned f) { (void)f; *e = malloc(1); return 0; }
CUresult cuEventDestroy_v2(void* e) { free(e); return 0; }
CUresult cuEventRecord(void* e, void* s) { (void)e; (void)s; return 0; }
CUresult cuEventSynchronize(void* e) { (void)e; ++syncs; return refuse(); }
CUresult cuEventElapsedTime(float* ms, void* a, void* b) { (void)a; (void)b; *ms = 1.0f; return 0; }
CUresult cuGetErrorString(CUresult r, const char** s) { (void)r; *s = "fake driver error"; return 0; }
