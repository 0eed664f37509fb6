// Owns kernel list files: one kernel per line in the kernel flags' syntax, the input of
// `tessera tune-all`:
//   gemm --m 1024 --n 1024 --k 1024 --dtype f32
//   attention --heads 8 --seq 1024 --head-dim 64 --causal
//   elementwise --expr 'y = gelu(x * s + b)' --shape 4096x4096 --shape s=4096 --shape b=4096
//   file attn.tsr                       # an IR file, relative to the list's folder
//   gemm --m 512 --n 512 --k 512 --threads 1   # host keys of one thread (default: all cores)
// `#` starts a comment (outside quotes); blank lines are skipped; quotes as in a shell.
#pragma once

#include <string>
#include <vector>

#include "ir/ir.h"
#include "support/status.h"
#include "support/text_file.h"

namespace tessera::cli {

struct KernelListEntry {
  std::vector<std::string> args;  // the line split like a shell does (file paths made absolute), --threads taken out
  std::string where;              // "list.txt:12"
  int threads = -1;               // the line's --threads N; -1 (kAllCores): not given, the command's own
};

inline constexpr size_t kMaxKernelListLines = 10000;
// A list file is read within these limits (a kernel line is short; /dev/zero is one endless line).
inline constexpr TextLimits kKernelListLimits{.max_bytes = size_t{16} << 20, .max_line_bytes = 64 * 1024,
                                              .what = "kernel list"};

// Reads and checks every line (each must build a kernel that verifies): an error names file:line.
Expected<std::vector<KernelListEntry>> readKernelList(const std::string& path);
// Splits a line like a POSIX shell (single and double quotes, backslash outside single quotes).
Expected<std::vector<std::string>> splitShellWords(const std::string& line);
// Takes `--threads N` (or `--threads=N`) out of a line's words: N, or -1 when the line has none.
Expected<int> takeThreads(std::vector<std::string>& words);
// Builds and verifies the kernel of one entry.
Expected<ir::Kernel> kernelOf(const KernelListEntry& e);

}  // namespace tessera::cli
