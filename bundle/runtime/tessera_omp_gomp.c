/* Owns running a bundle's threaded host kernels on GNU OpenMP's threads (libgomp: GCC's runtime,
 * and the one PyTorch's Linux wheels load), in place of LLVM's libomp.
 *
 * Host kernels with THREADS > 1 call LLVM's OpenMP entry points (__kmpc_fork_call and five more),
 * which libomp.so.5 provides. In a process that already runs GNU OpenMP (a PyTorch model, a
 * program built with gcc -fopenmp) that makes two thread teams on the same cores: each spins
 * after its parallel regions while the other wants the cores, or sleeps and pays a wake-up per
 * call (~350 us on a 2-core VM, docs/journal.md, PyTorch). Linked into the bundle instead of
 * -l:libomp.so.5, this file defines those six entry points and runs each parallel region through
 * GOMP_parallel, on the team the process already has. The kernels are unchanged: each region's
 * iterations are split as libomp's static schedule splits them, so the results are identical.
 *
 * The runtime is looked up in the process (dlsym of RTLD_DEFAULT: PyTorch loads its libgomp into
 * the global scope), else libgomp.so.1 is opened; without either, regions run on the calling
 * thread (one line on stderr, once). Not in the Makefile's RUNTIME: link it where wanted, e.g.
 *   cc -O2 prog.c -I. tessera_omp_gomp.c libtessera_bundle.a -ldl -lpthread -lm
 * (tessera.torch links it so). The entry points are hidden, so only this bundle's kernels use
 * them. Regions started from inside another OpenMP region run as GNU OpenMP nests them. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

#define TESSERA_OMP_HIDDEN __attribute__((visibility("hidden")))
#define TESSERA_OMP_MAX_ARGS 16

typedef void (*tessera_gomp_fn)(void*);
typedef void (*tessera_microtask)(int32_t*, int32_t*, ...);

static void (*gomp_parallel)(tessera_gomp_fn, void*, unsigned, unsigned);
static int (*gomp_thread_num)(void);
static int (*gomp_num_threads)(void);
static int (*gomp_max_threads)(void);
static void (*gomp_barrier)(void);
static int gomp_state; /* 0: not looked up, 1: found, 2: absent (run on the calling thread) */

/* The calling thread's place in the region it runs (0 of 1 outside any), and the team size a
 * __kmpc_push_num_threads asked for its next region (0: the runtime's default). */
static __thread int32_t tls_tid, tls_nth = 1, tls_pushed;

static int gomp_resolve(void) {
  int s = __atomic_load_n(&gomp_state, __ATOMIC_ACQUIRE);
  if (s) return s == 1;
  void* h = RTLD_DEFAULT; /* a null handle: found says whether there is one to read */
  int found = dlsym(h, "GOMP_parallel") != NULL;
  if (!found) found = (h = dlopen("libgomp.so.1", RTLD_NOW | RTLD_LOCAL)) != NULL;
  if (found) {
    gomp_parallel = (void (*)(tessera_gomp_fn, void*, unsigned, unsigned))dlsym(h, "GOMP_parallel");
    gomp_thread_num = (int (*)(void))dlsym(h, "omp_get_thread_num");
    gomp_num_threads = (int (*)(void))dlsym(h, "omp_get_num_threads");
    gomp_max_threads = (int (*)(void))dlsym(h, "omp_get_max_threads");
    gomp_barrier = (void (*)(void))dlsym(h, "GOMP_barrier");
  }
  s = gomp_parallel && gomp_thread_num && gomp_num_threads && gomp_max_threads && gomp_barrier ? 1 : 2;
  if (s == 2)
    fprintf(stderr, "tessera: no GNU OpenMP runtime (libgomp.so.1) in this process: threaded kernels run on one thread\n");
  __atomic_store_n(&gomp_state, s, __ATOMIC_RELEASE);
  return s == 1;
}

struct tessera_region {
  tessera_microtask fn;
  int32_t argc;
  void* args[TESSERA_OMP_MAX_ARGS];
};

static void run_microtask(const struct tessera_region* r, int32_t tid, int32_t nth) {
  int32_t saved_tid = tls_tid, saved_nth = tls_nth, gtid = tid, btid = tid;
  tls_tid = tid;
  tls_nth = nth;
  void* const* a = r->args;
  switch (r->argc) {
    case 0: r->fn(&gtid, &btid); break;
    case 1: r->fn(&gtid, &btid, a[0]); break;
    case 2: r->fn(&gtid, &btid, a[0], a[1]); break;
    case 3: r->fn(&gtid, &btid, a[0], a[1], a[2]); break;
    case 4: r->fn(&gtid, &btid, a[0], a[1], a[2], a[3]); break;
    case 5: r->fn(&gtid, &btid, a[0], a[1], a[2], a[3], a[4]); break;
    case 6: r->fn(&gtid, &btid, a[0], a[1], a[2], a[3], a[4], a[5]); break;
    case 7: r->fn(&gtid, &btid, a[0], a[1], a[2], a[3], a[4], a[5], a[6]); break;
    case 8: r->fn(&gtid, &btid, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]); break;
    default:
      r->fn(&gtid, &btid, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13],
            a[14], a[15]);
      break;
  }
  tls_tid = saved_tid;
  tls_nth = saved_nth;
}

static void gomp_trampoline(void* p) { run_microtask((const struct tessera_region*)p, gomp_thread_num(), gomp_num_threads()); }

TESSERA_OMP_HIDDEN int32_t __kmpc_global_thread_num(void* loc) {
  (void)loc;
  return tls_tid;
}

TESSERA_OMP_HIDDEN void __kmpc_push_num_threads(void* loc, int32_t gtid, int32_t n) {
  (void)loc;
  (void)gtid;
  tls_pushed = n;
}

TESSERA_OMP_HIDDEN void __kmpc_fork_call(void* loc, int32_t argc, tessera_microtask fn, ...) {
  (void)loc;
  struct tessera_region r;
  r.fn = fn;
  r.argc = argc;
  if (argc < 0 || argc > TESSERA_OMP_MAX_ARGS) {
    fprintf(stderr, "tessera: a parallel region with %d arguments (at most %d): not run\n", (int)argc, TESSERA_OMP_MAX_ARGS);
    return;
  }
  va_list ap;
  va_start(ap, fn);
  for (int32_t i = 0; i < TESSERA_OMP_MAX_ARGS; ++i) r.args[i] = i < argc ? va_arg(ap, void*) : NULL;
  va_end(ap);
  int32_t n = tls_pushed;
  tls_pushed = 0;
  const int ok = gomp_resolve();
  if (ok && n <= 0) n = gomp_max_threads();
  if (ok && n > 1)
    gomp_parallel(gomp_trampoline, &r, (unsigned)n, 0);
  else
    run_microtask(&r, 0, 1);
}

/* libomp's static schedule (34) for a loop of unsigned 64-bit bounds (inclusive): each thread one
 * block, the first trip % n threads one iteration more. A chunked schedule gets the same blocks
 * (the stride is the whole trip, so each thread's chunk loop runs once: a valid static
 * partition). A thread with no iterations gets upper = lower - 1 (the kernels test
 * upper - lower == -1). */
TESSERA_OMP_HIDDEN void __kmpc_for_static_init_8u(void* loc, int32_t gtid, int32_t sched, int32_t* plast, uint64_t* plower,
                                                  uint64_t* pupper, int64_t* pstride, int64_t incr, int64_t chunk) {
  (void)loc;
  (void)gtid;
  (void)sched;
  (void)chunk;
  const uint64_t tid = (uint64_t)tls_tid, nth = (uint64_t)(tls_nth > 0 ? tls_nth : 1);
  if (incr != 1) { /* the kernels step by one; anything else runs on thread 0 alone */
    if (tid) *pupper = *plower - 1;
    *plast = tid == 0;
    *pstride = 0;
    return;
  }
  const uint64_t lo = *plower, trip = *pupper - *plower + 1;
  const uint64_t small = trip / nth, extras = trip % nth;
  const uint64_t mine = small + (tid < extras ? 1 : 0);
  *plower = lo + tid * small + (tid < extras ? tid : extras);
  *pupper = *plower + mine - 1;
  *pstride = (int64_t)trip;
  *plast = mine > 0 && *plower + mine == lo + trip;
}

TESSERA_OMP_HIDDEN void __kmpc_for_static_fini(void* loc, int32_t gtid) {
  (void)loc;
  (void)gtid;
}

TESSERA_OMP_HIDDEN void __kmpc_barrier(void* loc, int32_t gtid) {
  (void)loc;
  (void)gtid;
  if (tls_nth > 1 && gomp_barrier) gomp_barrier();
}
