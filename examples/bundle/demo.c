/* Runs a tuned GEMM and a tuned attention kernel from an ahead-of-time Tessera bundle, checks
 * both against plain C loops and times them: a deployment with no LLVM, MLIR or Tessera library,
 * only the bundle's C runtime, its kernel table and its host objects.
 *
 *   tessera bundle --kernels kernels.txt --db tessera.db --targets host --out bundle
 *   make -C bundle && cc -O2 demo.c -Ibundle bundle/libtessera_bundle.a $(cat bundle/link.flags) -o demo
 *   ./demo [--gemm MxNxK] [--attention BxHxSxD] [--causal]
 *
 * Exit status: 0 when every kernel that ran was correct, 1 on a wrong result or a failure, 2 on bad
 * arguments. A GPU kernel in the bundle is tried too: without a driver it must fail cleanly. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tessera_bundle.h"

static double now_sec(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Deterministic inputs in [-1, 1). */
static void fill(float* p, size_t n, unsigned seed) {
  unsigned s = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    s = s * 1664525u + 1013904223u;
    p[i] = (float)((s >> 8) * (1.0 / 16777216.0) * 2.0 - 1.0);
  }
}

/* Every tensor of k, 64-byte aligned (what the entry points assume); inputs filled. */
static int alloc_buffers(const tessera_kernel* k, void** bufs, size_t* elems) {
  int n = tessera_num_tensors(k);
  for (int i = 0; i < n; ++i) {
    tessera_tensor_info t;
    if (tessera_tensor(k, i, &t) != TESSERA_OK || strcmp(t.dtype, "f32") != 0) {
      fprintf(stderr, "demo: tensor %d is not f32 (this demo checks f32 kernels)\n", i);
      return 0;
    }
    size_t bytes = (t.bytes + 63) / 64 * 64;
    bufs[i] = aligned_alloc(64, bytes);
    if (!bufs[i]) return 0;
    elems[i] = t.bytes / sizeof(float);
    if (t.is_output) memset(bufs[i], 0xff, t.bytes);  /* NaN: an element never written fails */
    else fill(bufs[i], elems[i], (unsigned)i + 1);
  }
  return 1;
}

static void describe(const char* what, const tessera_kernel* k) {
  tessera_kernel_info info;
  tessera_info(k, &info);
  printf("%s: %s\n  chose: %s\n", what, info.name, tessera_last_message());
}

/* Times `reps` calls; returns the best per-call time in microseconds. */
static double time_calls(const tessera_kernel* k, void** bufs) {
  double best = 1e30;
  for (int r = 0; r < 5; ++r) {
    double t0 = now_sec();
    if (tessera_run(k, bufs) != TESSERA_OK) return -1;
    double dt = (now_sec() - t0) * 1e6;
    if (dt < best) best = dt;
  }
  return best;
}

static int check(const char* what, const float* got, const double* want, size_t n) {
  double max_err = 0, max_ref = 0;
  for (size_t i = 0; i < n; ++i) {
    double e = fabs((double)got[i] - want[i]);
    if (!(e <= max_err)) max_err = e;  /* NaN propagates */
    if (fabs(want[i]) > max_ref) max_ref = fabs(want[i]);
  }
  double rel = max_err / (max_ref > 0 ? max_ref : 1);
  int ok = rel < 1e-4;
  printf("  check: %s, max abs err %.3g (%.3g of the largest value)\n", ok ? "ok" : "WRONG", max_err, rel);
  if (!ok) fprintf(stderr, "demo: %s gave a wrong result\n", what);
  return ok;
}

static int run_gemm(long m, long n, long kk) {
  char shape[96];
  snprintf(shape, sizeof shape, "%ldx%ldx%ld", m, n, kk);
  const tessera_kernel* k = tessera_find("gemm", shape, "f32", "host");
  if (!k) {
    fprintf(stderr, "demo: %s\n", tessera_last_message());
    return 0;
  }
  describe("gemm", k);
  void* bufs[3];
  size_t elems[3];
  if (tessera_num_tensors(k) != 3 || !alloc_buffers(k, bufs, elems)) return 0;
  tessera_status st = tessera_run(k, bufs);
  if (st != TESSERA_OK) {
    fprintf(stderr, "demo: gemm: %s: %s\n", tessera_status_name(st), tessera_last_message());
    return 0;
  }
  const float *A = bufs[0], *B = bufs[1];
  double* ref = calloc((size_t)(m * n), sizeof *ref);
  for (long i = 0; i < m; ++i)
    for (long p = 0; p < kk; ++p) {
      double a = A[i * kk + p];
      for (long j = 0; j < n; ++j) ref[i * n + j] += a * B[p * n + j];
    }
  int ok = check("gemm", bufs[2], ref, elems[2]);
  double us = time_calls(k, bufs);
  printf("  time: %.1f us (best of 5), %.1f GFLOP/s\n", us, 2.0 * m * n * kk / us * 1e-3);
  free(ref);
  for (int i = 0; i < 3; ++i) free(bufs[i]);
  return ok;
}

static int run_attention(long b, long h, long s, long d, int causal) {
  char shape[128];
  snprintf(shape, sizeof shape, "%ldx%ldx%ldx%ldx%ldx%ld", b, h, h, s, s, d);
  /* A causal and a plain kernel share the key shape: pick by name when asked for causal. */
  char name[128];
  snprintf(name, sizeof name, "attention_b%ld_h%ld_s%ld_d%ld%s_f32", b, h, s, d, causal ? "_causal" : "");
  const tessera_kernel* k = tessera_find(name, shape, "f32", "host");
  if (!k) k = tessera_find("attention", shape, "f32", "host");
  if (!k) {
    fprintf(stderr, "demo: %s\n", tessera_last_message());
    return 0;
  }
  describe("attention", k);
  void* bufs[4];
  size_t elems[4];
  if (tessera_num_tensors(k) != 4 || !alloc_buffers(k, bufs, elems)) return 0;
  tessera_status st = tessera_run(k, bufs);
  if (st != TESSERA_OK) {
    fprintf(stderr, "demo: attention: %s: %s\n", tessera_status_name(st), tessera_last_message());
    return 0;
  }
  const float *Q = bufs[0], *K = bufs[1], *V = bufs[2];
  double* ref = calloc(elems[3], sizeof *ref);
  double* p = malloc((size_t)s * sizeof *p);
  const double scale = 1.0 / sqrt((double)d);
  for (long bh = 0; bh < b * h; ++bh)
    for (long i = 0; i < s; ++i) {
      const float* q = Q + (bh * s + i) * d;
      double mx = -1e300, sum = 0;
      long last = causal ? i : s - 1;  /* seq_q == seq_kv: key j is visible when j <= i */
      for (long j = 0; j <= last; ++j) {
        double dot = 0;
        for (long x = 0; x < d; ++x) dot += (double)q[x] * K[(bh * s + j) * d + x];
        p[j] = dot * scale;
        if (p[j] > mx) mx = p[j];
      }
      for (long j = 0; j <= last; ++j) sum += (p[j] = exp(p[j] - mx));
      double* o = ref + (bh * s + i) * d;
      for (long j = 0; j <= last; ++j)
        for (long x = 0; x < d; ++x) o[x] += p[j] / sum * V[(bh * s + j) * d + x];
    }
  int ok = check("attention", bufs[3], ref, elems[3]);
  double us = time_calls(k, bufs);
  printf("  time: %.1f us (best of 5)\n", us);
  free(p);
  free(ref);
  for (int i = 0; i < 4; ++i) free(bufs[i]);
  return ok;
}

/* A GPU kernel of the bundle, if it has one: without a driver it must fail with a status and a
 * message, never crash. */
static int try_gpu(void) {
  for (int i = 0; i < tessera_kernel_count(); ++i) {
    const tessera_kernel* k = tessera_kernel_at(i);
    tessera_kernel_info info;
    tessera_info(k, &info);
    if (strcmp(info.target, "host") == 0) continue;
    void* bufs[16] = {0};
    int n = tessera_num_tensors(k);
    for (int t = 0; t < n && t < 16; ++t) {
      tessera_tensor_info ti;
      tessera_tensor(k, t, &ti);
      bufs[t] = calloc(1, ti.bytes);
    }
    float ms = 0;
    tessera_status st = tessera_run(k, bufs);
    printf("gpu: %s on %s: %s%s%s\n", info.name, info.target, tessera_status_name(st), st ? ": " : "",
           st ? tessera_last_message() : "");
    (void)ms;
    for (int t = 0; t < n && t < 16; ++t) free(bufs[t]);
    return st == TESSERA_OK || st == TESSERA_ERR_UNSUPPORTED;
  }
  return 1;
}

int main(int argc, char** argv) {
  long m = 256, n = 256, kk = 256, b = 1, h = 2, s = 256, d = 64;
  int causal = 0;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--gemm") == 0 && i + 1 < argc) {
      if (sscanf(argv[++i], "%ldx%ldx%ld", &m, &n, &kk) != 3) return fprintf(stderr, "demo: --gemm MxNxK\n"), 2;
    } else if (strcmp(argv[i], "--attention") == 0 && i + 1 < argc) {
      if (sscanf(argv[++i], "%ldx%ldx%ldx%ld", &b, &h, &s, &d) != 4) return fprintf(stderr, "demo: --attention BxHxSxD\n"), 2;
    } else if (strcmp(argv[i], "--causal") == 0) {
      causal = 1;
    } else {
      fprintf(stderr, "usage: demo [--gemm MxNxK] [--attention BxHxSxD] [--causal]\n");
      return 2;
    }
  }
  printf("bundle: %d kernels\n", tessera_kernel_count());
  int ok = run_gemm(m, n, kk);
  ok = run_attention(b, h, s, d, causal) && ok;
  ok = try_gpu() && ok;
  /* A shape the bundle does not have: a clear answer, not a guess. */
  if (!tessera_find("gemm", "3x5x7", "f32", "host")) printf("missing shape: %s\n", tessera_last_message());
  printf("%s\n", ok ? "demo: all checks passed" : "demo: FAILED");
  return ok ? 0 : 1;
}
