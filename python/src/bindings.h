// Owns what the Python extension's files share: Tessera errors turned into Python exceptions (the
// classes of tessera/errors.py, carrying the CLI's one-line message), configs and targets read
// from Python values, and the kernel object handed to Python.
#pragma once

#include <nanobind/nanobind.h>

#include <string>

#include "ir/ir.h"
#include "ir/schedule.h"
#include "support/status.h"
#include "targets/target_desc.h"

namespace tessera::py {

namespace nb = nanobind;

// Thrown by the helpers below; the module's translator raises tessera.errors.<class>(message).
struct PyTesseraError {
  Error error;
};

[[noreturn]] inline void raise(const Error& e) { throw PyTesseraError{e}; }

template <class T>
T unwrap(Expected<T> v) {
  if (!v.ok()) raise(v.error());
  return std::move(*v);
}

inline void check(const Status& s) {
  if (!s.ok()) raise(s.error());
}

// The kernel as Python sees it: a verified IR kernel (immutable once built).
struct PyKernel {
  ir::Kernel kernel;
};

// "" -> the space's defaults; otherwise a JSON object or "MR=6,NR=32", completed with the
// defaults and checked against the space of (kernel, target).
ir::Config configFor(const ir::Kernel& k, const TargetDesc& t, const std::string& config);
// "host", "x86-64-v3", "sm_90", ...; host targets with kernels on `threads` threads (their key's
// units, as `--threads N`; -1: all cores). A thread count on a GPU target is an InvalidArgument.
TargetDesc targetFor(const std::string& name, int threads = -1);

void registerKernels(nb::module_& m);   // builders, Kernel, compile and run
void registerSessions(nb::module_& m);  // tune, best, compare, Client, bundle
void registerBundleCalls(nb::module_& m);  // BundleCall: a bundle kernel bound for repeated calls

}  // namespace tessera::py
