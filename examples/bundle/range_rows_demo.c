/* Runs the shape-generic elementwise kernels of a Tessera bundle built from a dispatch rule over
 * the leading dimension (`tessera tune elementwise --expr 'y = x * s + b' --shape HIxN --shape s=N
 * --shape b=HIx1 --rows LO..HI ...`, `tessera bundle --dispatch RULE`): for row counts inside the
 * range it asks tessera_find which bucket and kernel serve that shape, runs it with
 * tessera_run_dims and checks y = x * s + b against plain C; then rows just outside the range,
 * rows = 0, another N and misuse must fail cleanly. Buffers are matched to the kernel's tensors by
 * name (its inputs come in the kernel's order, not the expression's).
 *
 *   ./range_rows_demo N LO HI   (f32; inputs x [rows, N], s [N], b [rows, 1]; output y [rows, N])
 *
 * Exit status: 0 when every check passed, 1 otherwise, 2 on bad arguments. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "range_checks.h"

/* Finds, runs and checks rows x N; returns the bucket that answered (-1: none). */
static int run_one(long long rows, long long n) {
  char shape[96];
  snprintf(shape, sizeof shape, "%lldx%lld", rows, n);
  const tessera_kernel* kern = tessera_find("elementwise", shape, "f32", "host");
  if (!kern) {
    check(0, shape);
    return -1;
  }
  tessera_dispatch_info d;
  tessera_last_dispatch(&d);
  check(d.in_range && d.kernel == kern && rows >= d.bucket_lo && rows <= d.bucket_hi, "dispatch info");
  float* x = alloc_f32((size_t)(rows * n));
  float* s = alloc_f32((size_t)n);
  float* b = alloc_f32((size_t)rows);
  float* y = alloc_f32((size_t)(rows * n) + 16);
  for (long long i = 0; i < rows * n; ++i) x[i] = (float)((i * 37 % 101) - 50) / 8.0f;
  for (long long j = 0; j < n; ++j) s[j] = 0.5f + (float)j / 16.0f;
  for (long long i = 0; i < rows; ++i) b[i] = (float)i - 3.0f;
  memset(y, 0xff, ((size_t)(rows * n) + 16) * sizeof(float)); /* NaN: an element never written fails */
  /* One buffer per tensor in the kernel's order, matched by name (tessera_tensor). */
  void* bufs[4] = {0};
  static const char* const names[4] = {"x", "s", "b", "y"};
  void* const ptrs[4] = {x, s, b, y};
  bind_by_name(kern, bufs, 4, names, ptrs);
  check(tessera_num_tensors(kern) == 4, "four tensors");
  int64_t dims[2] = {rows, n};
  tessera_status st = tessera_run_dims(kern, dims, 2, bufs);
  check(st == TESSERA_OK, "tessera_run_dims");
  int bad = 0;
  for (long long i = 0; i < rows && st == TESSERA_OK; ++i)
    for (long long j = 0; j < n; ++j) {
      float ref = x[i * n + j] * s[j] + b[i];
      if (!(fabsf(y[i * n + j] - ref) <= 1e-5f * (1 + fabsf(ref)))) ++bad;
    }
  check(st == TESSERA_OK && bad == 0, "y = x * s + b");
  /* Past the last row nothing was written (the kernel follows the runtime row count). */
  check(written_floats(&y[rows * n], 1) == 0, "nothing written past the last row");
  if (rows <= 3 || rows == d.bucket_lo) printf("rows=%lld: %s\n", rows, tessera_last_message());
  free(x);
  free(s);
  free(b);
  free(y);
  return d.bucket;
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: range_rows_demo N LO HI\n");
    return 2;
  }
  long long n = atoll(argv[1]), lo = atoll(argv[2]), hi = atoll(argv[3]);
  if (n <= 0 || lo <= 0 || hi < lo) {
    fprintf(stderr, "range_rows_demo: bad arguments\n");
    return 2;
  }
  /* Every row count from LO to 40 above it, then odd and log-spaced ones up to HI, and HI. */
  for (long long r = lo; r <= hi; r = next_size(r, lo, 40)) run_one(r, n);
  run_one(hi, n);

  char shape[96];
  snprintf(shape, sizeof shape, "%lldx%lld", hi + 1, n);
  check(tessera_find("elementwise", shape, "f32", "host") == NULL, "rows above the range is a miss");
  printf("outside: %s\n", tessera_last_message());
  check(strstr(tessera_last_message(), "rows=") != NULL && strstr(tessera_last_message(), "outside the range") != NULL,
        "the miss names the rows and says it is outside the range");
  snprintf(shape, sizeof shape, "0x%lld", n);
  check(tessera_find("elementwise", shape, "f32", "host") == NULL, "rows = 0 is refused");
  snprintf(shape, sizeof shape, "%lldx%lld", lo, n + 1);
  check(tessera_find("elementwise", shape, "f32", "host") == NULL, "another N is a miss");
  snprintf(shape, sizeof shape, "%lldx%lld", lo, n);
  const tessera_kernel* kern = tessera_find("elementwise", shape, "f32", "host");
  check(kern != NULL, "found again");
  if (kern) {
    float* x = alloc_f32((size_t)(hi * n)), *s = alloc_f32((size_t)n), *b = alloc_f32((size_t)hi), *y = alloc_f32((size_t)(hi * n));
    void* bufs[4] = {x, s, b, y};
    check(tessera_run(kern, bufs) == TESSERA_ERR_ARGUMENT, "tessera_run without the row count is refused");
    int64_t above[2] = {hi + 1, n}, other_n[2] = {lo, n + 1};
    check(tessera_run_dims(kern, above, 2, bufs) == TESSERA_ERR_ARGUMENT, "run_dims above the range");
    check(tessera_run_dims(kern, other_n, 2, bufs) == TESSERA_ERR_ARGUMENT, "run_dims with another N");
    tessera_kernel_info info;
    check(tessera_info(kern, &info) == TESSERA_OK && info.runtime_m && info.m_lo == lo && info.m_hi == hi, "info");
    free(x);
    free(s);
    free(b);
    free(y);
  }
  return verdict("range rows demo");
}
