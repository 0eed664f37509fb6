// Owns what a tune's target is, as every front end names it: the target by name with the host's
// thread count (the key's units), a GPU product by name (its chip is the target, its figures the
// model's), the GPU facts files a user adds, the size a kernel may have to be allocated here, and
// the front ends' dialect of option names in the messages about them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ir/ir.h"
#include "support/status.h"
#include "targets/target_desc.h"

namespace tessera::session {

inline constexpr int kAllCores = -1;  // threads: every core of the host (the key's units)

// How a front end spells its options, so that one message serves both: the CLI's `--time-budget`
// and `--device emulated`, Python's `time_budget` and `device="emulated"`.
struct Dialect {
  enum class Kind { Cli, Python };
  Kind kind = Kind::Cli;
  std::string option(std::string_view name) const;  // "time-budget" -> "--time-budget" | "time_budget"
  // An option given a value: ("trials", "N") -> "--trials N" | "trials=N"; a flag (no value) ->
  // "--estimate" | "estimate=True"; `text` quotes the value in Python (device="emulated").
  std::string given(std::string_view name, std::string_view value = {}, bool text = false) const;
};

// A host thread count as a front end gives it: kAllCores, or 1..1024 (one line in its dialect).
Status checkThreads(int threads, const Dialect& d = {});
// The target named `name`; for the host, with kernels on `threads` threads (kAllCores: all of
// them; 1..1024 otherwise). The thread count is the host key's `units`, so records of different
// thread counts never answer for each other. A thread count on a GPU target is an error.
Expected<TargetDesc> targetFor(const std::string& name, int threads, const Dialect& d = {});
// The target of a tune that may name a GPU product (`gpus`: none, or the one the user named): the
// product's chip with its figures (`target`, when given, must be that chip, or sm_90a for sm_90
// parts), else targetFor(target, threads).
Expected<TargetDesc> targetWithGpu(const std::string& target, const std::vector<std::string>& gpus, int threads,
                                   const Dialect& d = {});
// Registers the GPUs of these facts files for this process; the first file that does not read or
// parse is the error (one line, naming the file).
Status loadGpuFacts(const std::vector<std::string>& files);

// What a tune or a run allocates here is the kernel's inputs and outputs (and the reference's
// copies): past this many elements together they are refused in one line unless the front end's
// max-elements option says more (2^30 elements: 4 GiB of f32; a 65536x65536 elementwise kernel
// holds 2^33).
inline constexpr int64_t kDefaultMaxElements = int64_t{1} << 30;
Status checkKernelSize(const ir::Kernel& k, int64_t maxElements, const Dialect& d = {});

namespace detail {
// The session's usage error (ErrorCode::InvalidArgument), shared by its files.
inline Error bad(const std::string& m) { return makeError(ErrorCode::InvalidArgument, m); }
}  // namespace detail

}  // namespace tessera::session
