// Owns what the kernel benchmarks share: interleaved same-run timing of a candidate and its
// anchor (machines here are noisy: only ratios measured in one run mean anything).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <cerrno>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include "store/store.h"
#include "support/load.h"

namespace tessera::bench {

struct Timing {
  double best_s = 1e30;   // fastest single call
  double median_s = 0;    // median of all calls
  double p20_s = 0, p80_s = 0;
};

// The largest p80/p20 of any interleave() of this run (LoadWatch reports it).
inline double& worstSpread() {
  static double w = 0;
  return w;
}

// Seconds between the rounds of interleave(), 0 by default; openblasAsShipped sets it when a bench
// runs on several threads. Each runtime's worker threads spin for a while after a call
// before they sleep (OpenMP's KMP_BLOCKTIME, 200 ms by default; OpenBLAS's 2^28 cycles, ~70 ms):
// in rounds back to back one side's idle workers spin through the other side's round and take a
// core from it, a contention no process that uses one of them has. Two Zen 5 cores,
// small_shapes_bench 64x4096x4096: a change that took Tessera's kernel from 8.2 to 6.1 ms under
// `tessera run` showed as 0.86x -> 0.87x OpenBLAS in rounds back to back, 0.86x -> 1.12x with the
// spin times shortened.
inline double& roundGap() {
  static double g = 0;
  return g;
}

// Alternates rounds of `a` and `b` (each round runs a function for at least `roundSec`). With a
// roundGap(), the machine rests that long before each round and the round's first call (waking
// the workers) is not timed.
inline std::pair<Timing, Timing> interleave(const std::function<void()>& a, const std::function<void()>& b,
                                            int rounds = 5, double roundSec = 0.15) {
  auto now = [] { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); };
  std::vector<double> sa, sb;
  a();
  b();
  for (int r = 0; r < rounds; ++r)
    for (int which = 0; which < 2; ++which) {
      auto& fn = which ? b : a;
      auto& s = which ? sb : sa;
      if (roundGap() > 0) {
        std::this_thread::sleep_for(std::chrono::duration<double>(roundGap()));
        fn();
      }
      double start = now();
      do {
        double t0 = now();
        fn();
        s.push_back(now() - t0);
      } while (now() - start < roundSec);
    }
  auto summarize = [](std::vector<double> v) {
    Timing t;
    std::sort(v.begin(), v.end());
    t.best_s = v.front();
    t.median_s = v[v.size() / 2];
    t.p20_s = v[v.size() / 5];
    t.p80_s = v[std::min(v.size() - 1, v.size() * 4 / 5)];
    if (t.p20_s > 0) worstSpread() = std::max(worstSpread(), t.p80_s / t.p20_s);
    return t;
  };
  return {summarize(sa), summarize(sb)};
}

// What a LoadWatch saw (the figures of its line), for a bench's --json output.
struct LoadSummary {
  double before = 0, after = 0;  // 1-minute load averages
  int cores = 0;
  double stealPct = -1;          // below 0: unknown
  double control0 = 0, control1 = 0, spread = 0;
  bool busy = false;             // the warning line was printed
};

// The machine's load around a benchmark run (support/load.h): read when it starts and when it ends
// (this object's end), with the control at the run's thread count; one line of figures, and one
// warning line when the run was busy (the control above kQuietSlowdown, or an interleaving's
// p80/p20 above 1.5): its ratios are then uncertain.
class LoadWatch {
 public:
  explicit LoadWatch(int threads) : threads_(std::max(1, threads)), before_(readLoad()), control0_(coreShareSlowdown(threads_)) {}
  ~LoadWatch() { finish(); }
  // Reads the load now and prints the line (once: the first call, or the destructor's).
  const LoadSummary& finish() {
    if (done_) return summary_;
    done_ = true;
    const LoadReading after = readLoad();
    const double control1 = coreShareSlowdown(threads_), spread = worstSpread();
    summary_ = {before_.loadavg1, after.loadavg1, after.cores, after.stealPct, control0_, control1, spread, false};
    std::printf("load         %.2f before, %.2f after on %d cores%s; control %.2fx / %.2fx; worst p80/p20 %.2fx\n",
                before_.loadavg1, after.loadavg1, after.cores,
                after.stealPct >= 0 ? (", steal " + std::to_string(int(after.stealPct + 0.5)) + " %").c_str() : "",
                control0_, control1, spread);
    if (roundGap() > 0) {
      auto env = [](const char* v) { return std::getenv(v) ? std::getenv(v) : "unset"; };
      std::printf("rounds       %.0f ms apart, the first call of each untimed; idle workers spin KMP_BLOCKTIME=%s ms, "
                  "OPENBLAS_THREAD_TIMEOUT=%s (bench_util.h, roundGap)\n",
                  roundGap() * 1e3, env("KMP_BLOCKTIME"), env("OPENBLAS_THREAD_TIMEOUT"));
    }
    if (std::max(control0_, control1) > kQuietSlowdown || spread > 1.5) {
      summary_.busy = true;
      std::printf("WARNING: measured under load (control up to %.2fx, p80/p20 up to %.2fx): the ratios above are uncertain\n",
                  std::max(control0_, control1), spread);
    }
    return summary_;
  }

 private:
  int threads_;
  LoadReading before_;
  double control0_;
  bool done_ = false;
  LoadSummary summary_;
};

// The machine's load (/proc/loadavg: 1, 5 and 15 minute averages), printed before and after a
// bench's timings: a ratio taken on a loaded machine says so next to it.
inline std::string loadAverage() {
  char buf[128] = {0};
  FILE* f = std::fopen("/proc/loadavg", "r");
  if (!f) return "unknown";
  double a = 0, b = 0, c = 0;
  int n = std::fscanf(f, "%lf %lf %lf", &a, &b, &c);
  std::fclose(f);
  if (n != 3) return "unknown";
  std::snprintf(buf, sizeof buf, "%.2f %.2f %.2f", a, b, c);
  return buf;
}

// The kernel benchmarks' command line: `[--db PATH] [--dtype T] [--threads N] [--config K=V,...]
// [N...]`, N positive integers; --db opens the store whose winners the benchmark runs, --threads
// runs tessera and the anchors on N threads (default 1), --config overrides knobs of the default.
// Returns false after printing the usage (to stdout for --help, with *exitCode 0) or why the
// arguments or the store are bad (to stderr, 2).
// Writes `text` to `path` (a bench's --json output); false, with one line on stderr naming `who`
// and the file, when it cannot.
inline bool writeText(const std::string& path, const std::string& text, const char* who) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  bool ok = f && std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (f) ok = std::fclose(f) == 0 && ok;
  if (!ok) std::fprintf(stderr, "%s: cannot write %s\n", who, path.c_str());
  return ok;
}

struct Args {
  std::unique_ptr<cache::RecordStore> store;  // null without --db
  std::vector<int64_t> numbers;
  std::string dtype = "f32";
  int threads = 1;
  std::string config;
  std::string json;  // --json FILE: the run as data as well (bench/results_page.py)
};
inline bool parseArgs(int argc, char** argv, const char* usage, Args* out, int* exitCode) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::printf("usage: %s %s\n", argv[0], usage);
      *exitCode = 0;
      return false;
    }
    if ((a == "--dtype" || a == "--config" || a == "--threads") && i + 1 < argc) {
      std::string v = argv[++i];
      if (a == "--dtype") {
        if (v != "f32" && v != "bf16" && v != "f16") {
          std::fprintf(stderr, "%s: --dtype must be f32, bf16 or f16\n", argv[0]);
          *exitCode = 2;
          return false;
        }
        out->dtype = v;
      } else if (a == "--config") {
        out->config = v;
      } else {
        char* end = nullptr;
        long t = std::strtol(v.c_str(), &end, 10);
        if (!end || *end || t < 1 || t > 1024) {
          std::fprintf(stderr, "%s: --threads must be a positive integer\n", argv[0]);
          *exitCode = 2;
          return false;
        }
        out->threads = int(t);
      }
      continue;
    }
    if (a == "--json" && i + 1 < argc) {
      out->json = argv[++i];
      continue;
    }
    if (a == "--db" && i + 1 < argc) {
      auto st = cache::openSqliteStore(argv[++i]);
      if (!st.ok()) {
        std::fprintf(stderr, "%s\n", st.error().str().c_str());
        *exitCode = 2;
        return false;
      }
      out->store = std::move(*st);
      continue;
    }
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(a, &used);
    } catch (...) {
      used = 0;
    }
    if (used != a.size() || v <= 0) {
      std::fprintf(stderr, "%s: '%s' is not a positive integer\nusage: %s %s\n", argv[0], a.c_str(), argv[0], usage);
      *exitCode = 2;
      return false;
    }
    out->numbers.push_back(v);
  }
  return true;
}

// A share of a peak for a table cell: "87.3%", and above 100 % "112%*", with *above set so that
// the bench prints its footnote (peakFootnote) once: no kernel beats the hardware, the probe read
// the peak low. Never a bare figure above 100 %.
inline std::string ofPeak(double fraction, bool* above) {
  char buf[32];
  if (fraction > 1.0) {
    *above = true;
    std::snprintf(buf, sizeof buf, "%.0f%%*", 100 * fraction);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f%%", 100 * fraction);
  }
  return buf;
}
inline void peakFootnote(bool above) {
  if (above)
    std::printf("*: above the FMA peak the probe measured at startup, which no kernel can beat: the probe read it low\n"
                "   (a shared vCPU or a lower clock while it ran); compare the ratios, measured in the same run.\n");
}

// Runs fn(i) for i in [0, n) on n threads (the calling one included): the multi-threaded anchors
// (a copy in slices, attention heads). Threads are started per call: ~20-50 us, noise next to
// the multi-millisecond problems the benches time.
inline void onThreads(int n, const std::function<void(int)>& fn) {
  if (n <= 1) return fn(0);
  std::vector<std::thread> ts;
  for (int i = 1; i < n; ++i) ts.emplace_back(fn, i);
  fn(0);
  for (auto& t : ts) t.join();
}

// The optional torch anchor (bench/torch_venv.sh creates bench/.venv with torch from PyPI): runs
// bench/torch_anchor.py with `args` and returns its stdout lines, or nothing when the venv (or
// torch in it) is absent; benches then skip the torch column. TESSERA_TORCH_PYTHON overrides
// the interpreter.
inline std::vector<std::string> torchAnchor(const std::string& args) {
  std::string py = TESSERA_BENCH_DIR "/.venv/bin/python";
  if (const char* e = std::getenv("TESSERA_TORCH_PYTHON"); e && *e) py = e;
  FILE* probe = std::fopen(py.c_str(), "r");
  if (!probe) return {};
  std::fclose(probe);
  std::string cmd = py + " " TESSERA_BENCH_DIR "/torch_anchor.py " + args + " 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return {};
  std::vector<std::string> lines;
  char buf[512];
  while (std::fgets(buf, sizeof buf, p)) {
    std::string l = buf;
    while (!l.empty() && (l.back() == '\n' || l.back() == '\r')) l.pop_back();
    if (!l.empty()) lines.push_back(l);
  }
  if (pclose(p) != 0) return {};
  return lines;
}

// OpenBLAS reads OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE when it is loaded, before main: an
// environment that forces an older core's kernels (hosts seen here export OPENBLAS_CORETYPE=Haswell
// on AVX-512 CPUs, where OpenBLAS itself picks Cooperlake or SkylakeX) makes the anchor slower
// than OpenBLAS as it ships. The benches with an OpenBLAS anchor call this first: it runs the
// bench again, once, without those variables and says so on stderr; TESSERA_BENCH_OPENBLAS_ENV=keep
// keeps them (the anchor's core is named in every header and JSON file either way).
//
// With `threads` above 1 it also shortens how long idle worker threads spin before they sleep,
// OpenMP's (KMP_BLOCKTIME=10 ms, Tessera's kernels) and OpenBLAS's (OPENBLAS_THREAD_TIMEOUT=24,
// 2^24 cycles, a few ms), unless the environment sets them, and sets roundGap() past both: see
// roundGap(). Within a round the calls follow each other far closer than either time, so each
// side runs as it does alone.
inline void openblasAsShipped(char** argv, int threads = 1) {
  bool rerun = false;
  std::string said;
  if (threads > 1) {
    for (auto [v, value] : {std::pair{"KMP_BLOCKTIME", "10"}, {"OPENBLAS_THREAD_TIMEOUT", "24"}})
      if (!std::getenv(v)) {
        ::setenv(v, value, 1);
        rerun = true;
        said += std::string(said.empty() ? "" : ", ") + v + "=" + value;
      }
    roundGap() = 0.03;
  }
  std::string dropped;
  if (const char* keep = std::getenv("TESSERA_BENCH_OPENBLAS_ENV"); !(keep && std::string(keep) == "keep"))
    for (const char* v : {"OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"}) {
      if (const char* e = std::getenv(v)) {
        dropped += std::string(dropped.empty() ? "" : ", ") + v + "=" + e;
        ::unsetenv(v);
        rerun = true;
      }
    }
  if (!rerun) return;
  if (!dropped.empty())
    std::fprintf(stderr, "bench: running again without %s, so that OpenBLAS picks its kernels for this host "
                 "(TESSERA_BENCH_OPENBLAS_ENV=keep keeps them)\n", dropped.c_str());
  if (!said.empty())
    std::fprintf(stderr, "bench: running again with %s: idle workers of one side sleep before the other's round "
                 "(bench_util.h, roundGap)\n", said.c_str());
  std::fflush(stderr);
  ::execv("/proc/self/exe", argv);
  std::fprintf(stderr, "bench: could not run again (%s); the anchor keeps the environment's OpenBLAS core\n",
               std::strerror(errno));
}

}  // namespace tessera::bench
