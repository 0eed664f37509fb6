/* Owns the host half of a bundle's runtime: finding a kernel by family or name, shape, dtype and
 * arch (and saying which one was chosen and why), describing kernels and their tensors, the CPU
 * ISA-level check and the direct call of host kernels. Plain C11, no dependencies. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera_bundle_internal.h"

static _Thread_local char tsr_msg[1024];
static _Thread_local tessera_dispatch_info tsr_dispatch;

void tsr_message(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(tsr_msg, sizeof tsr_msg, fmt, ap);
  va_end(ap);
}

const char* tessera_last_message(void) { return tsr_msg; }

const char* tessera_status_name(tessera_status s) {
  switch (s) {
    case TESSERA_OK: return "ok";
    case TESSERA_ERR_NOT_FOUND: return "not found";
    case TESSERA_ERR_ARGUMENT: return "bad argument";
    case TESSERA_ERR_UNSUPPORTED: return "unsupported here";
    case TESSERA_ERR_DEVICE: return "device error";
    case TESSERA_ERR_MEMORY: return "out of memory";
  }
  return "unknown status";
}

int tessera_kernel_count(void) { return tsr_kernel_count; }

const tessera_kernel* tessera_kernel_at(int i) { return i >= 0 && i < tsr_kernel_count ? &tsr_kernels[i] : NULL; }

int tsr_index_of(const tessera_kernel* k) {
  if (!k || k < tsr_kernels || k >= tsr_kernels + tsr_kernel_count) return -1;
  return (int)(k - tsr_kernels);
}

/* ---- the CPU's x86-64 ISA level (what host objects were compiled for) ---- */

static int tsr_cpu_runs(const char* arch) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  int v2 = __builtin_cpu_supports("sse3") && __builtin_cpu_supports("ssse3") && __builtin_cpu_supports("sse4.1") &&
           __builtin_cpu_supports("sse4.2") && __builtin_cpu_supports("popcnt");
  int v3 = v2 && __builtin_cpu_supports("avx") && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
           __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2");
  int v4 = v3 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  if (strcmp(arch, "x86-64") == 0 || strcmp(arch, "x86-64-v1") == 0) return 1;
  if (strcmp(arch, "x86-64-v2") == 0) return v2;
  if (strcmp(arch, "x86-64-v3") == 0) return v3;
  if (strcmp(arch, "x86-64-v4") == 0) return v4;
  return 0;
#else
  (void)arch;
  return 0;
#endif
}

/* Higher is better among host levels this CPU runs. */
static int tsr_level_rank(const char* arch) {
  size_t n = strlen(arch);
  if (n >= 2 && arch[n - 2] == 'v' && arch[n - 1] >= '1' && arch[n - 1] <= '9') return arch[n - 1] - '0';
  return 1;
}

/* ---- finding a kernel ---- */

static int tsr_parse_shape(const char* text, int64_t* dims, int* rank) {
  int r = 0;
  const char* p = text;
  if (!p || !*p) return 0;
  while (*p) {
    if (r == TESSERA_MAX_RANK) return 0;
    char* end = NULL;
    long long v = strtoll(p, &end, 10);
    if (end == p || v <= 0) return 0;
    dims[r++] = (int64_t)v;
    p = end;
    if (*p == 'x' || *p == 'X' || *p == ',') {
      ++p;
      if (!*p) return 0;
    } else if (*p) {
      return 0;
    }
  }
  *rank = r;
  return 1;
}

static int tsr_same_dims(const tessera_kernel* k, const int64_t* dims, int rank) {
  if (k->rank != rank) return 0;
  for (int i = 0; i < rank; ++i)
    if (k->dims[i] != dims[i]) return 0;
  return 1;
}

/* sm_XY -> XY (0 when not an NVIDIA arch). */
static int tsr_sm_number(const char* arch) {
  if (strncmp(arch, "sm_", 3) != 0) return 0;
  return atoi(arch + 3);
}

/* How well kernel `k` fits the arch asked for: 0 = not at all, higher = better. `device` is the
 * arch of the CUDA/HIP device for "cuda"/"hip". */
static int tsr_arch_fit(const tessera_kernel* k, const char* arch, const char* device) {
  size_t dn = device ? strlen(device) : 0;
  if (strcmp(arch, "host") == 0) return k->vendor == TSR_HOST && tsr_cpu_runs(k->arch) ? 10 + tsr_level_rank(k->arch) : 0;
  if (strcmp(arch, "cuda") == 0) {
    if (k->vendor != TSR_NVIDIA || !device) return 0;
    if (strcmp(k->arch, device) == 0) return 1000;  /* the cubin itself */
    if (strncmp(k->arch, device, dn) == 0 && strcmp(k->arch + dn, "a") == 0) return 1001;  /* sm_90a on sm_90 */
    int want = tsr_sm_number(device), have = tsr_sm_number(k->arch);
    if (k->gpu && k->gpu->ptx && k->gpu->ptx_portable && have && have <= want) return have;  /* PTX, JIT-compiled */
    return 0;
  }
#ifndef TESSERA_BUNDLE_NO_GPU
  if (strcmp(arch, "hip") == 0) return k->vendor == TSR_AMD ? 1000 : 0;  /* and its hsaco loads: see below */
#endif
  return strcmp(k->arch, arch) == 0 || strcmp(k->target, arch) == 0 ? 1 : 0;
}

static void tsr_describe_choice(const tessera_kernel* k, int matches) {
  char t[96] = "no time recorded";
  if (strcmp(k->time_kind, "measured") == 0)
    snprintf(t, sizeof t, "measured %.4g us median", k->time_us);
  else if (strcmp(k->time_kind, "estimated") == 0)
    snprintf(t, sizeof t, "ESTIMATED %.4g us by %s (%s-bound), not measured", k->time_us, k->estimator, k->bound);
  char why[256];
  if (strcmp(k->source, "exact") == 0)
    snprintf(why, sizeof why, "config tuned at this shape, %s", t);
  else if (strcmp(k->source, "nearest") == 0)
    snprintf(why, sizeof why, "config tuned at %s (nearest tuned shape; legal at %s by the space rules), %s there",
             k->tuned_shape, k->shape, t);
  else
    snprintf(why, sizeof why, "untuned: no tuned config was found when the bundle was built, the space's default");
  tsr_message("%s %s %s on %s (%s): %s; config %s%s", k->family, k->shape, k->dtype, k->target, k->arch, why, k->config,
              matches > 1 ? "; several kernels match, pass a kernel name to choose" : "");
}

/* ---- shape ranges (shape-generic kernels) ---- */

/* Whether `dims` has the rank and the fixed dimensions (those outside `mask`, bit i: dims[i]) of a
 * range's shape `fixed`; *size gets the size along the range (its first dimension in `mask`) and
 * *apart is set when the range's dimensions differ (attention's seq_q and seq_kv, which a range
 * moves together). */
static int tsr_range_shape(int frank, const int64_t* fixed, unsigned mask, const int64_t* dims, int rank, int64_t* size,
                           int* apart) {
  if (frank != rank || mask == 0) return 0;
  int first = 1;
  *apart = 0;
  for (int i = 0; i < rank; ++i) {
    if (!(mask & (1u << i))) {
      if (fixed[i] != dims[i]) return 0;
    } else if (first) {
      *size = dims[i];
      first = 0;
    } else if (dims[i] != *size) {
      *apart = 1;
    }
  }
  return 1;
}

/* The flag of `tessera tune` that gives a range of dimension `dim`. */
static const char* tsr_dim_flag(const char* dim) {
  if (strcmp(dim, "rows") == 0) return "--rows";
  if (strcmp(dim, "seq") == 0) return "--seq";
  return "--m";
}

/* The kernel of the bucket holding the shape's size among the ranges matching family, dtype, arch
 * and the fixed dims; NULL with a message when none does (`near` is set when a range matched all
 * but its size). */
static const tessera_kernel* tsr_find_in_ranges(const char* family, const int64_t* dims, int rank, const char* dtype,
                                                const char* arch, const char* device, int* near) {
  const tsr_range* best = NULL;
  const tsr_bucket* bucket = NULL;
  const tsr_range* missed = NULL;
  int bestFit = 0, apartMiss = 0;
  int64_t size = 0, bestSize = 0, missSize = 0;
  *near = 0;
  char ranges[256] = "";
  size_t used = 0;
  for (int i = 0; i < tsr_range_count; ++i) {
    const tsr_range* r = &tsr_ranges[i];
    int apart = 0;
    if (strcmp(r->family, family) != 0 && strcmp(r->name, family) != 0) continue;
    if (strcmp(r->dtype, dtype) != 0 || r->num_buckets <= 0 || !tsr_range_shape(r->rank, r->dims, r->mask, dims, rank, &size, &apart))
      continue;
    int fit = tsr_arch_fit(&tsr_kernels[r->buckets[0].kernel], arch, device);
    if (!fit) continue;
    if (apart || size < r->lo || size > r->hi) {
      *near = 1;
      if (!missed) missed = r, missSize = size, apartMiss = apart;
      if (used + 48 < sizeof ranges)
        used += (size_t)snprintf(ranges + used, sizeof ranges - used, "%s%lld..%lld", used ? ", " : "", (long long)r->lo,
                                 (long long)r->hi);
      continue;
    }
    for (int b = 0; b < r->num_buckets; ++b)
      if (size >= r->buckets[b].lo && size <= r->buckets[b].hi && fit > bestFit) {
        best = r;
        bucket = &r->buckets[b];
        bestFit = fit;
        bestSize = size;
      }
  }
  if (!best) {
    if (*near && apartMiss) {
      /* Only attention's range has two dimensions (seq_q and seq_kv): name the sizes given. */
      char given[64] = "";
      size_t g = 0;
      for (int i = 0; i < rank && g + 24 < sizeof given; ++i)
        if (missed->mask & (1u << i)) g += (size_t)snprintf(given + g, sizeof given - g, "%s%lld", g ? " and " : "", (long long)dims[i]);
      tsr_message("the shape's %s dimensions differ (%s): this bundle's %s %s kernels for this shape serve %s %s with them "
                  "equal (the query and key lengths of attention)", missed->dim, given, family, dtype, missed->dim, ranges);
    } else if (*near) {
      tsr_message("%s=%lld is outside the range of %s this bundle's %s %s kernels for this shape serve (%s); "
                  "tune and bundle a range that holds it (tessera tune %s LO..HI)",
                  missed->dim, (long long)missSize, missed->dim, family, dtype, ranges, tsr_dim_flag(missed->dim));
    }
    return NULL;
  }
  const tessera_kernel* k = &tsr_kernels[bucket->kernel];
  tsr_dispatch.in_range = 1;
  tsr_dispatch.rule = best->name;
  tsr_dispatch.lo = best->lo;
  tsr_dispatch.hi = best->hi;
  tsr_dispatch.bucket = (int)(bucket - best->buckets);
  tsr_dispatch.num_buckets = best->num_buckets;
  tsr_dispatch.bucket_lo = bucket->lo;
  tsr_dispatch.bucket_hi = bucket->hi;
  tsr_dispatch.kernel = k;
  tsr_dispatch.dim = best->dim;
  const char* dn = best->dim;
  tsr_message("%s %s=%lld %s on %s (%s): range %s %lld..%lld of %s, bucket %d of %d (%s %lld..%lld), %s kernel %s; "
              "config %s; run it with tessera_run_dims",
              k->family, dn, (long long)bestSize, k->dtype, k->target, k->arch, dn, (long long)best->lo, (long long)best->hi,
              best->name, tsr_dispatch.bucket, best->num_buckets, dn, (long long)bucket->lo, (long long)bucket->hi,
              k->runtime_m ? "shape-generic" : "fixed-shape", k->name, k->config);
  return k;
}

tessera_status tessera_last_dispatch(tessera_dispatch_info* out) {
  if (!out) return TESSERA_ERR_ARGUMENT;
  *out = tsr_dispatch;
  return TESSERA_OK;
}

const tessera_kernel* tessera_find_dims(const char* family, const int64_t* dims, int rank, const char* dtype,
                                        const char* arch) {
  memset(&tsr_dispatch, 0, sizeof tsr_dispatch);
  if (!family || !dims || rank <= 0 || rank > TESSERA_MAX_RANK || !dtype || !arch) {
    tsr_message("tessera_find: family, shape, dtype and arch are required");
    return NULL;
  }
  const char* device = NULL;
#ifndef TESSERA_BUNDLE_NO_GPU
  if (strcmp(arch, "cuda") == 0 && !(device = tsr_cuda_arch(0))) return NULL;
#endif
  const tessera_kernel* best = NULL;
  int bestFit = 0, matches = 0;
  char others[512] = "";
  size_t used = 0;
  for (int i = 0; i < tsr_kernel_count; ++i) {
    const tessera_kernel* k = &tsr_kernels[i];
    if (k->runtime_m || (k->range_dim && k->range_dim[0])) continue;  /* served through its range (fixed buckets too) */
    if (strcmp(k->family, family) != 0 && strcmp(k->name, family) != 0) continue;
    if (strcmp(k->dtype, dtype) != 0) continue;
    int fit = tsr_arch_fit(k, arch, device);
    if (!fit) continue;
    if (!tsr_same_dims(k, dims, rank)) {
      if (used + strlen(k->shape) + 3 < sizeof others && !strstr(others, k->shape))
        used += (size_t)snprintf(others + used, sizeof others - used, "%s%s", used ? ", " : "", k->shape);
      continue;
    }
#ifndef TESSERA_BUNDLE_NO_GPU
    if (strcmp(arch, "hip") == 0 && !tsr_hip_loads(k, 0)) continue;
#endif
    ++matches;
    if (fit > bestFit) {
      best = k;
      bestFit = fit;
    }
  }
  if (best) {
    tsr_describe_choice(best, matches);
    return best;
  }
  int near = 0;
  const tessera_kernel* ranged = tsr_find_in_ranges(family, dims, rank, dtype, arch, device, &near);
  if (ranged || near) return ranged;
  char want[160];
  size_t w = 0;
  for (int i = 0; i < rank && w < sizeof want - 24; ++i)
    w += (size_t)snprintf(want + w, sizeof want - w, "%s%lld", i ? "x" : "", (long long)dims[i]);
  if (used)
    tsr_message("no %s %s kernel for shape %s on %s in this bundle (it has %s); kernels are compiled per shape: "
                "add the shape to the bundle's kernel list and rebuild it",
                family, dtype, want, arch, others);
  else
    tsr_message("no %s %s kernel for %s in this bundle%s", family, dtype, arch,
                strcmp(arch, "host") == 0 ? " (or this CPU lacks the ISA level its host kernels need)" : "");
  return NULL;
}

const tessera_kernel* tessera_find(const char* family, const char* shape, const char* dtype, const char* arch) {
  int64_t dims[TESSERA_MAX_RANK];
  int rank = 0;
  if (!tsr_parse_shape(shape, dims, &rank)) {
    tsr_message("tessera_find: bad shape '%s' (expected e.g. 1024x1024x512)", shape ? shape : "(null)");
    return NULL;
  }
  return tessera_find_dims(family, dims, rank, dtype, arch);
}

/* ---- describing kernels ---- */

tessera_status tessera_info(const tessera_kernel* k, tessera_kernel_info* out) {
  if (tsr_index_of(k) < 0 || !out) {
    tsr_message("tessera_info: not a kernel of this bundle");
    return TESSERA_ERR_ARGUMENT;
  }
  out->name = k->name;
  out->family = k->family;
  out->shape = k->shape;
  out->dtype = k->dtype;
  out->target = k->target;
  out->arch = k->arch;
  out->config = k->config;
  out->source = k->source;
  out->tuned_shape = k->tuned_shape;
  out->time_kind = k->time_kind;
  out->time_us = k->time_us;
  out->estimator = k->estimator;
  out->bound = k->bound;
  out->num_inputs = k->num_inputs;
  out->num_outputs = k->num_outputs;
  out->runtime_m = k->runtime_m;
  out->m_lo = k->m_lo;
  out->m_hi = k->m_hi;
  out->range_dim = k->range_dim ? k->range_dim : "";
  return TESSERA_OK;
}

int tessera_num_tensors(const tessera_kernel* k) { return tsr_index_of(k) < 0 ? 0 : k->num_inputs + k->num_outputs; }

tessera_status tessera_tensor(const tessera_kernel* k, int i, tessera_tensor_info* out) {
  if (!out || i < 0 || i >= tessera_num_tensors(k)) {
    tsr_message("tessera_tensor: no tensor %d", i);
    return TESSERA_ERR_ARGUMENT;
  }
  const tsr_tensor* t = &k->tensors[i];
  out->name = t->name;
  out->dtype = t->dtype;
  out->is_output = t->is_output;
  out->rank = t->rank;
  size_t n = 1;
  for (int d = 0; d < TESSERA_MAX_RANK; ++d) {
    out->dims[d] = d < t->rank ? t->dims[d] : 0;
    if (d < t->rank) n *= (size_t)t->dims[d];
  }
  out->bytes = n * (size_t)t->elem_bytes;
  return TESSERA_OK;
}

/* ---- running ---- */

tessera_status tsr_check_buffers(const tessera_kernel* k, void* const* buffers, size_t align) {
  if (tsr_index_of(k) < 0) {
    tsr_message("not a kernel of this bundle");
    return TESSERA_ERR_ARGUMENT;
  }
  if (!buffers) {
    tsr_message("%s: no buffers", k->name);
    return TESSERA_ERR_ARGUMENT;
  }
  for (int i = 0; i < k->num_inputs + k->num_outputs; ++i) {
    if (!buffers[i]) {
      tsr_message("%s: buffer %d (%s) is NULL", k->name, i, k->tensors[i].name);
      return TESSERA_ERR_ARGUMENT;
    }
    if (align && ((uintptr_t)buffers[i] % align) != 0) {
      tsr_message("%s: buffer %d (%s) is not %zu-byte aligned", k->name, i, k->tensors[i].name, align);
      return TESSERA_ERR_ARGUMENT;
    }
  }
  return TESSERA_OK;
}

tessera_status tessera_host_call(const tessera_kernel* k, void* const* buffers) {
  tessera_status st = tsr_check_buffers(k, buffers, 64);  /* the entry point assumes 64-byte alignment */
  if (st != TESSERA_OK) return st;
  if (k->vendor != TSR_HOST || !k->host_fn) {
    tsr_message("%s is a %s kernel: use tessera_run, tessera_cuda_run or tessera_hip_run", k->name, k->target);
    return TESSERA_ERR_ARGUMENT;
  }
  if (!tsr_cpu_runs(k->arch)) {
    tsr_message("%s was compiled for %s, which this CPU does not support", k->name, k->arch);
    return TESSERA_ERR_UNSUPPORTED;
  }
  if (k->runtime_m) {
    tsr_message("%s is shape-generic (%s %lld..%lld): run it with tessera_run_dims and the shape", k->name, k->range_dim,
                (long long)k->m_lo, (long long)k->m_hi);
    return TESSERA_ERR_ARGUMENT;
  }
  k->host_fn(buffers);
  return TESSERA_OK;
}

tessera_status tsr_sizes_of(const tessera_kernel* k, const int64_t* dims, int rank, int64_t* sizes) {
  sizes[0] = sizes[1] = sizes[2] = 0;
  if (tsr_index_of(k) < 0 || !dims || rank <= 0 || rank > TESSERA_MAX_RANK) {
    tsr_message("tessera_run_dims: a kernel of this bundle and its shape are required");
    return TESSERA_ERR_ARGUMENT;
  }
  if (!k->runtime_m) {
    if (!tsr_same_dims(k, dims, rank)) {
      tsr_message("%s is compiled for shape %s only", k->name, k->shape);
      return TESSERA_ERR_ARGUMENT;
    }
    return TESSERA_OK;
  }
  if (k->rank != rank) {
    tsr_message("%s: the shape has %d dimensions, the kernel %d", k->name, rank, k->rank);
    return TESSERA_ERR_ARGUMENT;
  }
  int64_t size = 0;
  int apart = 0;
  if (!tsr_range_shape(k->rank, k->dims, k->range_mask, dims, rank, &size, &apart)) {
    tsr_message("%s serves %s %lld..%lld with its other dimensions fixed (%s at %s=%lld)", k->name, k->range_dim,
                (long long)k->m_lo, (long long)k->m_hi, k->shape, k->range_dim, (long long)k->m_hi);
    return TESSERA_ERR_ARGUMENT;
  }
  if (apart) {
    tsr_message("%s serves %s %lld..%lld with the query and key lengths equal", k->name, k->range_dim, (long long)k->m_lo,
                (long long)k->m_hi);
    return TESSERA_ERR_ARGUMENT;
  }
  if (size < k->m_lo || size > k->m_hi) {
    tsr_message("%s: %s=%lld is outside its range %lld..%lld", k->name, k->range_dim, (long long)size, (long long)k->m_lo,
                (long long)k->m_hi);
    return TESSERA_ERR_ARGUMENT;
  }
  /* codegen's RuntimeDims: sizes[0] is M, rows or the query length; a range of two dimensions
   * (attention's) gives the key length too, sizes[2]. A GPU kernel takes them as a launch argument. */
  sizes[0] = size;
  sizes[2] = (k->range_mask & (k->range_mask - 1)) ? size : 0;
  return TESSERA_OK;
}

tessera_status tessera_run_dims(const tessera_kernel* k, const int64_t* dims, int rank, void* const* buffers) {
  int64_t sizes[3];
  tessera_status st = tsr_sizes_of(k, dims, rank, sizes);
  if (st != TESSERA_OK) return st;
  if (!k->runtime_m) return tessera_run(k, buffers);
  if (k->vendor != TSR_HOST) return tsr_gpu_run_sizes(k, buffers, sizes);
  st = tsr_check_buffers(k, buffers, 64);
  if (st != TESSERA_OK) return st;
  if (!tsr_cpu_runs(k->arch)) {
    tsr_message("%s was compiled for %s, which this CPU does not support", k->name, k->arch);
    return TESSERA_ERR_UNSUPPORTED;
  }
  void* args[TSR_MAX_TENSORS + 1];
  int n = k->num_inputs + k->num_outputs;
  if (n > TSR_MAX_TENSORS) {
    tsr_message("%s: too many tensors", k->name);
    return TESSERA_ERR_ARGUMENT;
  }
  for (int i = 0; i < n; ++i) args[i] = buffers[i];
  args[n] = sizes;
  k->host_fn(args);
  return TESSERA_OK;
}

tessera_status tessera_run(const tessera_kernel* k, void* const* buffers) {
  if (tsr_index_of(k) < 0) {
    tsr_message("tessera_run: not a kernel of this bundle");
    return TESSERA_ERR_ARGUMENT;
  }
  if (k->vendor == TSR_HOST) return tessera_host_call(k, buffers);
  if (k->vendor == TSR_NVIDIA) return tessera_cuda_run(k, buffers, 0, NULL);
  return tessera_hip_run(k, buffers, 0, NULL);
}

tessera_status tessera_cuda_workspace_bytes(const tessera_kernel* k, const int64_t* dims, int rank, size_t* bytes) {
  int64_t sizes[3];
  tessera_status st = bytes ? tsr_sizes_of(k, dims, rank, sizes) : TESSERA_ERR_ARGUMENT;
  if (!bytes) tsr_message("tessera_cuda_workspace_bytes: no output");
  return st == TESSERA_OK ? tsr_cuda_workspace(k, sizes, bytes) : st;
}

tessera_status tessera_cuda_launch(const tessera_kernel* k, const int64_t* dims, int rank, void* const* buffers,
                                   void* workspace, void* stream, int device) {
  int64_t sizes[3];
  tessera_status st = tsr_sizes_of(k, dims, rank, sizes);
  return st == TESSERA_OK ? tsr_cuda_stream_run(k, buffers, NULL, sizes, workspace, stream, device) : st;
}

tessera_status tessera_cuda_transposed_operand(const tessera_kernel* k, const int64_t* dims, int rank, int tensor,
                                               int64_t* layout) {
  int64_t sizes[3];
  tessera_status st = layout ? tsr_sizes_of(k, dims, rank, sizes) : TESSERA_ERR_ARGUMENT;
  if (!layout) tsr_message("tessera_cuda_transposed_operand: no output");
  return st == TESSERA_OK ? tsr_cuda_transposed(k, sizes, tensor, layout) : st;
}

tessera_status tessera_cuda_launch_packed(const tessera_kernel* k, const int64_t* dims, int rank, void* const* buffers,
                                          void* const* packed, void* workspace, void* stream, int device) {
  int64_t sizes[3];
  tessera_status st = tsr_sizes_of(k, dims, rank, sizes);
  return st == TESSERA_OK ? tsr_cuda_stream_run(k, buffers, packed, sizes, workspace, stream, device) : st;
}
