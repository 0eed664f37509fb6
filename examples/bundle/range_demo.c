/* Runs the shape-generic GEMM kernels of a Tessera bundle built from a dispatch rule (`tessera tune
 * gemm --m LO..HI ...`, `tessera bundle --dispatch RULE`): for every M of a list inside the range it
 * asks tessera_find which bucket and kernel serve that shape, runs it with tessera_run_dims and checks
 * C = A @ B against plain C loops; then M just outside the range, M = 0 and misuse must fail cleanly.
 *
 *   ./range_demo N K LO HI [buckets [fixed]]   (f32, A M x K, B K x N; `buckets`: how many buckets
 *   must answer; `fixed`: a comma-separated list of the M a kernel compiled for that shape alone
 *   must answer, a fixed bucket of the rule, while every other M gets a shape-generic one)
 *
 * Exit status: 0 when every check passed, 1 otherwise, 2 on bad arguments. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "range_checks.h"

static void fill(float* p, size_t n, unsigned seed) {
  unsigned s = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    s = s * 1664525u + 1013904223u;
    p[i] = (float)((s >> 8) * (1.0 / 16777216.0) * 2.0 - 1.0);
  }
}

static const char* want_fixed = NULL; /* ",1,2," or NULL: not checked */

/* Finds, runs and checks M x N x K; returns the bucket that answered (-1: none). */
static int run_one(long long m, long long n, long long k) {
  char shape[96];
  snprintf(shape, sizeof shape, "%lldx%lldx%lld", m, n, k);
  const tessera_kernel* kern = tessera_find("gemm", shape, "f32", "host");
  if (!kern) {
    check(0, shape);
    return -1;
  }
  tessera_dispatch_info d;
  tessera_last_dispatch(&d);
  check(d.in_range && d.kernel == kern && m >= d.bucket_lo && m <= d.bucket_hi, "dispatch info");
  if (want_fixed) {
    char key[32];
    snprintf(key, sizeof key, ",%lld,", m);
    tessera_kernel_info info;
    memset(&info, 0, sizeof info);
    int fixed = tessera_info(kern, &info) == TESSERA_OK && !info.runtime_m && info.m_lo == m && info.m_hi == m;
    if (fixed != (strstr(want_fixed, key) != NULL)) {
      printf("M=%lld: answered by %s (%s)\n", m, info.name ? info.name : "?", fixed ? "fixed-shape" : "shape-generic");
      check(0, "the kernel kind of the M's bucket");
    }
  }
  float* a = alloc_f32((size_t)(m * k));
  float* b = alloc_f32((size_t)(k * n));
  float* c = alloc_f32((size_t)(m * n));
  fill(a, (size_t)(m * k), 1);
  fill(b, (size_t)(k * n), 2);
  memset(c, 0xff, (size_t)(m * n) * sizeof(float)); /* NaN: an element never written fails */
  void* bufs[3] = {a, b, c};
  int64_t dims[3] = {m, n, k};
  tessera_status st = tessera_run_dims(kern, dims, 3, bufs);
  check(st == TESSERA_OK, "tessera_run_dims");
  double worst = 0;
  for (long long i = 0; i < m && st == TESSERA_OK; ++i)
    for (long long j = 0; j < n; ++j) {
      double ref = 0, mag = 0;
      for (long long q = 0; q < k; ++q) {
        ref += (double)a[i * k + q] * b[q * n + j];
        mag += fabs((double)a[i * k + q] * b[q * n + j]);
      }
      double err = fabs(c[i * n + j] - ref) / (mag + 1e-6);
      if (!(err <= worst)) worst = err; /* NaN counts as the worst */
    }
  check(st == TESSERA_OK && worst < 1e-5, "C = A @ B");
  if (m <= 3 || m == d.bucket_lo) printf("M=%lld: %s\n", m, tessera_last_message());
  free(a);
  free(b);
  free(c);
  return d.bucket;
}

int main(int argc, char** argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: range_demo N K LO HI [buckets]\n");
    return 2;
  }
  long long n = atoll(argv[1]), k = atoll(argv[2]), lo = atoll(argv[3]), hi = atoll(argv[4]);
  int want_buckets = argc > 5 ? atoi(argv[5]) : 0;
  char fixed_list[256];
  if (argc > 6) {
    snprintf(fixed_list, sizeof fixed_list, ",%s,", argv[6]);
    want_fixed = fixed_list;
  }
  if (n <= 0 || k <= 0 || lo <= 0 || hi < lo) {
    fprintf(stderr, "range_demo: bad arguments\n");
    return 2;
  }
  int seen[64] = {0};
  /* Every M from LO to 40 above it, then odd and log-spaced ones up to HI, and HI itself. */
  for (long long m = lo; m <= hi; m = next_size(m, lo, 40)) {
    int bk = run_one(m, n, k);
    if (bk >= 0 && bk < 64) seen[bk] = 1;
  }
  int bk = run_one(hi, n, k);
  if (bk >= 0 && bk < 64) seen[bk] = 1;
  int buckets = 0;
  for (int i = 0; i < 64; ++i) buckets += seen[i];
  printf("buckets that answered: %d\n", buckets);
  if (want_buckets) check(buckets == want_buckets, "every bucket answered");

  /* Outside the range: a clear miss, never a crash. */
  char shape[96];
  snprintf(shape, sizeof shape, "%lldx%lldx%lld", hi + 1, n, k);
  check(tessera_find("gemm", shape, "f32", "host") == NULL, "M above the range is a miss");
  printf("outside: %s\n", tessera_last_message());
  check(strstr(tessera_last_message(), "outside the range") != NULL, "the miss says it is outside the range");
  snprintf(shape, sizeof shape, "0x%lldx%lld", n, k);
  check(tessera_find("gemm", shape, "f32", "host") == NULL, "M = 0 is refused");
  printf("zero: %s\n", tessera_last_message());
  snprintf(shape, sizeof shape, "%lldx%lldx%lld", lo, n + 1, k);
  check(tessera_find("gemm", shape, "f32", "host") == NULL, "another N is a miss");
  /* Misuse of a shape-generic kernel (the one at HI: LO may be a fixed bucket's). */
  snprintf(shape, sizeof shape, "%lldx%lldx%lld", hi, n, k);
  const tessera_kernel* kern = tessera_find("gemm", shape, "f32", "host");
  check(kern != NULL, "found again");
  if (kern) {
    float* a = alloc_f32((size_t)(hi * k)), *b = alloc_f32((size_t)(k * n)), *c = alloc_f32((size_t)(hi * n));
    void* bufs[3] = {a, b, c};
    check(tessera_run(kern, bufs) == TESSERA_ERR_ARGUMENT, "tessera_run without M is refused");
    int64_t out_of_range[3] = {hi + 1, n, k}, other_n[3] = {hi, n + 1, k};
    check(tessera_run_dims(kern, out_of_range, 3, bufs) == TESSERA_ERR_ARGUMENT, "run_dims above the range");
    check(tessera_run_dims(kern, other_n, 3, bufs) == TESSERA_ERR_ARGUMENT, "run_dims with another N");
    void* nulls[3] = {a, NULL, c};
    int64_t ok_dims[3] = {hi, n, k};
    check(tessera_run_dims(kern, ok_dims, 3, nulls) == TESSERA_ERR_ARGUMENT, "run_dims with a NULL buffer");
    tessera_kernel_info info;
    check(tessera_info(kern, &info) == TESSERA_OK && info.runtime_m && info.m_lo == lo && info.m_hi == hi, "info");
    free(a);
    free(b);
    free(c);
  }
  return verdict("range demo");
}
