// Probe, not built by CMake: is "bias+GELU within 10 % of memcpy" reachable on this machine at
// all? It writes bias+GELU by hand with AVX2 intrinsics (the same math as
// codegen/expr_emitter.cpp: degree-5 2^f, exponent-bit 2^n, vdivps), plain and software-pipelined
// in three stages, and times it L1-resident (compute only, scaled to 4096x4096). Next to it, a
// memcpy of the 4096x4096 problem's bytes. No code can beat its compute time, so memcpy / the
// best compute time bounds the ratio `build/bench/elementwise_bench` can report for
// `gelu(x * s + b)` (it also prints the streamed 4096x4096 time, where compute and memory overlap
// or not).
//   gcc -O2 -mavx2 -mfma -o /tmp/gelu_avx2 bench/probes/gelu_avx2.c && /tmp/gelu_avx2
// Measured on an x86-64-v3 VM (Zen 4, AVX-512 hidden, ~2.7 GHz, noisy neighbours): per round,
// compute 7.1-10 ms (pipelined 0-12 % faster than plain) and memcpy 5.3-10.6 ms; a busy
// neighbour slows the copy far more than the compute. Undisturbed (fastest of each), see the
// last line: 0.7-0.8x.
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#define C 4096
#define S1 _mm256_set1_ps
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
// Stage 1: v -> t = -2 log2(e) sqrt(2/pi) (v + 0.044715 v^3), clamped to [-126, 126].
static inline __m256 st1(__m256 v) {
  __m256 x2 = _mm256_mul_ps(v, v);
  __m256 t = _mm256_mul_ps(v, _mm256_fmadd_ps(x2, S1(-0.10294324f), S1(-2.3022082f)));
  return _mm256_min_ps(_mm256_max_ps(t, S1(-126.f)), S1(126.f));
}
// Stage 2: t -> p = 2^f (degree 5), f = t - round(t); j holds round(t) in its low mantissa bits.
static inline __m256 st2(__m256 t, __m256* j) {
  *j = _mm256_add_ps(t, S1(12582912.f));
  __m256 f = _mm256_sub_ps(t, _mm256_sub_ps(*j, S1(12582912.f)));
  __m256 p = S1(1.3276472e-3f);
  p = _mm256_fmadd_ps(p, f, S1(9.6755415e-3f));
  p = _mm256_fmadd_ps(p, f, S1(5.5507133e-2f));
  p = _mm256_fmadd_ps(p, f, S1(0.2402212f));
  p = _mm256_fmadd_ps(p, f, S1(0.69314697f));
  return _mm256_fmadd_ps(p, f, S1(1.0f));
}
// Stage 3: y = v / (1 + p 2^n).
static inline __m256 st3(__m256 v, __m256 p, __m256 j) {
  __m256i e = _mm256_slli_epi32(_mm256_sub_epi32(_mm256_castps_si256(j), _mm256_set1_epi32(0x4B400000)), 23);
  __m256 s = _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(p), e));
  return _mm256_div_ps(v, _mm256_add_ps(s, S1(1.f)));
}
static inline __m256 gelu(__m256 v) { __m256 j; __m256 p = st2(st1(v), &j); return st3(v, p, j); }
static float *x, *y, *b, *s;
#define LD(r, c) _mm256_fmadd_ps(_mm256_load_ps(x + (size_t)(r) * C + (c)), _mm256_load_ps(s + (c)), _mm256_load_ps(b + (c)))
static void plain(int rows, int cols, int nt) {
  for (int r = 0; r < rows; r++)
    for (int c = 0; c < cols; c += 16) {
      __m256 v0 = gelu(LD(r, c)), v1 = gelu(LD(r, c + 8));
      float* o = y + (size_t)r * C + c;
      if (nt) { _mm256_stream_ps(o, v0); _mm256_stream_ps(o + 8, v1); }
      else { _mm256_store_ps(o, v0); _mm256_store_ps(o + 8, v1); }
    }
}
// Iteration c runs stage 1 of vector c, stage 2 of c-8 and stage 3 of c-16: each stage's inputs
// were computed an iteration earlier, so the out-of-order window holds fewer waiting ops.
static void pipelined(int rows, int cols, int nt) {
  for (int r = 0; r < rows; r++) {
    float* o = y + (size_t)r * C;
    __m256 vA = LD(r, 0), vB = LD(r, 8), tB = st1(vB), jA, jB;
    __m256 pA = st2(st1(vA), &jA), pB;
    for (int c = 16; c < cols; c += 8) {
      __m256 vC = LD(r, c), tC = st1(vC);
      pB = st2(tB, &jB);
      __m256 out = st3(vA, pA, jA);
      if (nt) _mm256_stream_ps(o + c - 16, out); else _mm256_store_ps(o + c - 16, out);
      vA = vB; pA = pB; jA = jB; vB = vC; tB = tC;
    }
    pB = st2(tB, &jB);
    _mm256_storeu_ps(o + cols - 16, st3(vA, pA, jA));
    _mm256_storeu_ps(o + cols - 8, st3(vB, pB, jB));
  }
}
int main(void) {
  size_t N = (size_t)4096 * C;
  x = aligned_alloc(4096, N * 4); y = aligned_alloc(4096, N * 4); b = aligned_alloc(4096, C * 4); s = aligned_alloc(4096, C * 4);
  for (size_t i = 0; i < N; i++) x[i] = (float)rand() / RAND_MAX * 8 - 4;
  memset(y, 0, N * 4);
  for (int i = 0; i < C; i++) { b[i] = (float)rand() / RAND_MAX - 0.5f; s[i] = 1 + (float)rand() / RAND_MAX; }
  void (*fs[2])(int, int, int) = {plain, pipelined};
  const char* names[2] = {"plain", "pipelined"};
  double bestCompute = 1e9, bestCopy = 1e9;
  for (int rep = 0; rep < 5; rep++) {
    double floor = 1e9;
    for (int v = 0; v < 2; v++) {
      double best = 1e9, bs = 1e9;
      for (int i = 0; i < 20000; i++) { double t0 = now(); fs[v](4, 1024, 0); double t = now() - t0; if (t < best) best = t; }
      for (int i = 0; i < 5; i++) { double t0 = now(); fs[v](4096, C, 1); double t = now() - t0; if (t < bs) bs = t; }
      best *= 4096.0 * C / (4 * 1024);
      if (best < floor) floor = best;
      printf("%-9s compute (L1-resident, scaled) %6.2f ms   streamed 4096x4096 %6.2f ms\n", names[v], best * 1e3, bs * 1e3);
    }
    double bc = 1e9;
    for (int i = 0; i < 7; i++) { double t0 = now(); memcpy(y, x, N * 4); double t = now() - t0; if (t < bc) bc = t; }
    printf("memcpy of the same bytes %6.2f ms -> this round, no kernel beats %.2fx of memcpy\n\n", bc * 1e3, bc / floor);
    if (floor < bestCompute) bestCompute = floor;
    if (bc < bestCopy) bestCopy = bc;
  }
  // A neighbour's memory traffic slows the copy far more than the L1-resident compute, so single
  // rounds swing; the fastest of each is the machine undisturbed.
  printf("fastest compute %.2f ms, fastest memcpy %.2f ms: undisturbed, no kernel beats %.2fx of memcpy "
         "(the bar asks for 0.90x)\n", bestCompute * 1e3, bestCopy * 1e3, bestCopy / bestCompute);
  return 0;
}
