// Owns the Python kernel API: the builders (gemm, elementwise, attention, parse), the Kernel
// object (tensors, key, space), compiling a (kernel, config, target) and running it on arrays
// without copying them (numpy through the buffer protocol, anything with __dlpack__), the
// reference check of outputs, and measuring configs with the tuner's own protocol.
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <optional>

#include "bindings.h"
#include "codegen/codegen.h"
#include "emulator/gpu_emu.h"
#include "codegen/gpu.h"
#include "codegen/gpu_runner.h"
#include "ir/buffer.h"
#include "ir/builders.h"
#include "ir/families.h"
#include "ir/reference.h"
#include "ir/text.h"
#include "ir/verifier.h"
#include "measure/protocol_measurer.h"
#include "measure/records.h"
#include "search/space.h"
#include "session/target_choice.h"

namespace tessera::py {

using Array = nb::ndarray<nb::ro, nb::device::cpu>;

ir::ScalarType dtypeOf(const std::string& s) {
  auto t = ir::parseDType(s);
  if (!t) raise(makeError(ErrorCode::InvalidArgument, "unknown dtype '" + s + "' (expected f32, f16 or bf16)"));
  return *t;
}

TargetDesc targetFor(const std::string& name, int threads) {
  // A named target as `tessera tune` resolves it (session/target_choice.h), in Python's words; an
  // ISA level ("x86-64-v3": this host as a CPU of that level) is Python's own.
  if (name.rfind("x86-64", 0) != 0) return unwrap(session::targetFor(name, threads, {session::Dialect::Kind::Python}));
  TargetDesc t = unwrap(hostTargetAs(name));
  check(session::checkThreads(threads, {session::Dialect::Kind::Python}));
  if (threads == session::kAllCores) return t;
  t.units = threads;
  return t;
}

ir::Config configFor(const ir::Kernel& k, const TargetDesc& t, const std::string& config) {
  ir::Space space = unwrap(search::makeSpace(k, t));
  ir::Config over;
  size_t i = config.find_first_not_of(" \t");
  if (i != std::string::npos)
    over = unwrap(config[i] == '{' ? ir::Config::fromJson(config) : ir::Config::parseAssignments(config));
  ir::Config c = unwrap(space.complete(over));
  if (auto why = space.check(c)) raise(makeError(ErrorCode::InvalidConfig, "invalid config: " + *why));
  return c;
}

namespace {

PyKernel verified(Expected<ir::Kernel> k) {
  ir::Kernel kernel = unwrap(std::move(k));
  check(ir::verify(kernel));
  return PyKernel{std::move(kernel)};
}

nb::tuple shapeTuple(const std::vector<int64_t>& s) {
  nb::list l;
  for (int64_t d : s) l.append(d);
  return nb::tuple(l);
}

nb::list tensorList(const std::vector<const ir::TensorDecl*>& ts) {
  nb::list out;
  for (const auto* t : ts) {
    nb::dict d;
    d["name"] = t->name;
    d["shape"] = shapeTuple(t->shape);
    d["dtype"] = std::string(ir::typeName(t->dtype));
    out.append(d);
  }
  return out;
}

std::vector<const ir::TensorDecl*> callOrder(const ir::Kernel& k) {
  auto v = k.inputs();
  for (const auto* o : k.outputs()) v.push_back(o);
  return v;
}

// Does array `a` hold tensor `t` exactly: dtype (bf16 also as 16-bit integers: its bits), shape,
// dense row-major strides? The kernel reads and writes the memory itself.
void checkArray(const Array& a, const ir::TensorDecl& t, size_t index, size_t align) {
  auto bad = [&](const std::string& why) {
    raise(makeError(ErrorCode::InvalidArgument, "array " + std::to_string(index) + " (" + t.name + "): " + why));
  };
  const auto dt = a.dtype();
  const auto Float = uint8_t(nb::dlpack::dtype_code::Float), Bfloat = uint8_t(nb::dlpack::dtype_code::Bfloat),
             Int = uint8_t(nb::dlpack::dtype_code::Int), UInt = uint8_t(nb::dlpack::dtype_code::UInt);
  bool okType = dt.lanes == 1 &&
                ((t.dtype == ir::ScalarType::F32 && dt.code == Float && dt.bits == 32) ||
                 (t.dtype == ir::ScalarType::F16 && dt.code == Float && dt.bits == 16) ||
                 (t.dtype == ir::ScalarType::BF16 && dt.bits == 16 && (dt.code == Bfloat || dt.code == UInt || dt.code == Int)));
  if (!okType)
    bad(std::string("expected ") + std::string(ir::typeName(t.dtype)) +
        (t.dtype == ir::ScalarType::BF16 ? " (a bfloat16 or uint16 array of its bits)" : "") + ", got a " +
        std::to_string(dt.bits) + "-bit array of another type");
  if (a.ndim() != t.shape.size()) bad("expected " + std::to_string(t.shape.size()) + " dimensions, got " + std::to_string(a.ndim()));
  int64_t stride = 1;
  for (size_t d = t.shape.size(); d-- > 0;) {
    if (int64_t(a.shape(d)) != t.shape[d]) bad("expected shape " + ir::shapeStr(t.shape) + ", got dimension " + std::to_string(d) + " = " + std::to_string(a.shape(d)));
    if (t.shape[d] > 1 && a.stride(d) != stride) bad("not C-contiguous");
    stride *= t.shape[d];
  }
  if (align && reinterpret_cast<uintptr_t>(a.data()) % align != 0)
    bad("not " + std::to_string(align) + "-byte aligned (tessera.empty / tessera.aligned make arrays that are)");
}

// A compiled (kernel, config, target): the host JIT, the emulated GPU form, or a GPU binary with
// its runner.
struct PyCompiled {
  ir::Kernel kernel;
  TargetDesc target;
  ir::Config config;
  std::unique_ptr<codegen::HostExecutable> host;
  std::optional<codegen::GpuBinary> gpu;
  std::unique_ptr<codegen::GpuRunner> runner;
  bool emulated = false;
  double compileSeconds = 0;

  // Runs on the arrays (inputs then outputs); GPU kernels return the device time in us.
  double run(const std::vector<Array>& arrays) {
    auto order = callOrder(kernel);
    if (arrays.size() != order.size())
      raise(makeError(ErrorCode::InvalidArgument, kernel.name + " takes " + std::to_string(order.size()) + " arrays (" +
                                                      std::to_string(kernel.inputs().size()) + " inputs, then outputs), got " +
                                                      std::to_string(arrays.size())));
    std::vector<void*> ptrs;
    std::vector<std::pair<uintptr_t, uintptr_t>> ranges;
    for (size_t i = 0; i < arrays.size(); ++i) {
      checkArray(arrays[i], *order[i], i, host ? 64 : 0);
      ptrs.push_back(const_cast<void*>(arrays[i].data()));
      uintptr_t lo = reinterpret_cast<uintptr_t>(arrays[i].data());
      ranges.push_back({lo, lo + arrays[i].nbytes()});
    }
    // Outputs must not overlap anything: the kernel is compiled for buffers that never alias.
    for (size_t i = kernel.inputs().size(); i < ranges.size(); ++i)
      for (size_t j = 0; j < ranges.size(); ++j)
        if (i != j && ranges[i].first < ranges[j].second && ranges[j].first < ranges[i].second)
          raise(makeError(ErrorCode::InvalidArgument, "array " + std::to_string(i) + " (output " + order[i]->name +
                                                          ") overlaps array " + std::to_string(j)));
    if (host) {
      nb::gil_scoped_release nogil;
      host->run(ptrs.data());
      return 0;
    }
    Expected<double> us = makeError(ErrorCode::Internal, "no runner");
    {
      nb::gil_scoped_release nogil;
      us = runner->run(*gpu, kernel, ptrs.data(), 1);
    }
    return unwrap(std::move(us));
  }
};

// emulate: "" (run on a device), "mapped" (the mapped kernel on the CPU, one fiber per GPU thread,
// races and bounds checked) or "pre" (the pre-mapping IR on the CPU).
std::unique_ptr<PyCompiled> compile(const PyKernel& k, const std::string& config, const std::string& targetName,
                                    const std::string& emulate, int threads) {
  auto c = std::make_unique<PyCompiled>();
  c->kernel = k.kernel;
  c->target = targetFor(targetName, threads);
  c->config = configFor(c->kernel, c->target, config);
  c->emulated = !emulate.empty();
  if (!emulate.empty() && emulate != "mapped" && emulate != "pre")
    raise(makeError(ErrorCode::InvalidArgument, "emulate takes True, \"mapped\" or \"pre\", not '" + emulate + "'"));
  nb::gil_scoped_release nogil;
  if (c->target.vendor == Vendor::Host) {
    if (c->emulated) raise(makeError(ErrorCode::InvalidArgument, "emulate needs a GPU target (sm_90, gfx942, ...)"));
    c->host = unwrap(codegen::compileHost(c->kernel, c->config, c->target));
    c->compileSeconds = c->host->compileSeconds;
  } else if (emulate == "pre") {
    c->host = unwrap(codegen::compileEmulated(c->kernel, c->config, c->target));
    c->compileSeconds = c->host->compileSeconds;
  } else if (emulate == "mapped") {
    c->gpu = unwrap(codegen::compileGpu(c->kernel, c->config, c->target, {.wantBinary = false}));
    auto mapped = unwrap(codegen::compileMapped(*c->gpu, c->target));
    c->runner = codegen::makeDeviceRunner(codegen::mappedEmulatedDevice(mapped, c->target.name));
    c->compileSeconds = c->gpu->compileSeconds + mapped->compileSeconds;
  } else {
    auto runner = codegen::openRunnerFor(c->target);
    if (!runner.ok())
      raise(makeError(ErrorCode::Unsupported, "target " + c->target.name + " cannot run here (" + runner.error().message +
                                                  "); emulate=True runs the mapped kernel on the CPU"));
    c->gpu = unwrap(codegen::compileGpu(c->kernel, c->config, c->target));
    c->runner = std::move(*runner);
    c->compileSeconds = c->gpu->compileSeconds;
  }
  return c;
}

// The outputs in `arrays` (inputs then outputs) against the reference evaluator on its inputs.
nb::dict checkOutputs(const PyKernel& k, const std::vector<Array>& arrays) {
  auto order = callOrder(k.kernel);
  if (arrays.size() != order.size())
    raise(makeError(ErrorCode::InvalidArgument, "expected " + std::to_string(order.size()) + " arrays (inputs, then outputs)"));
  std::vector<ir::Buffer> views;
  for (size_t i = 0; i < arrays.size(); ++i) {
    checkArray(arrays[i], *order[i], i, 0);
    views.push_back(ir::Buffer::view(order[i]->dtype, order[i]->shape, const_cast<void*>(arrays[i].data())));
  }
  std::vector<const ir::Buffer*> ins, outs;
  for (size_t i = 0; i < views.size(); ++i) (i < k.kernel.inputs().size() ? ins : outs).push_back(&views[i]);
  ir::Comparison cmp;
  {
    nb::gil_scoped_release nogil;
    ir::Reference ref = unwrap(ir::evaluateReference(k.kernel, ins));
    cmp = ir::compareOutputs(k.kernel, ref, outs);
  }
  nb::dict d;
  d["ok"] = cmp.ok;
  d["max_abs_err"] = cmp.maxAbsErr;
  d["max_rel_err"] = cmp.maxRelErr;
  d["tolerance"] = cmp.tolerance;
  d["checked"] = cmp.checked;
  d["bad"] = cmp.bad;
  d["first_bad"] = cmp.firstBad;
  return d;
}

nb::list spaceOf(const PyKernel& k, const std::string& target, int threads) {
  ir::Space s = unwrap(search::makeSpace(k.kernel, targetFor(target, threads)));
  nb::list out;
  for (const auto& knob : s.knobs) {
    nb::dict d;
    nb::list dom;
    for (const auto& v : knob.domain) {
      if (std::holds_alternative<int64_t>(v)) dom.append(std::get<int64_t>(v));
      else dom.append(std::get<std::string>(v));
    }
    d["name"] = knob.name;
    d["domain"] = dom;
    d["default"] = ir::knobValueStr(knob.def);
    d["help"] = knob.help;
    out.append(d);
  }
  return out;
}

}  // namespace

void registerKernels(nb::module_& m) {
  nb::class_<PyKernel>(m, "Kernel", "A verified Tessera kernel (build one with gemm, elementwise, attention or parse).")
      .def_prop_ro("name", [](const PyKernel& k) { return k.kernel.name; }, "The kernel's name.")
      .def_prop_ro("family", [](const PyKernel& k) { return std::string(ir::familyName(k.kernel.family)); },
                   "gemm, elementwise or attention.")
      .def_prop_ro("ir", [](const PyKernel& k) { return ir::printKernel(k.kernel); }, "The kernel in the IR text form.")
      .def_prop_ro("inputs", [](const PyKernel& k) { return tensorList(k.kernel.inputs()); },
                   "The inputs: dicts of name, shape, dtype.")
      .def_prop_ro("outputs", [](const PyKernel& k) { return tensorList(k.kernel.outputs()); },
                   "The outputs: dicts of name, shape, dtype.")
      .def_prop_ro("workload", [](const PyKernel& k) { return ir::workloadHash(k.kernel); }, "The workload hash.")
      .def_prop_ro("flops", [](const PyKernel& k) { return ir::kernelFlops(k.kernel); }, "Floating-point operations of one run.")
      .def_prop_ro("bytes", [](const PyKernel& k) { return ir::kernelBytes(k.kernel); },
                   "Bytes of the inputs read and the outputs written by one run.")
      .def("key", [](const PyKernel& k, const std::string& target, int threads) {
            cache::HardKey key = measure::hardKeyFor(k.kernel, targetFor(target, threads));
            nb::dict d;
            d["family"] = key.family;
            d["workload"] = key.workload;
            d["shape"] = shapeTuple(key.shape);
            d["dtype"] = key.dtype;
            d["layout"] = key.layout;
            d["target"] = key.target;
            d["arch"] = key.arch;
            d["units"] = key.units;
            d["key_id"] = cache::keyIdOf(key);
            return d;
          }, nb::arg("target") = "host", nb::arg("threads") = -1,
          "The hard key of this kernel on a target (what the cache matches; host: on `threads` threads, -1 all cores).")
      .def("space", &spaceOf, nb::arg("target") = "host", nb::arg("threads") = -1,
           "Knobs, their legal values and defaults on a target.")
      .def("default_config", [](const PyKernel& k, const std::string& target, int threads) {
            return configFor(k.kernel, targetFor(target, threads), "").toJson();
          }, nb::arg("target") = "host", nb::arg("threads") = -1, "The space's default config as JSON.")
      .def("complete_config", [](const PyKernel& k, const std::string& config, const std::string& target, int threads) {
            return configFor(k.kernel, targetFor(target, threads), config).toJson();
          }, nb::arg("config"), nb::arg("target") = "host", nb::arg("threads") = -1,
          "A partial config (JSON or 'MR=6,NR=32') completed with the defaults and checked; as JSON.")
      .def("check", &checkOutputs, nb::arg("arrays"),
           "Outputs (after the inputs in `arrays`) against Tessera's reference evaluator on those inputs.")
      .def("__repr__", [](const PyKernel& k) { return "<tessera.Kernel " + k.kernel.name + ">"; });

  m.def("gemm", [](int64_t m_, int64_t n, int64_t k, const std::string& dtype, int64_t batch, bool transA, bool transB,
                   double alpha, double beta, const std::string& epilogue, const std::map<std::string, std::vector<int64_t>>& shapes,
                   const std::string& name) {
          ir::GemmSpec s;
          s.m = m_; s.n = n; s.k = k; s.dtype = dtypeOf(dtype); s.batch = batch; s.transA = transA; s.transB = transB;
          s.alpha = alpha; s.beta = beta; s.epilogue = epilogue; s.name = name;
          for (const auto& [key, v] : shapes) s.shapes[key] = v;
          return verified(ir::buildGemm(s));
        }, nb::arg("m"), nb::arg("n"), nb::arg("k"), nb::arg("dtype") = "f32", nb::arg("batch") = 0,
        nb::arg("trans_a") = false, nb::arg("trans_b") = false, nb::arg("alpha") = 1.0, nb::arg("beta") = 0.0,
        nb::arg("epilogue") = "", nb::arg("shapes") = std::map<std::string, std::vector<int64_t>>{}, nb::arg("name") = "");
  m.def("elementwise", [](const std::string& expr, const std::vector<int64_t>& shape,
                          const std::map<std::string, std::vector<int64_t>>& shapes, const std::string& dtype, const std::string& name) {
          ir::ElementwiseSpec s;
          s.expr = expr; s.shape = shape; s.dtype = dtypeOf(dtype); s.name = name;
          for (const auto& [key, v] : shapes) s.shapes[key] = v;
          return verified(ir::buildElementwise(s));
        }, nb::arg("expr"), nb::arg("shape"), nb::arg("shapes") = std::map<std::string, std::vector<int64_t>>{},
        nb::arg("dtype") = "f32", nb::arg("name") = "");
  m.def("attention", [](int64_t heads, int64_t seq, int64_t headDim, int64_t headsKv, int64_t seqKv, int64_t batch,
                        bool causal, double scale, const std::string& dtype, const std::string& name) {
          ir::AttentionSpec s;
          s.heads = heads; s.seq_q = seq; s.head_dim = headDim; s.heads_kv = headsKv; s.seq_kv = seqKv; s.batch = batch;
          s.causal = causal; s.scale = scale; s.dtype = dtypeOf(dtype); s.name = name;
          return verified(ir::buildAttention(s));
        }, nb::arg("heads"), nb::arg("seq"), nb::arg("head_dim"), nb::arg("heads_kv") = 0, nb::arg("seq_kv") = 0,
        nb::arg("batch") = 1, nb::arg("causal") = false, nb::arg("scale") = 0.0, nb::arg("dtype") = "f32", nb::arg("name") = "");
  m.def("parse", [](const std::string& text) { return verified(ir::parseKernel(text)); }, nb::arg("text"),
        "A kernel from its IR text form.");

  nb::class_<PyCompiled>(m, "Compiled", "A kernel compiled with one config for one target.")
      .def_prop_ro("config", [](const PyCompiled& c) { return c.config.toJson(); }, "The complete config, as JSON.")
      .def_prop_ro("target", [](const PyCompiled& c) { return c.target.name; }, "The target it was compiled for.")
      .def_prop_ro("emulated", [](const PyCompiled& c) { return c.emulated; },
                   "A GPU kernel's pre-mapping IR compiled for this CPU (correctness only).")
      .def_prop_ro("compile_seconds", [](const PyCompiled& c) { return c.compileSeconds; }, "Seconds the compile took.")
      .def("run", &PyCompiled::run, nb::arg("arrays"),
           "Runs on the arrays (inputs then outputs) in place; returns the device time in us on a GPU, else 0.");
  m.def("compile", &compile, nb::arg("kernel"), nb::arg("config") = "", nb::arg("target") = "host", nb::arg("emulate") = "",
        nb::arg("threads") = -1, "The kernel compiled with a config (\"\": the default) for a target.");

  m.def("measure", [](const PyKernel& k, const std::vector<std::string>& configs, const std::string& target,
                      double minTime, double timeout, int threads) {
          TargetDesc t = targetFor(target, threads);
          if (t.vendor != Vendor::Host)
            raise(makeError(ErrorCode::Unsupported, "measuring " + t.name + " needs that device; none is attached here"));
          std::vector<ir::Config> cs;
          for (const auto& c : configs) cs.push_back(configFor(k.kernel, t, c));
          measure::MeasureSettings ms;
          ms.measure.minTimeSec = minTime;
          ms.timeoutSec = timeout;
          nb::gil_scoped_release nogil;
          auto m2 = measure::makeHostMeasurer(k.kernel, t, ms);
          auto measured = m2->measure(cs);
          if (!measured.ok()) raise(measured.takeError());
          return std::move(*measured);
        }, nb::arg("kernel"), nb::arg("configs"), nb::arg("target") = "host", nb::arg("min_time") = 0.05,
        nb::arg("timeout") = 20.0, nb::arg("threads") = -1,
        "Each config compiled, run in a forked child on seeded inputs, checked against the reference and timed.");
}

}  // namespace tessera::py
