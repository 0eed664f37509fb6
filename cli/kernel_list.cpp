// Owns reading kernel list files (one kernel per line, the kernel flags' syntax).
#include "cli/kernel_list.h"

#include <filesystem>
#include <sstream>

#include "cli/kernel_flags.h"
#include "support/strings.h"
#include "support/text_file.h"

namespace tessera::cli {

namespace fs = std::filesystem;

Expected<std::vector<std::string>> splitShellWords(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool in_word = false;
  char quote = 0;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quote) {
      if (c == quote) quote = 0;
      else if (c == '\\' && quote == '"' && i + 1 < line.size() && (line[i + 1] == '"' || line[i + 1] == '\\')) cur += line[++i];
      else cur += c;
      continue;
    }
    if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
    } else if (c == '\\' && i + 1 < line.size()) {
      cur += line[++i];
      in_word = true;
    } else if (c == ' ' || c == '\t') {
      if (in_word) out.push_back(std::move(cur));
      cur.clear();
      in_word = false;
    } else {
      cur += c;
      in_word = true;
    }
  }
  if (quote) return makeError(ErrorCode::InvalidArgument, "unterminated quote");
  if (in_word) out.push_back(std::move(cur));
  return out;
}

Expected<int> takeThreads(std::vector<std::string>& words) {
  int threads = kAllCores;
  for (size_t i = 0; i < words.size();) {
    std::string value;
    size_t n = 0;
    if (words[i] == "--threads") {
      if (i + 1 >= words.size()) return makeError(ErrorCode::InvalidArgument, "--threads needs a value");
      value = words[i + 1];
      n = 2;
    } else if (words[i].rfind("--threads=", 0) == 0) {
      value = words[i].substr(10);
      n = 1;
    } else {
      ++i;
      continue;
    }
    auto v = parseInt(value);
    if (!v || *v < 1 || *v > 1024) return makeError(ErrorCode::InvalidArgument, "--threads must be between 1 and 1024, got '" + value + "'");
    if (threads != kAllCores) return makeError(ErrorCode::InvalidArgument, "--threads given twice");
    threads = int(*v);
    words.erase(words.begin() + long(i), words.begin() + long(i + n));
  }
  return threads;
}

Expected<ir::Kernel> kernelOf(const KernelListEntry& e) {
  KernelFlags f;
  CLI::App app{"kernel"};
  bool fired = false;
  addKernelSubcommands(&app, &f, [&] { fired = true; });
  std::vector<std::string> argv(e.args.rbegin(), e.args.rend());  // CLI11 parses a reversed vector
  try {
    app.parse(argv);
  } catch (const CLI::ParseError& err) {
    return makeError(ErrorCode::InvalidArgument, e.where + ": " + err.what());
  }
  if (!fired) return makeError(ErrorCode::InvalidArgument, e.where + ": expected gemm, elementwise, attention or file");
  auto k = buildKernel(f);
  if (!k.ok()) return makeError(k.error().code, e.where + ": " + k.error().message);
  return k;
}

Expected<std::vector<KernelListEntry>> readKernelList(const std::string& path) {
  TESSERA_ASSIGN(std::string text, readTextFile(path, kKernelListLimits));
  const fs::path base = fs::path(path).parent_path();
  std::vector<KernelListEntry> out;
  std::string line;
  size_t n = 0;
  std::istringstream in(text);
  while (std::getline(in, line)) {
    if (++n > kMaxKernelListLines) return makeError(ErrorCode::InvalidArgument, path + ": more than 10000 lines");
    // '#' starts a comment unless it sits inside quotes (an expression never needs one).
    auto hash = line.find('#');
    if (hash != std::string::npos && line.find_first_of("'\"") > hash) line.resize(hash);
    std::string spec(trim(line));
    if (spec.empty()) continue;
    KernelListEntry e;
    e.where = path + ":" + std::to_string(n);
    auto words = splitShellWords(spec);
    if (!words.ok()) return makeError(ErrorCode::InvalidArgument, e.where + ": " + words.error().message);
    e.args = std::move(*words);
    // A line's --threads is its host key's thread count (as `tessera tune --threads N` takes it).
    auto threads = takeThreads(e.args);
    if (!threads.ok()) return makeError(ErrorCode::InvalidArgument, e.where + ": " + threads.error().message);
    e.threads = *threads;
    // IR files are named relative to the list, wherever the tune runs from.
    if (e.args.size() >= 2 && e.args[0] == "file" && fs::path(e.args[1]).is_relative())
      e.args[1] = fs::absolute(base / e.args[1]).lexically_normal().string();
    TESSERA_TRY(kernelOf(e));  // every line is checked before any tune starts
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace tessera::cli
