// Owns the stand-in for a process that has initialised a GPU driver (CUDA): loaded into a process
// (linked, dlopen'ed or LD_PRELOAD'ed), it makes every plain forked child of it abort, as a
// forked child of a CUDA process fails at its first driver call. A fork followed by exec escapes
// it only when no fork handler runs in between (posix_spawn); programs it starts run clean.
#include <pthread.h>
#include <unistd.h>

#include <cstdlib>

namespace {

void forkedChildDies() {
  static const char kMsg[] = "fork_poison: a forked child of a poisoned process ran (a GPU driver would be unusable here)\n";
  ssize_t n = write(2, kMsg, sizeof kMsg - 1);
  (void)n;
  std::abort();
}

__attribute__((constructor)) void poison() {
  unsetenv("LD_PRELOAD");  // what this process execs is not poisoned
  pthread_atfork(nullptr, nullptr, forkedChildDies);
}

}  // namespace

// For programs that link it: a symbol to reference, so that the linker keeps the library.
extern "C" int tessera_fork_poison_installed() { return 1; }
