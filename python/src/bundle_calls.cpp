// Owns tessera._tessera.BundleCall: one kernel of a loaded bundle (tessera/bundle_lib.py) at one
// key shape, bound once to the runtime's entry point (tessera_run_dims, or tessera_cuda_launch_packed
// for device buffers), so that a repeated call passes only its pointers: no ctypes argument
// conversion, no per-call arrays (the shape is kept here, the pointers live on the C stack).
// The GIL is released around the runtime's call (as ctypes did). Returns the runtime's status;
// the caller turns a non-zero status into an error with the runtime's message.
#include <nanobind/nanobind.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <vector>

namespace tessera::py {

namespace nb = nanobind;

namespace {

constexpr int kMaxTensors = 64;  // the runtime's TSR_MAX_TENSORS bound, with room

using RunDims = int (*)(const void* kernel, const int64_t* dims, int rank, void* const* buffers);
using LaunchPacked = int (*)(const void* kernel, const int64_t* dims, int rank, void* const* buffers,
                             void* const* packed, void* workspace, void* stream, int device);

struct BundleCall {
  std::uintptr_t entry = 0;   // the runtime's function
  std::uintptr_t kernel = 0;  // its tessera_kernel*
  std::vector<int64_t> dims;
  int tensors = 0;
  bool gpu = false;
  int device = 0;
};

void* pointerOf(PyObject* o) {
  void* p = PyLong_AsVoidPtr(o);
  if (!p && PyErr_Occurred()) throw nb::python_error();
  return p;
}

// host: call(p0, ..., pn-1); gpu: call(workspace, stream, p0, ..., pn-1[, q0, ..., qn-1]) with qi
// the caller's transposed copy of tensor i (0: none).
int callBundle(const BundleCall& c, nb::args args) {
  void* bufs[kMaxTensors];
  void* packed[kMaxTensors];
  const size_t n = args.size();
  if (!c.gpu) {
    if (n != static_cast<size_t>(c.tensors))
      throw nb::value_error("BundleCall: wrong number of pointers for this kernel");
    for (size_t i = 0; i < n; ++i) bufs[i] = pointerOf(args[i].ptr());
    auto fn = reinterpret_cast<RunDims>(c.entry);
    int st;
    {
      nb::gil_scoped_release unlocked;
      st = fn(reinterpret_cast<const void*>(c.kernel), c.dims.data(), static_cast<int>(c.dims.size()), bufs);
    }
    return st;
  }
  const size_t t = static_cast<size_t>(c.tensors);
  if (n != 2 + t && n != 2 + 2 * t)
    throw nb::value_error("BundleCall: wrong number of pointers for this kernel");
  void* ws = pointerOf(args[0].ptr());
  void* stream = pointerOf(args[1].ptr());
  for (size_t i = 0; i < t; ++i) bufs[i] = pointerOf(args[2 + i].ptr());
  const bool anyPacked = n == 2 + 2 * t;
  for (size_t i = 0; anyPacked && i < t; ++i) packed[i] = pointerOf(args[2 + t + i].ptr());
  auto fn = reinterpret_cast<LaunchPacked>(c.entry);
  int st;
  {
    nb::gil_scoped_release unlocked;
    st = fn(reinterpret_cast<const void*>(c.kernel), c.dims.data(), static_cast<int>(c.dims.size()), bufs,
            anyPacked ? packed : nullptr, ws, stream, c.device);
  }
  return st;
}

}  // namespace

void registerBundleCalls(nb::module_& m) {
  nb::class_<BundleCall>(m, "BundleCall",
                         "One bundle kernel at one key shape bound to the runtime's entry point (the address of "
                         "tessera_run_dims, or of tessera_cuda_launch_packed with gpu=True): calling it passes "
                         "the pointers only and returns the runtime's status.")
      .def(
          "__init__",
          [](BundleCall* self, std::uintptr_t entry, std::uintptr_t kernel, const std::vector<int64_t>& dims,
             int tensors, bool gpu, int device) {
            if (!entry || !kernel || dims.empty() || tensors <= 0 || tensors > kMaxTensors)
              throw nb::value_error("BundleCall: an entry point, a kernel, its key shape and 1..64 tensors");
            new (self) BundleCall{entry, kernel, dims, tensors, gpu, device};
          },
          nb::arg("entry"), nb::arg("kernel"), nb::arg("dims"), nb::arg("tensors"), nb::arg("gpu") = false,
          nb::arg("device") = 0)
      .def("__call__", &callBundle,
           "host: (p0, ..., pn-1); gpu: (workspace, stream, p0, ..., pn-1[, packed0, ..., packedn-1]) -> status")
      .def_ro("tensors", &BundleCall::tensors)
      .def_ro("gpu", &BundleCall::gpu);
}

}  // namespace tessera::py
