// Probe, not built by CMake: how fast can one core stream y = x * s + b over 4096x4096 f32 when s
// and b are row vectors (one value per column), next to memcpy and a plain AVX copy loop? It
// separates the memory side of bias+GELU from its arithmetic: no GELU here at all.
//   gcc -O2 -mavx2 -mfma -o /tmp/rowvec bench/probes/rowvec_bandwidth.c && /tmp/rowvec
// Measured on an x86-64-v3 VM (Zen 4, 32 KB L1d, AVX-512 hidden), streaming stores, best of 8:
//   memcpy 4.1-5.3 ms, AVX copy loop 3.3 ms, x + b (one 16 KB row vector) 4.6 ms (1.06-1.12x
//   memcpy), x * s + b (two 16 KB row vectors) 7.1-7.3 ms (0.67-0.73x), the same with 4 KB row
//   vectors 3.4-3.6 ms. Two full rows of s and b fill L1 next to the x stream; walking column
//   blocks instead (CHUNK) only made it slower there (0.43-0.62x), rows blocked or not.
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#define C 4096
#define R 4096
static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}
static float *x, *y, *s, *b;
// mode 0: copy; 1: x + b; 2: x * s + b. `mask` wraps the row-vector index (C-1: full rows).
static void row(size_t off, int mode, int mask) {
  for (int k = 0; k < C; k += 32) {
    for (int q = 0; q < 32; q += 8) {
      int j = (k + q) & mask;
      __m256 v = _mm256_load_ps(x + off + k + q);
      if (mode == 1) v = _mm256_add_ps(v, _mm256_load_ps(b + j));
      if (mode == 2) v = _mm256_fmadd_ps(v, _mm256_load_ps(s + j), _mm256_load_ps(b + j));
      _mm256_stream_ps(y + off + k + q, v);
    }
  }
}
static double best(int mode, int mask) {
  double bt = 1e9;
  for (int i = 0; i < 8; i++) {
    double t0 = now();
    for (int r = 0; r < R; r++) row((size_t)r * C, mode, mask);
    double t = now() - t0;
    if (t < bt) bt = t;
  }
  return bt * 1e3;
}
int main(void) {
  size_t n = (size_t)R * C;
  x = aligned_alloc(4096, n * 4), y = aligned_alloc(4096, n * 4);
  s = aligned_alloc(4096, C * 4), b = aligned_alloc(4096, C * 4);
  for (size_t i = 0; i < n; i++) x[i] = 1;
  memset(y, 0, n * 4);
  for (int i = 0; i < C; i++) s[i] = 1, b[i] = 0;
  for (int rep = 0; rep < 2; rep++) {
    double bm = 1e9;
    for (int i = 0; i < 8; i++) {
      double t0 = now();
      memcpy(y, x, n * 4);
      double t = now() - t0;
      if (t < bm) bm = t;
    }
    bm *= 1e3;
    printf("memcpy %.3f ms\n", bm);
    const char* names[] = {"AVX copy loop        ", "x + b, 16 KB row     ", "x * s + b, 16 KB rows", "x * s + b, 4 KB rows "};
    const int modes[] = {0, 1, 2, 2}, masks[] = {C - 1, C - 1, C - 1, 1023};
    for (int v = 0; v < 4; v++) {
      double t = best(modes[v], masks[v]);
      printf("  %s %.3f ms  %.2fx memcpy\n", names[v], t, bm / t);
    }
  }
  return 0;
}
