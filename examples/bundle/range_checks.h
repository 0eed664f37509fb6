/* The checks the range demos share (range_demo.c, range_rows_demo.c, range_seq_demo.c): 64-byte
 * aligned buffers, counted checks that print the runtime's last message, buffers matched to a
 * kernel's tensors by name, untouched memory past a runtime size, the sizes a sweep visits and the
 * verdict line. Header-only, so each demo stays one `cc` command. */
#ifndef TESSERA_EXAMPLE_RANGE_CHECKS_H
#define TESSERA_EXAMPLE_RANGE_CHECKS_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera_bundle.h"

static int failures = 0;

static inline float* alloc_f32(size_t n) {
  size_t bytes = (n * sizeof(float) + 63) / 64 * 64;
  return aligned_alloc(64, bytes ? bytes : 64);
}

static inline void check(int ok, const char* what) {
  if (!ok) {
    ++failures;
    printf("FAIL: %s (%s)\n", what, tessera_last_message());
  }
}

/* One buffer per tensor of `kern` in its order: ptrs[j] for the tensor named names[j], the last
 * pointer for any other (the output); at most `n`. */
static inline void bind_by_name(const tessera_kernel* kern, void** bufs, int n, const char* const* names, void* const* ptrs) {
  for (int i = 0; i < n && i < tessera_num_tensors(kern); ++i) {
    tessera_tensor_info ti;
    if (tessera_tensor(kern, i, &ti) != TESSERA_OK) break;
    int j = 0;
    while (j < n - 1 && strcmp(ti.name, names[j]) != 0) ++j;
    bufs[i] = ptrs[j];
  }
}

/* How many of the n floats at p were written (they were set to all-ones bits before the run). */
static inline int written_floats(const float* p, size_t n) {
  int written = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits;
    memcpy(&bits, &p[i], sizeof bits);
    if (bits != 0xffffffffu) ++written;
  }
  return written;
}

/* The size after x in a sweep from lo: every one up to lo + dense, then odd, log-spaced ones. */
static inline long long next_size(long long x, long long lo, long long dense) { return x < lo + dense ? x + 1 : (x * 5 / 4) | 1; }

/* The verdict line and the exit status. */
static inline int verdict(const char* demo) {
  if (failures) {
    printf("%s: %d check(s) failed\n", demo, failures);
    return 1;
  }
  printf("%s: all checks passed\n", demo);
  return 0;
}

#endif
