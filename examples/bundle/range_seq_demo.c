/* Runs the shape-generic attention kernels of a Tessera bundle built from a dispatch rule over the
 * sequence length (`tessera tune attention --batch B --heads H --heads-kv HKV --seq LO..HI
 * --head-dim D [--causal] ...`, `tessera bundle --dispatch RULE`): for sequence lengths inside the
 * range (query and key lengths equal) it asks tessera_find which bucket and kernel serve that
 * shape, runs it with tessera_run_dims and checks O = softmax(Q K^T / sqrt(D)) V (causal: key j
 * visible to query i when j <= i) against plain C; then lengths just outside the range, unequal
 * query and key lengths, another head dimension and misuse must fail cleanly.
 *
 *   ./range_seq_demo B H HKV D LO HI CAUSAL   (f32; Q, O [B, H, S, D]; K, V [B, HKV, S, D])
 *
 * Exit status: 0 when every check passed, 1 otherwise, 2 on bad arguments. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "range_checks.h"

static long long B, H, HKV, D;
static int causal;
static void shape_of(char* out, size_t n, long long sq, long long skv, long long d) {
  snprintf(out, n, "%lldx%lldx%lldx%lldx%lldx%lld", B, H, HKV, sq, skv, d);
}

/* O for one (batch, head, query row) in double precision. */
static void reference_row(const float* q, const float* k, const float* v, long long s, long long i, int masked, double* o) {
  double mx = -INFINITY, sum = 0, scale = 1.0 / sqrt((double)D);
  long long last = masked ? i : s - 1;
  double* p = malloc((size_t)(last + 1) * sizeof(double));
  for (long long j = 0; j <= last; ++j) {
    double dot = 0;
    for (long long d = 0; d < D; ++d) dot += (double)q[d] * (double)k[j * D + d];
    p[j] = dot * scale;
    if (p[j] > mx) mx = p[j];
  }
  for (long long j = 0; j <= last; ++j) sum += (p[j] = exp(p[j] - mx));
  for (long long d = 0; d < D; ++d) o[d] = 0;
  for (long long j = 0; j <= last; ++j)
    for (long long d = 0; d < D; ++d) o[d] += p[j] / sum * (double)v[j * D + d];
  free(p);
}

/* Finds, runs and checks sequence length s; returns the bucket that answered (-1: none). With
 * `flip`, the reference uses the other masking (the negative control: the check must fail). */
static int run_checked(long long s, int flip);
static int run_one(long long s) { return run_checked(s, 0); }
static int run_checked(long long s, int flip) {
  char shape[128];
  shape_of(shape, sizeof shape, s, s, D);
  const tessera_kernel* kern = tessera_find("attention", shape, "f32", "host");
  if (!kern) {
    check(0, shape);
    return -1;
  }
  tessera_dispatch_info di;
  tessera_last_dispatch(&di);
  check(di.in_range && di.kernel == kern && s >= di.bucket_lo && s <= di.bucket_hi && di.dim && strcmp(di.dim, "seq") == 0,
        "dispatch info");
  check(strstr(tessera_last_message(), "bucket") != NULL && strstr(tessera_last_message(), "config") != NULL,
        "the message names the bucket and the config");
  const size_t nq = (size_t)(B * H * s * D), nk = (size_t)(B * HKV * s * D), tail = 64;
  float* q = alloc_f32(nq);
  float* k = alloc_f32(nk);
  float* v = alloc_f32(nk);
  float* o = alloc_f32(nq + tail);
  for (size_t i = 0; i < nq; ++i) q[i] = (float)((long long)(i * 37 % 101) - 50) / 64.0f;
  for (size_t i = 0; i < nk; ++i) k[i] = (float)((long long)(i * 53 % 97) - 48) / 64.0f;
  for (size_t i = 0; i < nk; ++i) v[i] = (float)((long long)(i * 29 % 89) - 44) / 16.0f;
  memset(o, 0xff, (nq + tail) * sizeof(float)); /* NaN: an element never written fails */
  /* One buffer per tensor in the kernel's order, matched by name (tessera_tensor). */
  void* bufs[4] = {0};
  check(tessera_num_tensors(kern) == 4, "four tensors");
  static const char* const names[4] = {"Q", "K", "V", "O"};
  void* const ptrs[4] = {q, k, v, o};
  bind_by_name(kern, bufs, 4, names, ptrs);
  int64_t dims[6] = {B, H, HKV, s, s, D};
  tessera_status st = tessera_run_dims(kern, dims, 6, bufs);
  check(st == TESSERA_OK, "tessera_run_dims");
  int bad = 0;
  double ref[4096];
  for (long long b = 0; b < B && st == TESSERA_OK; ++b)
    for (long long h = 0; h < H; ++h) {
      long long hk = h / (H / HKV);
      const float* qh = q + (size_t)((b * H + h) * s * D);
      const float* kh = k + (size_t)((b * HKV + hk) * s * D);
      const float* vh = v + (size_t)((b * HKV + hk) * s * D);
      const float* oh = o + (size_t)((b * H + h) * s * D);
      for (long long i = 0; i < s; ++i) {
        reference_row(qh + i * D, kh, vh, s, i, causal != flip, ref);
        for (long long d = 0; d < D; ++d)
          if (!(fabs((double)oh[i * D + d] - ref[d]) <= 1e-4 * (1 + fabs(ref[d])))) ++bad;
      }
    }
  if (flip) {
    check(st == TESSERA_OK && bad > 0, "negative control: the other masking's reference differs");
    printf("negative control at seq=%lld: %d element(s) differ from the %s reference, as they must\n", s, bad,
           causal ? "unmasked" : "causal");
  } else {
    if (bad) printf("seq=%lld: %d element(s) differ from the C reference\n", s, bad);
    check(st == TESSERA_OK && bad == 0, "O = softmax(Q K^T * scale) V");
  }
  /* Past the last row nothing was written (the kernel follows the runtime length). */
  check(written_floats(&o[nq], tail) == 0, "nothing written past the last row");
  if (s <= 2 || s == di.bucket_lo) printf("seq=%lld: %s\n", s, tessera_last_message());
  free(q);
  free(k);
  free(v);
  free(o);
  return di.bucket;
}

int main(int argc, char** argv) {
  if (argc < 8) {
    fprintf(stderr, "usage: range_seq_demo B H HKV D LO HI CAUSAL\n");
    return 2;
  }
  B = atoll(argv[1]), H = atoll(argv[2]), HKV = atoll(argv[3]), D = atoll(argv[4]);
  long long lo = atoll(argv[5]), hi = atoll(argv[6]);
  causal = atoi(argv[7]) != 0;
  if (B <= 0 || H <= 0 || HKV <= 0 || H % HKV != 0 || D <= 0 || D > 4096 || lo <= 0 || hi < lo) {
    fprintf(stderr, "range_seq_demo: bad arguments\n");
    return 2;
  }
  /* Every length from LO to 8 above it, then odd and log-spaced ones up to HI, the edges of the
   * usual query/key blocks, and HI. */
  int checked = 0;
  for (long long s = lo; s <= hi; s = next_size(s, lo, 8), ++checked) run_one(s);
  static const long long edges[] = {15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129};
  for (size_t i = 0; i < sizeof edges / sizeof edges[0]; ++i)
    if (edges[i] > lo + 8 && edges[i] < hi) run_one(edges[i]), ++checked;
  run_one(hi);
  if (hi >= 3) run_checked(hi < 17 ? hi : 17, 1);
  printf("checked %d sequence lengths from %lld to %lld against C\n", checked + 1, lo, hi);

  char shape[128];
  shape_of(shape, sizeof shape, hi + 1, hi + 1, D);
  check(tessera_find("attention", shape, "f32", "host") == NULL, "a length above the range is a miss");
  printf("outside: %s\n", tessera_last_message());
  check(strstr(tessera_last_message(), "seq=") != NULL && strstr(tessera_last_message(), "outside the range") != NULL &&
            strstr(tessera_last_message(), "--seq") != NULL,
        "the miss names the length, says it is outside the range and names the --seq flag");
  shape_of(shape, sizeof shape, lo, lo + 1, D);
  check(tessera_find("attention", shape, "f32", "host") == NULL, "unequal query and key lengths are a miss");
  printf("unequal: %s\n", tessera_last_message());
  check(strstr(tessera_last_message(), "differ") != NULL, "the miss says the lengths differ");
  shape_of(shape, sizeof shape, 0, 0, D);
  check(tessera_find("attention", shape, "f32", "host") == NULL, "seq = 0 is refused");
  shape_of(shape, sizeof shape, lo, lo, D + 1);
  check(tessera_find("attention", shape, "f32", "host") == NULL, "another head dimension is a miss");
  shape_of(shape, sizeof shape, lo, lo, D);
  const tessera_kernel* kern = tessera_find("attention", shape, "f32", "host");
  check(kern != NULL, "found again");
  if (kern) {
    size_t nq = (size_t)(B * H * hi * D), nk = (size_t)(B * HKV * hi * D);
    float *q = alloc_f32(nq), *k = alloc_f32(nk), *v = alloc_f32(nk), *o = alloc_f32(nq);
    void* bufs[4] = {q, k, v, o};
    check(tessera_run(kern, bufs) == TESSERA_ERR_ARGUMENT, "tessera_run without the length is refused");
    int64_t above[6] = {B, H, HKV, hi + 1, hi + 1, D}, apart[6] = {B, H, HKV, lo, hi, D}, other_d[6] = {B, H, HKV, lo, lo, D + 1};
    check(tessera_run_dims(kern, above, 6, bufs) == TESSERA_ERR_ARGUMENT, "run_dims above the range");
    check(lo == hi || tessera_run_dims(kern, apart, 6, bufs) == TESSERA_ERR_ARGUMENT, "run_dims with unequal lengths");
    check(tessera_run_dims(kern, other_d, 6, bufs) == TESSERA_ERR_ARGUMENT, "run_dims with another head dimension");
    tessera_kernel_info info;
    check(tessera_info(kern, &info) == TESSERA_OK && info.runtime_m && info.m_lo == lo && info.m_hi == hi &&
              strcmp(info.range_dim, "seq") == 0,
          "info");
    free(q);
    free(k);
    free(v);
    free(o);
  }
  return verdict("range seq demo");
}
