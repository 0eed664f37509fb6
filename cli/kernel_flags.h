// Owns the kernel-selection flags shared by run/compile/tune/best: presets per family
// (`gemm --m --n --k ...`, `elementwise --expr ... --shape ...`, `attention --heads ...`) or a
// kernel file in the IR text form (`file PATH`).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

#include "ir/ir.h"
#include "session/target_choice.h"
#include "support/status.h"

namespace tessera::cli {

struct KernelFlags {
  std::string family;  // the subcommand that fired: gemm | elementwise | attention | file
  std::string dtype = "f32";
  std::vector<std::string> shapes;  // "1024x4096" (default shape) or "name=dims"
  std::string name;
  // gemm
  int64_t m = 0, n = 0, k = 0, batch = 0;
  // --m as given: one size, or for `tune` a range LO..HI or a list A,B,C (tune_range.h). When set,
  // buildKernel reads M from it.
  std::string mText;
  const CLI::Option* batchOption = nullptr;  // gemm --batch given (then at least 1; absent: no batch dimension)
  bool transA = false, transB = false;
  double alpha = 1.0, beta = 0.0;
  std::string epilogue;
  // elementwise
  std::string expr;
  // --rows as given: the leading dimension of --shape (and of every input override of full rank
  // that has it); for `tune` also a range LO..HI or a list (shape-generic kernels, tune_range.h).
  std::string rowsText;
  // attention
  int64_t attnBatch = 1, heads = 0, headsKv = 0, seq = 0, seqKv = 0, headDim = 0;
  // --seq as given: the query length (and the key length unless --seq-kv says otherwise); for
  // `tune` also a range LO..HI or a list (shape-generic kernels over both lengths, tune_range.h).
  // When set, buildKernel reads the query length from it.
  std::string seqText;
  const CLI::Option* seqKvOption = nullptr;  // --seq-kv given
  double scale = 0;
  bool causal = false;
  // file
  std::string file;
};

// Adds the gemm / elementwise / attention / file subcommands to `parent`; each records its name
// in `f->family` and calls `action` (options of `parent` may follow the subcommand).
void addKernelSubcommands(CLI::App* parent, KernelFlags* f, const std::function<void()>& action);

// Builds and verifies the kernel the flags describe.
Expected<ir::Kernel> buildKernel(const KernelFlags& f);

// --max-elements (session::checkKernelSize): what `run` and `tune` allocate at most.
using session::kDefaultMaxElements;
void addMaxElementsOption(CLI::App* cmd, int64_t* maxElements);

// --threads N: kAllCores (all cores, the default of run/tune/best/space/compile) or 1..1024; the
// target it makes is session::targetFor's.
using session::kAllCores;
// Adds `--threads N` to a subcommand.
void addThreadsOption(CLI::App* cmd, int* threads);

}  // namespace tessera::cli
