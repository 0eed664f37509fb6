/* Owns the GPU half of a bundle's runtime: the CUDA driver API (libcuda.so.1) and the HIP runtime
 * (libamdhip64.so) loaded with dlopen, so nothing links against either and a machine without a
 * driver gets TESSERA_ERR_UNSUPPORTED and a message; code objects loaded once per kernel; and the
 * host wrapper of codegen/gpu.h reproduced in C (user buffers uploaded, operands padded or
 * transposed into zeroed copies, workspaces zeroed, one launch per batch, copy-back, download).
 * The HIP half is tessera_runtime_hip.inc, included below (users compile this file only). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera_bundle_internal.h"

#ifdef TESSERA_BUNDLE_NO_GPU

const char* tsr_cuda_arch(int device) {
  (void)device;
  tsr_message("this program was built without the GPU launchers (TESSERA_BUNDLE_NO_GPU)");
  return NULL;
}
int tsr_hip_loads(const tessera_kernel* k, int device) { (void)k; (void)device; return 0; }
tessera_status tessera_cuda_run(const tessera_kernel* k, void* const* b, int d, float* ms) {
  (void)k; (void)b; (void)d; (void)ms;
  tsr_message("this program was built without the GPU launchers (TESSERA_BUNDLE_NO_GPU)");
  return TESSERA_ERR_UNSUPPORTED;
}
tessera_status tessera_hip_run(const tessera_kernel* k, void* const* b, int d, float* ms) {
  return tessera_cuda_run(k, b, d, ms);
}
tessera_status tsr_gpu_run_sizes(const tessera_kernel* k, void* const* b, const int64_t* sizes) {
  (void)sizes;
  return tessera_cuda_run(k, b, 0, NULL);  /* says it was built without the launchers */
}
tessera_status tsr_cuda_workspace(const tessera_kernel* k, const int64_t* sizes, size_t* bytes) {
  (void)sizes;
  *bytes = 0;
  return tessera_cuda_run(k, NULL, 0, NULL);
}
tessera_status tsr_cuda_stream_run(const tessera_kernel* k, void* const* b, void* const* packed, const int64_t* sizes, void* ws,
                                   void* s, int d) {
  (void)packed; (void)sizes; (void)ws; (void)s;
  return tessera_cuda_run(k, b, d, NULL);
}
tessera_status tsr_cuda_transposed(const tessera_kernel* k, const int64_t* sizes, int tensor, int64_t* layout) {
  (void)sizes; (void)tensor;
  memset(layout, 0, 5 * sizeof *layout);
  return tessera_cuda_run(k, NULL, 0, NULL);
}

#else

#include <dlfcn.h>
#include <pthread.h>

/* ---- the device-independent host wrapper ---- */

typedef struct tsr_dev tsr_dev;
struct tsr_dev {
  tessera_status (*alloc)(tsr_dev* d, uint64_t* p, size_t n);
  void (*release)(tsr_dev* d, uint64_t p);
  tessera_status (*upload)(tsr_dev* d, uint64_t dst, const void* src, size_t n);
  tessera_status (*download)(tsr_dev* d, void* dst, uint64_t src, size_t n);
  tessera_status (*zero)(tsr_dev* d, uint64_t dst, size_t n);
  tessera_status (*launch)(tsr_dev* d, void* fn, const tsr_gpu* g, void** params, float* ms);
  /* A TMA tensor map of `a` over device address `global` into out[128]; NULL: the device has none. */
  tessera_status (*encode_map)(tsr_dev* d, const tsr_gpu_arg* a, uint64_t global, void* out);
};

static int64_t tsr_slices(const tsr_gpu_arg* a) { return a->pack_batches > 1 ? a->pack_batches : 1; }
static size_t tsr_arg_bytes(const tsr_gpu_arg* a) {
  if (a->kind == TSR_ARG_TENSOR_MAP) return 128;
  if (a->kind == TSR_ARG_SIZES) return 3 * sizeof(int64_t);
  return (size_t)(a->prows * a->pcols * tsr_slices(a)) * (size_t)a->elem_bytes;
}

static size_t tsr_tensor_bytes(const tsr_tensor* t) {
  size_t n = (size_t)t->elem_bytes;
  for (int i = 0; i < t->rank; ++i) n *= (size_t)t->dims[i];
  return n;
}

/* User tensor i of `k` at runtime M `m` (0: the compiled shape): M rows where its first dim is M. */
static size_t tsr_user_bytes(const tessera_kernel* k, int i, int64_t m) {
  size_t n = tsr_tensor_bytes(&k->tensors[i]);
  if (m > 0 && k->runtime_m && k->m_hi > 0 && i < 64 && (k->gpu->m_tensors >> i & 1u)) n = n / (size_t)k->m_hi * (size_t)m;
  return n;
}

/* Zeroed [prows x pcols] copies of the [rows x cols] matrices at src (stored [cols][rows] when
 * transposed), one slice per batch where the kernel runs every batch in one launch. */
static void tsr_pack(const tsr_gpu_arg* a, const char* src, char* dst) {
  const size_t es = (size_t)a->elem_bytes;
  memset(dst, 0, tsr_arg_bytes(a));
  for (int64_t b = 0; b < tsr_slices(a); ++b) {
    char* d = dst + (size_t)(b * a->prows * a->pcols) * es;
    const char* sb = src + (size_t)(b * a->rows * a->cols) * es;
    if (!a->transposed) {
      for (int64_t r = 0; r < a->rows; ++r)
        memcpy(d + (size_t)(r * a->pcols) * es, sb + (size_t)(r * a->cols) * es, (size_t)a->cols * es);
      continue;
    }
    for (int64_t r = 0; r < a->rows; ++r)
      for (int64_t c = 0; c < a->cols; ++c)
        memcpy(d + (size_t)(r * a->pcols + c) * es, sb + (size_t)(c * a->rows + r) * es, es);
  }
}

static void tsr_copy_back(const tsr_gpu_arg* a, const char* ws, char* user) {
  const size_t es = (size_t)a->elem_bytes;
  for (int64_t r = 0; r < a->rows; ++r)
    memcpy(user + (size_t)(r * a->cols) * es, ws + (size_t)(r * a->pcols) * es, (size_t)a->cols * es);
}

/* The launch of `k` at runtime M `m` (0: as compiled) into *gm: for a shape-generic kernel the
 * grid's row blocks and the arguments' rows follow M, in *margs (the caller frees it). */
static tessera_status tsr_launch_at(const tessera_kernel* k, int64_t m, tsr_gpu* gm, tsr_gpu_arg** margs) {
  *gm = *k->gpu;
  *margs = NULL;
  if (m <= 0) return TESSERA_OK;
  if (gm->rows_per_block > 0 && gm->row_axis >= 0 && gm->row_axis < 3) {
    const int64_t units = m * (gm->units_per_row > 0 ? gm->units_per_row : 1);
    const int64_t blocks = (units + gm->rows_per_block - 1) / gm->rows_per_block;
    if (blocks < gm->grid[gm->row_axis]) gm->grid[gm->row_axis] = blocks;
  }
  if (!(*margs = calloc((size_t)gm->num_args + 1, sizeof **margs))) {
    tsr_message("%s: out of host memory", k->name);
    return TESSERA_ERR_MEMORY;
  }
  for (int i = 0; i < gm->num_args; ++i) {
    (*margs)[i] = k->gpu->args[i];
    if ((*margs)[i].rows_follow_m) (*margs)[i].rows = m;
  }
  gm->args = *margs;
  return TESSERA_OK;
}

static tessera_status tsr_wrapper_run(tsr_dev* d, const tessera_kernel* k, void* fn, void* const* buffers, const int64_t* sizes,
                                      float* total_ms) {
  /* A shape-generic kernel runs at runtime M (without sizes: at its bound). */
  const int64_t m = k->runtime_m ? (sizes ? sizes[0] : k->m_hi) : 0;
  int64_t sz[3] = {m, sizes ? sizes[1] : 0, sizes ? sizes[2] : 0};
  tsr_gpu gm;
  tsr_gpu_arg* margs = NULL;
  if (tsr_launch_at(k, m, &gm, &margs) != TESSERA_OK) return TESSERA_ERR_MEMORY;
  const tsr_gpu* g = &gm;
  const int nt = k->num_inputs + k->num_outputs;
  uint64_t* user = calloc((size_t)nt, sizeof *user);
  uint64_t* scratch = calloc((size_t)g->num_args + 1, sizeof *scratch);
  uint64_t* ptr = calloc((size_t)g->num_args + 1, sizeof *ptr);
  uint64_t* vals = calloc((size_t)g->num_params + 1, sizeof *vals);
  void** params = calloc((size_t)g->num_params + 1, sizeof *params);
  char* staging = NULL;
  size_t stagingSize = 0;
  tessera_status st = TESSERA_OK;
  float total = 0;
  if (!user || !scratch || !ptr || !vals || !params) {
    tsr_message("%s: out of host memory", k->name);
    st = TESSERA_ERR_MEMORY;
    goto done;
  }
  for (int i = 0; i < nt && st == TESSERA_OK; ++i) {
    size_t n = tsr_user_bytes(k, i, m);
    st = d->alloc(d, &user[i], n);
    if (st == TESSERA_OK) st = d->upload(d, user[i], buffers[i], n);
  }
  for (int i = 0; i < g->num_args && st == TESSERA_OK; ++i) {
    const tsr_gpu_arg* a = &g->args[i];
    if (a->kind == TSR_ARG_TENSOR) continue;
    size_t n = tsr_arg_bytes(a);
    st = d->alloc(d, &scratch[i], n);
    if (st == TESSERA_OK && n > stagingSize) stagingSize = n;
  }
  if (st == TESSERA_OK && stagingSize && !(staging = malloc(stagingSize))) {
    tsr_message("%s: out of host memory", k->name);
    st = TESSERA_ERR_MEMORY;
  }
  for (int64_t b = 0; b < g->batches && st == TESSERA_OK; ++b) {
    for (int i = 0; i < g->num_args && st == TESSERA_OK; ++i) {
      const tsr_gpu_arg* a = &g->args[i];
      size_t off = a->tensor >= 0 ? (size_t)(b * a->batch_stride) * (size_t)k->tensors[a->tensor].elem_bytes : 0;
      if (a->kind == TSR_ARG_TENSOR) {
        ptr[i] = user[a->tensor] + off;
        if (a->zero_first) st = d->zero(d, ptr[i], (size_t)(a->rows * a->cols) * (size_t)a->elem_bytes);
      } else if (a->kind == TSR_ARG_WORKSPACE) {
        ptr[i] = scratch[i];
        st = d->zero(d, ptr[i], tsr_arg_bytes(a));
      } else if (a->kind == TSR_ARG_PACKED) {
        ptr[i] = scratch[i];
        tsr_pack(a, (const char*)buffers[a->tensor] + off, staging);
        st = d->upload(d, ptr[i], staging, tsr_arg_bytes(a));
      } else if (a->kind == TSR_ARG_SIZES) {
        ptr[i] = scratch[i];
        st = d->upload(d, ptr[i], sz, sizeof sz);
      }
    }
    /* Tensor maps last: they hold the device addresses of the arguments they describe. */
    for (int i = 0; i < g->num_args && st == TESSERA_OK; ++i) {
      const tsr_gpu_arg* a = &g->args[i];
      unsigned char map[128] __attribute__((aligned(64)));
      if (a->kind != TSR_ARG_TENSOR_MAP) continue;
      if (a->map_of < 0 || a->map_of >= g->num_args || g->args[a->map_of].kind == TSR_ARG_TENSOR_MAP) {
        tsr_message("%s: a tensor map describes launch argument %d, which is not a buffer", k->name, a->map_of);
        st = TESSERA_ERR_ARGUMENT;
        break;
      }
      if (!d->encode_map) {
        tsr_message("%s: this device has no tensor maps (TMA): the kernel needs an sm_90 GPU and a driver of CUDA 12 or later", k->name);
        st = TESSERA_ERR_UNSUPPORTED;
        break;
      }
      memset(map, 0, sizeof map);
      st = d->encode_map(d, a, ptr[a->map_of], map);
      ptr[i] = scratch[i];
      if (st == TESSERA_OK) st = d->upload(d, ptr[i], map, sizeof map);
    }
    if (st != TESSERA_OK) break;
    for (int p = 0; p < g->num_params; ++p) {
      vals[p] = ptr[g->params[p]];
      params[p] = &vals[p];
    }
    float ms = 0;
    st = d->launch(d, fn, g, params, &ms);
    total += ms;
    for (int i = 0; i < g->num_args && st == TESSERA_OK; ++i) {
      const tsr_gpu_arg* a = &g->args[i];
      if (a->kind != TSR_ARG_WORKSPACE || !a->copy_back) continue;
      st = d->download(d, staging, scratch[i], tsr_arg_bytes(a));
      size_t off = (size_t)(b * a->batch_stride) * (size_t)k->tensors[a->tensor].elem_bytes;
      if (st == TESSERA_OK) tsr_copy_back(a, staging, (char*)buffers[a->tensor] + off);
    }
  }
  for (int i = k->num_inputs; i < nt && st == TESSERA_OK; ++i) {
    int copied = 0;
    for (int j = 0; j < g->num_args; ++j)
      copied |= g->args[j].kind == TSR_ARG_WORKSPACE && g->args[j].copy_back && g->args[j].tensor == i;
    if (!copied) st = d->download(d, buffers[i], user[i], tsr_user_bytes(k, i, m));
  }
done:
  free(margs);
  if (user)
    for (int i = 0; i < nt; ++i)
      if (user[i]) d->release(d, user[i]);
  if (scratch)
    for (int i = 0; i < g->num_args; ++i)
      if (scratch[i]) d->release(d, scratch[i]);
  free(user);
  free(scratch);
  free(ptr);
  free(vals);
  free(params);
  free(staging);
  if (total_ms) *total_ms = total;
  return st;
}

/* Loaded code objects, one per kernel of the table (and the device it was loaded on). */
typedef struct tsr_loaded {
  void* module;
  void* function;
  int device;
  int state; /* 0: not tried, 1: loaded, -1: refused by the device */
} tsr_loaded;

static pthread_mutex_t tsr_lock = PTHREAD_MUTEX_INITIALIZER;

static tsr_loaded* tsr_slots(tsr_loaded** table) {
  if (!*table) *table = calloc((size_t)tsr_kernel_count + 1, sizeof **table);
  return *table;
}

/* ---- CUDA driver API ---- */

typedef int CUres;
typedef unsigned long long CUptr;
static struct {
  int tried, ok;
  void* lib;
  CUres (*init)(unsigned);
  CUres (*deviceGet)(int*, int);
  CUres (*deviceGetAttribute)(int*, int, int);
  CUres (*primaryCtxRetain)(void**, int);
  CUres (*ctxSetCurrent)(void*);
  CUres (*moduleLoadData)(void**, const void*);
  CUres (*moduleGetFunction)(void**, void*, const char*);
  CUres (*memAlloc)(CUptr*, size_t);
  CUres (*memFree)(CUptr);
  CUres (*memcpyHtoD)(CUptr, const void*, size_t);
  CUres (*memcpyDtoH)(void*, CUptr, size_t);
  CUres (*memsetD8)(CUptr, unsigned char, size_t);
  CUres (*launchKernel)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*, void**, void**);
  CUres (*funcSetAttribute)(void*, int, int);
  CUres (*eventCreate)(void**, unsigned);
  CUres (*eventRecord)(void*, void*);
  CUres (*eventSynchronize)(void*);
  CUres (*eventElapsedTime)(float*, void*, void*);
  CUres (*eventDestroy)(void*);
  CUres (*getErrorString)(CUres, const char**);
  /* the stream path (tessera_cuda_launch); optional: the host path runs without them */
  CUres (*memsetD8Async)(CUptr, unsigned char, size_t, void*);
  CUres (*memsetD32Async)(CUptr, unsigned, size_t, void*);
  CUres (*memcpy2DAsync)(const void*, void*);
  /* CUDA 12+; absent on older drivers (a TMA kernel is then refused with a message) */
  CUres (*tensorMapEncodeTiled)(void*, int, unsigned, void*, const unsigned long long*, const unsigned long long*,
                                const unsigned*, const unsigned*, int, int, int, int);
} cu;
static tsr_loaded* cu_loaded;
static char cu_arch_text[16];

#define TSR_SYM(api, field, name) (*(void**)(&api.field) = dlsym(api.lib, name)) != NULL

/* Opens the driver once; 0 with a message when there is none. */
static int cu_open(void) {
  pthread_mutex_lock(&tsr_lock);
  if (!cu.tried) {
    cu.tried = 1;
    cu.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (cu.lib)
      cu.ok = TSR_SYM(cu, init, "cuInit") && TSR_SYM(cu, deviceGet, "cuDeviceGet") &&
              TSR_SYM(cu, deviceGetAttribute, "cuDeviceGetAttribute") &&
              TSR_SYM(cu, primaryCtxRetain, "cuDevicePrimaryCtxRetain") && TSR_SYM(cu, ctxSetCurrent, "cuCtxSetCurrent") &&
              TSR_SYM(cu, moduleLoadData, "cuModuleLoadData") && TSR_SYM(cu, moduleGetFunction, "cuModuleGetFunction") &&
              TSR_SYM(cu, memAlloc, "cuMemAlloc_v2") && TSR_SYM(cu, memFree, "cuMemFree_v2") &&
              TSR_SYM(cu, memcpyHtoD, "cuMemcpyHtoD_v2") && TSR_SYM(cu, memcpyDtoH, "cuMemcpyDtoH_v2") &&
              TSR_SYM(cu, memsetD8, "cuMemsetD8_v2") && TSR_SYM(cu, launchKernel, "cuLaunchKernel") &&
              TSR_SYM(cu, funcSetAttribute, "cuFuncSetAttribute") && TSR_SYM(cu, eventCreate, "cuEventCreate") && TSR_SYM(cu, eventRecord, "cuEventRecord") &&
              TSR_SYM(cu, eventSynchronize, "cuEventSynchronize") &&
              TSR_SYM(cu, eventElapsedTime, "cuEventElapsedTime") && TSR_SYM(cu, eventDestroy, "cuEventDestroy_v2") &&
              TSR_SYM(cu, getErrorString, "cuGetErrorString") && cu.init(0) == 0;
    if (cu.lib && !(TSR_SYM(cu, tensorMapEncodeTiled, "cuTensorMapEncodeTiled"))) cu.tensorMapEncodeTiled = NULL;
    if (cu.lib && !(TSR_SYM(cu, memsetD8Async, "cuMemsetD8Async") && TSR_SYM(cu, memsetD32Async, "cuMemsetD32Async") &&
                    TSR_SYM(cu, memcpy2DAsync, "cuMemcpy2DAsync_v2")))
      cu.memsetD8Async = NULL;
  }
  int ok = cu.ok;
  pthread_mutex_unlock(&tsr_lock);
  if (!ok)
    tsr_message(cu.lib ? "the CUDA driver has no usable device (cuInit failed or an entry point is missing)"
                       : "no CUDA driver on this machine (libcuda.so.1 not found)");
  return ok;
}

static tessera_status cu_fail(CUres r, const char* what) {
  const char* s = NULL;
  if (cu.getErrorString) cu.getErrorString(r, &s);
  tsr_message("%s: %s (CUDA error %d)", what, s ? s : "unknown", r);
  return r == 2 ? TESSERA_ERR_MEMORY : TESSERA_ERR_DEVICE;  /* CUDA_ERROR_OUT_OF_MEMORY */
}

/* The device's primary context, retained once per device for the process (a retain per call
 * raised its reference count on every launch), made current on the calling thread. */
#define TSR_CU_DEVICES 64
static void* cu_contexts[TSR_CU_DEVICES];

static tessera_status cu_context(int device) {
  int dev = 0;
  void* ctx = NULL;
  CUres r = 0;
  if (device < 0 || device >= TSR_CU_DEVICES || cu.deviceGet(&dev, device) != 0) {
    tsr_message("no CUDA device %d", device);
    return TESSERA_ERR_UNSUPPORTED;
  }
  pthread_mutex_lock(&tsr_lock);
  if (!cu_contexts[device] && (r = cu.primaryCtxRetain(&ctx, dev)) == 0) cu_contexts[device] = ctx;
  ctx = cu_contexts[device];
  pthread_mutex_unlock(&tsr_lock);
  if (r == 0) r = cu.ctxSetCurrent(ctx);
  return r == 0 ? TESSERA_OK : cu_fail(r, "CUDA context");
}

/* A device's arch, asked of the driver once per device (every stream launch checks its kernel
 * against it: three driver queries a launch before) and kept, one text per device. */
static char cu_archs[TSR_CU_DEVICES][16];

const char* tsr_cuda_arch(int device) {
  if (!cu_open()) return NULL;
  if (device >= 0 && device < TSR_CU_DEVICES) {
    pthread_mutex_lock(&tsr_lock);
    const int known = cu_archs[device][0] != 0;
    pthread_mutex_unlock(&tsr_lock);
    if (known) return cu_archs[device];
  }
  int dev = 0, major = 0, minor = 0;
  if (cu.deviceGet(&dev, device) != 0 || cu.deviceGetAttribute(&major, 75, dev) != 0 ||
      cu.deviceGetAttribute(&minor, 76, dev) != 0) {  /* COMPUTE_CAPABILITY_MAJOR / _MINOR */
    tsr_message("no CUDA device %d", device);
    return NULL;
  }
  if (device < 0 || device >= TSR_CU_DEVICES) {
    snprintf(cu_arch_text, sizeof cu_arch_text, "sm_%d%d", major, minor);
    return cu_arch_text;
  }
  pthread_mutex_lock(&tsr_lock);
  snprintf(cu_archs[device], sizeof cu_archs[device], "sm_%d%d", major, minor);
  pthread_mutex_unlock(&tsr_lock);
  return cu_archs[device];
}

static tessera_status cu_alloc(tsr_dev* d, uint64_t* p, size_t n) {
  (void)d;
  CUptr x = 0;
  CUres r = cu.memAlloc(&x, n ? n : 1);
  *p = x;
  return r == 0 ? TESSERA_OK : cu_fail(r, "cuMemAlloc");
}
static void cu_release(tsr_dev* d, uint64_t p) { (void)d; cu.memFree(p); }
static tessera_status cu_upload(tsr_dev* d, uint64_t dst, const void* src, size_t n) {
  (void)d;
  CUres r = cu.memcpyHtoD(dst, src, n);
  return r == 0 ? TESSERA_OK : cu_fail(r, "cuMemcpyHtoD");
}
static tessera_status cu_download(tsr_dev* d, void* dst, uint64_t src, size_t n) {
  (void)d;
  CUres r = cu.memcpyDtoH(dst, src, n);
  return r == 0 ? TESSERA_OK : cu_fail(r, "cuMemcpyDtoH");
}
static tessera_status cu_zero(tsr_dev* d, uint64_t dst, size_t n) {
  (void)d;
  CUres r = cu.memsetD8(dst, 0, n);
  return r == 0 ? TESSERA_OK : cu_fail(r, "cuMemsetD8");
}
/* cuTensorMapEncodeTiled as codegen/nvidia/gpu_runner_cuda.cpp calls it: interleave none, the swizzle
 * (NONE 0, 32B 1, 64B 2, 128B 3), L2 promotion 256B (3), out-of-bounds elements read as zeros. */
static tessera_status cu_encode_map(tsr_dev* d, const tsr_gpu_arg* a, uint64_t global, void* out) {
  (void)d;
  unsigned long long dims[3] = {0, 0, 0}, strides[2] = {0, 0};
  unsigned box[3] = {0, 0, 0}, elementStrides[3] = {1, 1, 1};
  const int swizzle = a->map_swizzle_bytes == 128 ? 3 : a->map_swizzle_bytes == 64 ? 2 : a->map_swizzle_bytes == 32 ? 1 : 0;
  if (a->map_rank < 1 || a->map_rank > 3) {
    tsr_message("a tensor map of rank %d", a->map_rank);
    return TESSERA_ERR_ARGUMENT;
  }
  for (int i = 0; i < a->map_rank; ++i) {
    dims[i] = (unsigned long long)a->map_dims[i];
    box[i] = (unsigned)a->map_box[i];
    if (i > 0) strides[i - 1] = (unsigned long long)a->map_strides[i - 1];
  }
  CUres r = cu.tensorMapEncodeTiled(out, a->map_type, (unsigned)a->map_rank, (void*)(uintptr_t)global, dims, strides, box,
                                    elementStrides, 0, swizzle, 3, 0);
  return r == 0 ? TESSERA_OK : cu_fail(r, "cuTensorMapEncodeTiled");
}

static tessera_status cu_launch(tsr_dev* d, void* fn, const tsr_gpu* g, void** params, float* ms) {
  (void)d;
  void *start = NULL, *stop = NULL;
  CUres r = cu.eventCreate(&start, 0);
  if (r == 0) r = cu.eventCreate(&stop, 0);
  if (r == 0) r = cu.eventRecord(start, NULL);
  if (r == 0)
    r = cu.launchKernel(fn, (unsigned)g->grid[0], (unsigned)g->grid[1], (unsigned)g->grid[2], (unsigned)g->block[0],
                        (unsigned)g->block[1], (unsigned)g->block[2], (unsigned)g->dyn_shared, NULL, params, NULL);
  if (r == 0) r = cu.eventRecord(stop, NULL);
  if (r == 0) r = cu.eventSynchronize(stop);
  if (r == 0) r = cu.eventElapsedTime(ms, start, stop);
  if (start) cu.eventDestroy(start);
  if (stop) cu.eventDestroy(stop);
  return r == 0 ? TESSERA_OK : cu_fail(r, "CUDA kernel launch");
}

/* The cubin when the device is the kernel's arch, else the PTX (JIT-compiled by the driver). */
static tessera_status cu_function(const tessera_kernel* k, int device, void** fn) {
  const char* arch = tsr_cuda_arch(device);
  if (!arch) return TESSERA_ERR_UNSUPPORTED;
  size_t an = strlen(arch);
  int cubin = strcmp(k->arch, arch) == 0 || (strncmp(k->arch, arch, an) == 0 && strcmp(k->arch + an, "a") == 0);
  int want = atoi(arch + 3), have = atoi(k->arch + 3);
  if (!cubin && !(k->gpu->ptx && k->gpu->ptx_portable && have <= want)) {
    tsr_message("%s was compiled for %s; CUDA device %d is %s%s", k->name, k->arch, device, arch,
                k->gpu->ptx_portable ? " (older: its PTX cannot run there)" : " (arch-specific code, no portable PTX)");
    return TESSERA_ERR_UNSUPPORTED;
  }
  int idx = tsr_index_of(k);
  pthread_mutex_lock(&tsr_lock);
  tsr_loaded* slot = tsr_slots(&cu_loaded);
  tessera_status st = TESSERA_OK;
  if (!slot) {
    st = TESSERA_ERR_MEMORY;
    tsr_message("out of host memory");
  } else if (slot[idx].state != 1 || slot[idx].device != device) {
    void *mod = NULL, *f = NULL;
    CUres r = cu.moduleLoadData(&mod, cubin ? (const void*)k->gpu->binary : (const void*)k->gpu->ptx);
    if (r == 0) r = cu.moduleGetFunction(&f, mod, k->gpu->symbol);
    /* past 48 KB of shared memory, static included, a function must opt in
       (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8): any dynamic size opts in (always legal;
       48 KB dynamic + 1 KB static failed the launch on an H200) */
    if (r == 0 && k->gpu->dyn_shared > 0) r = cu.funcSetAttribute(f, 8, (int)k->gpu->dyn_shared);
    if (r != 0) {
      st = cu_fail(r, cubin ? "cuModuleLoadData (cubin)" : "cuModuleLoadData (PTX JIT)");
    } else {
      slot[idx].module = mod;
      slot[idx].function = f;
      slot[idx].device = device;
      slot[idx].state = 1;
    }
  }
  if (st == TESSERA_OK) *fn = slot[idx].function;
  pthread_mutex_unlock(&tsr_lock);
  return st;
}

static tessera_status cu_run(const tessera_kernel* k, void* const* buffers, const int64_t* sizes, int device, float* elapsed_ms) {
  tessera_status st = tsr_check_buffers(k, buffers, 0);
  if (st != TESSERA_OK) return st;
  if (k->vendor != TSR_NVIDIA || !k->gpu) {
    tsr_message("%s is not an NVIDIA kernel (target %s)", k->name, k->target);
    return TESSERA_ERR_ARGUMENT;
  }
  if (k->runtime_m && !sizes) {
    tsr_message("%s is shape-generic (M %lld..%lld): run it with tessera_run_dims and the shape", k->name, (long long)k->m_lo,
                (long long)k->m_hi);
    return TESSERA_ERR_ARGUMENT;
  }
  if (!cu_open()) return TESSERA_ERR_UNSUPPORTED;
  if ((st = cu_context(device)) != TESSERA_OK) return st;
  void* fn = NULL;
  if ((st = cu_function(k, device, &fn)) != TESSERA_OK) return st;
  tsr_dev d = {cu_alloc, cu_release, cu_upload, cu_download, cu_zero, cu_launch, cu.tensorMapEncodeTiled ? cu_encode_map : NULL};
  return tsr_wrapper_run(&d, k, fn, buffers, sizes, elapsed_ms);
}

tessera_status tessera_cuda_run(const tessera_kernel* k, void* const* buffers, int device, float* elapsed_ms) {
  return cu_run(k, buffers, NULL, device, elapsed_ms);
}

/* ---- CUDA on the caller's stream and device memory ---- */

typedef struct tsr_memcpy2d { /* CUDA_MEMCPY2D */
  size_t srcXInBytes, srcY;
  int srcMemoryType;
  const void* srcHost;
  CUptr srcDevice;
  void* srcArray;
  size_t srcPitch;
  size_t dstXInBytes, dstY;
  int dstMemoryType;
  void* dstHost;
  CUptr dstDevice;
  void* dstArray;
  size_t dstPitch;
  size_t WidthInBytes, Height;
} tsr_memcpy2d;

static tessera_status cu_copy2d(CUptr dst, size_t dpitch, CUptr src, size_t spitch, size_t width, size_t height, void* stream) {
  tsr_memcpy2d c;
  memset(&c, 0, sizeof c);
  c.srcMemoryType = c.dstMemoryType = 2; /* CU_MEMORYTYPE_DEVICE */
  c.srcDevice = src, c.srcPitch = spitch, c.dstDevice = dst, c.dstPitch = dpitch, c.WidthInBytes = width, c.Height = height;
  CUres r = cu.memcpy2DAsync(&c, stream);
  return r == 0 ? TESSERA_OK : cu_fail(r, "cuMemcpy2DAsync");
}

static tessera_status cu_zero_async(CUptr dst, size_t n, void* stream) {
  CUres r = cu.memsetD8Async(dst, 0, n, stream);
  return r == 0 ? TESSERA_OK : cu_fail(r, "cuMemsetD8Async");
}

/* Writes n bytes (a multiple of 4) of host data as 32-bit memsets, one per run of equal words:
 * the values live in the stream's operations, not in host memory a captured graph would read later. */
static tessera_status cu_words_async(CUptr dst, const void* src, size_t n, void* stream) {
  const unsigned char* b = (const unsigned char*)src;
  for (size_t i = 0; i < n / 4;) {
    unsigned w, x;
    memcpy(&w, b + 4 * i, 4);
    size_t j = i + 1;
    while (j < n / 4 && (memcpy(&x, b + 4 * j, 4), x == w)) ++j;
    CUres r = cu.memsetD32Async(dst + 4 * i, w, j - i, stream);
    if (r != 0) return cu_fail(r, "cuMemsetD32Async");
    i = j;
  }
  return TESSERA_OK;
}

/* tsr_pack on the device: zero the packed copy, then copy each slice's rows (transposed: one
 * strided copy per row or column of the smaller side). */
static tessera_status cu_pack_async(const tsr_gpu_arg* a, CUptr src, CUptr dst, void* stream) {
  const size_t es = (size_t)a->elem_bytes;
  tessera_status st = cu_zero_async(dst, tsr_arg_bytes(a), stream);
  for (int64_t b = 0; b < tsr_slices(a) && st == TESSERA_OK; ++b) {
    CUptr d = dst + (CUptr)(b * a->prows * a->pcols) * es, sb = src + (CUptr)(b * a->rows * a->cols) * es;
    if (!a->transposed) {
      st = cu_copy2d(d, (size_t)a->pcols * es, sb, (size_t)a->cols * es, (size_t)a->cols * es, (size_t)a->rows, stream);
    } else if (a->rows <= a->cols) {
      for (int64_t r = 0; r < a->rows && st == TESSERA_OK; ++r)  /* packed row r: column r of the stored [cols][rows] */
        st = cu_copy2d(d + (CUptr)(r * a->pcols) * es, es, sb + (CUptr)r * es, (size_t)a->rows * es, es, (size_t)a->cols, stream);
    } else {
      for (int64_t c = 0; c < a->cols && st == TESSERA_OK; ++c)  /* packed column c: stored row c */
        st = cu_copy2d(d + (CUptr)c * es, (size_t)a->pcols * es, sb + (CUptr)(c * a->rows) * es, es, es, (size_t)a->rows, stream);
    }
  }
  return st;
}

/* The workspace offset of each argument that is not a user tensor (256-byte aligned); the total. */
static size_t tsr_workspace_layout(const tsr_gpu* g, size_t* offsets) {
  size_t total = 0;
  for (int i = 0; i < g->num_args; ++i) {
    if (offsets) offsets[i] = total;
    if (g->args[i].kind != TSR_ARG_TENSOR) total += (tsr_arg_bytes(&g->args[i]) + 255) / 256 * 256;
  }
  return total;
}

tessera_status tsr_cuda_workspace(const tessera_kernel* k, const int64_t* sizes, size_t* bytes) {
  tsr_gpu gm;
  tsr_gpu_arg* margs = NULL;
  if (k->vendor != TSR_NVIDIA || !k->gpu) {
    tsr_message("%s is not an NVIDIA kernel (target %s)", k->name, k->target);
    return TESSERA_ERR_ARGUMENT;
  }
  if (tsr_launch_at(k, k->runtime_m ? sizes[0] : 0, &gm, &margs) != TESSERA_OK) return TESSERA_ERR_MEMORY;
  *bytes = tsr_workspace_layout(&gm, NULL);
  free(margs);
  return TESSERA_OK;
}

/* Whether argument `a` is a transposed copy of its user tensor the caller may make instead (the
 * stream path's min(rows, cols) strided copies per slice): the slices, one per batch of the
 * launches when the operand has a batch stride, times the slices of one launch; 0 when it is not. */
static int64_t tsr_transposed_slices(const tsr_gpu* g, const tsr_gpu_arg* a) {
  if (a->kind != TSR_ARG_PACKED || !a->transposed || a->tensor < 0 || a->rows_follow_m) return 0;
  const int64_t per = tsr_slices(a), launches = g->batches > 1 && a->batch_stride ? g->batches : 1;
  if (launches > 1 && a->batch_stride != a->rows * a->cols * per) return 0; /* not consecutive [cols][rows] slices */
  if (launches > 1 && (per * a->prows * a->pcols * a->elem_bytes) % 16) return 0; /* a launch's slices 16-byte aligned */
  return launches * per;
}

tessera_status tsr_cuda_transposed(const tessera_kernel* k, const int64_t* sizes, int tensor, int64_t* layout) {
  tsr_gpu gm;
  tsr_gpu_arg* margs = NULL;
  if (k->vendor != TSR_NVIDIA || !k->gpu) {
    tsr_message("%s is not an NVIDIA kernel (target %s)", k->name, k->target);
    return TESSERA_ERR_ARGUMENT;
  }
  if (tensor < 0 || tensor >= k->num_inputs + k->num_outputs) {
    tsr_message("%s has no tensor %d (it has %d)", k->name, tensor, k->num_inputs + k->num_outputs);
    return TESSERA_ERR_ARGUMENT;
  }
  if (tsr_launch_at(k, k->runtime_m ? sizes[0] : 0, &gm, &margs) != TESSERA_OK) return TESSERA_ERR_MEMORY;
  memset(layout, 0, 5 * sizeof *layout);
  for (int i = 0; i < gm.num_args; ++i) {
    const tsr_gpu_arg* a = &gm.args[i];
    const int64_t n = a->tensor == tensor ? tsr_transposed_slices(&gm, a) : 0;
    if (n > 0) {
      layout[0] = n, layout[1] = a->rows, layout[2] = a->cols, layout[3] = a->prows, layout[4] = a->pcols;
      break;
    }
  }
  free(margs);
  return TESSERA_OK;
}

/* The host wrapper's steps (tsr_wrapper_run) on device buffers, every one enqueued on `stream`;
 * packed[t] (when given and not NULL): user tensor t already transposed by the caller, read in
 * place of the transposed copies. */
tessera_status tsr_cuda_stream_run(const tessera_kernel* k, void* const* buffers, void* const* packed, const int64_t* sizes,
                                   void* workspace, void* stream, int device) {
  tessera_status st = tsr_check_buffers(k, buffers, 0);
  if (st != TESSERA_OK) return st;
  if (k->vendor != TSR_NVIDIA || !k->gpu) {
    tsr_message("%s is not an NVIDIA kernel (target %s)", k->name, k->target);
    return TESSERA_ERR_ARGUMENT;
  }
  if (!cu_open()) return TESSERA_ERR_UNSUPPORTED;
  if (!cu.memsetD8Async) {
    tsr_message("the CUDA driver lacks the stream entry points (cuMemsetD8Async, cuMemsetD32Async, cuMemcpy2DAsync_v2)");
    return TESSERA_ERR_UNSUPPORTED;
  }
  if ((st = cu_context(device)) != TESSERA_OK) return st;
  void* fn = NULL;
  if ((st = cu_function(k, device, &fn)) != TESSERA_OK) return st;
  const int64_t m = k->runtime_m ? sizes[0] : 0;
  int64_t sz[3] = {m, sizes[1], sizes[2]};
  tsr_gpu gm;
  tsr_gpu_arg* margs = NULL;
  if (tsr_launch_at(k, m, &gm, &margs) != TESSERA_OK) return TESSERA_ERR_MEMORY;
  const tsr_gpu* g = &gm;
  size_t* offs = calloc((size_t)g->num_args + 1, sizeof *offs);
  CUptr* ptr = calloc((size_t)g->num_args + 1, sizeof *ptr);
  CUptr* vals = calloc((size_t)g->num_params + 1, sizeof *vals);
  void** params = calloc((size_t)g->num_params + 1, sizeof *params);
  const CUptr ws = (CUptr)(uintptr_t)workspace;
  if (!offs || !ptr || !vals || !params) {
    tsr_message("%s: out of host memory", k->name);
    st = TESSERA_ERR_MEMORY;
  } else if (tsr_workspace_layout(g, offs) && (!workspace || ws % 256)) {
    tsr_message("%s: needs a 256-byte aligned device workspace of %zu bytes (tessera_cuda_workspace_bytes)", k->name,
                tsr_workspace_layout(g, NULL));
    st = TESSERA_ERR_ARGUMENT;
  }
  for (int64_t b = 0; b < g->batches && st == TESSERA_OK; ++b) {
    for (int i = 0; i < g->num_args && st == TESSERA_OK; ++i) {
      const tsr_gpu_arg* a = &g->args[i];
      const CUptr off = a->tensor >= 0 ? (CUptr)(b * a->batch_stride) * (CUptr)k->tensors[a->tensor].elem_bytes : 0;
      const CUptr user = a->tensor >= 0 ? (CUptr)(uintptr_t)buffers[a->tensor] + off : 0;
      ptr[i] = a->kind == TSR_ARG_TENSOR ? user : ws + offs[i];
      const void* given = packed && a->tensor >= 0 && tsr_transposed_slices(g, a) ? packed[a->tensor] : NULL;
      if (given && (uintptr_t)given % 16) { /* the kernel's vector and TMA reads need 16-byte alignment */
        tsr_message("%s: the transposed copy of tensor %d is not 16-byte aligned", k->name, a->tensor);
        st = TESSERA_ERR_ARGUMENT;
        break;
      }
      if (given) /* the caller's transposed copy: this launch's slices */
        ptr[i] = (CUptr)(uintptr_t)given +
                 (CUptr)((a->batch_stride ? b : 0) * tsr_slices(a) * a->prows * a->pcols) * (CUptr)a->elem_bytes;
      else if (a->kind == TSR_ARG_TENSOR && a->zero_first)
        st = cu_zero_async(ptr[i], (size_t)(a->rows * a->cols) * (size_t)a->elem_bytes, stream);
      else if (a->kind == TSR_ARG_WORKSPACE)
        st = cu_zero_async(ptr[i], tsr_arg_bytes(a), stream);
      else if (a->kind == TSR_ARG_PACKED)
        st = cu_pack_async(a, user, ptr[i], stream);
      else if (a->kind == TSR_ARG_SIZES)
        st = cu_words_async(ptr[i], sz, sizeof sz, stream);
    }
    for (int i = 0; i < g->num_args && st == TESSERA_OK; ++i) {  /* tensor maps hold the others' addresses */
      const tsr_gpu_arg* a = &g->args[i];
      unsigned char map[128] __attribute__((aligned(64)));
      if (a->kind != TSR_ARG_TENSOR_MAP) continue;
      if (a->map_of < 0 || a->map_of >= g->num_args || g->args[a->map_of].kind == TSR_ARG_TENSOR_MAP || !cu.tensorMapEncodeTiled) {
        tsr_message("%s: a tensor map over launch argument %d cannot be made here (CUDA 12+, sm_90)", k->name, a->map_of);
        st = TESSERA_ERR_UNSUPPORTED;
        break;
      }
      memset(map, 0, sizeof map);
      st = cu_encode_map(NULL, a, ptr[a->map_of], map);
      if (st == TESSERA_OK) st = cu_words_async(ptr[i], map, sizeof map, stream);
    }
    if (st != TESSERA_OK) break;
    for (int p = 0; p < g->num_params; ++p) {
      vals[p] = ptr[g->params[p]];
      params[p] = &vals[p];
    }
    CUres r = cu.launchKernel(fn, (unsigned)g->grid[0], (unsigned)g->grid[1], (unsigned)g->grid[2], (unsigned)g->block[0],
                              (unsigned)g->block[1], (unsigned)g->block[2], (unsigned)g->dyn_shared, stream, params, NULL);
    if (r != 0) st = cu_fail(r, "CUDA kernel launch");
    for (int i = 0; i < g->num_args && st == TESSERA_OK; ++i) {
      const tsr_gpu_arg* a = &g->args[i];
      if (a->kind != TSR_ARG_WORKSPACE || !a->copy_back) continue;
      const size_t es = (size_t)a->elem_bytes;
      const CUptr user = (CUptr)(uintptr_t)buffers[a->tensor] + (CUptr)(b * a->batch_stride) * (CUptr)k->tensors[a->tensor].elem_bytes;
      st = cu_copy2d(user, (size_t)a->cols * es, ptr[i], (size_t)a->pcols * es, (size_t)a->cols * es, (size_t)a->rows, stream);
    }
  }
  free(margs);
  free(offs);
  free(ptr);
  free(vals);
  free(params);
  return st;
}

/* ---- HIP runtime (tessera_runtime_hip.inc) ---- */

#include "tessera_runtime_hip.inc"

tessera_status tsr_gpu_run_sizes(const tessera_kernel* k, void* const* buffers, const int64_t* sizes) {
  if (k->vendor != TSR_NVIDIA) {
    tsr_message("%s: shape-generic kernels run on NVIDIA devices only", k->name);
    return TESSERA_ERR_UNSUPPORTED;
  }
  return cu_run(k, buffers, sizes, 0, NULL);
}

#endif /* TESSERA_BUNDLE_NO_GPU */
