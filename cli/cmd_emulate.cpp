// Owns `tessera emulate FILE`: runs an NVVM / ROCDL module as `compile --emit nvvm|rocdl` prints it
// (hand-edited or not) on the mapped-kernel emulator, its launch and buffers described by flags
// (defaults from the printed header and the kernel's known grid and block sizes), and reports the
// races, faults and counters the emulator finds: exit 0 clean, 1 a fault found, 2 bad input.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/cmd_emulate.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "codegen/gpu.h"
#include "codegen/gpu_emu.h"
#include "support/strings.h"
#include "targets/target_desc.h"

namespace tessera::cli {

namespace {

struct EmulateFlags {
  std::string file, target, kernel, grid, block;
  int64_t shared = -1;
  std::vector<int64_t> buffers;
  int schedules = emu::Options{}.schedules;
  uint64_t seed = 1;
  bool json = false;
};

// "X", "X,Y" or "X,Y,Z" of positive integers.
std::array<int64_t, 3> dims(const std::string& flag, const std::string& v) {
  std::array<int64_t, 3> d{1, 1, 1};
  auto parts = split(v, ',');
  if (parts.empty() || parts.size() > 3) fail(flag + " takes X[,Y[,Z]], got '" + v + "'", kExitBadInput);
  for (size_t i = 0; i < parts.size(); ++i) {
    auto n = parseInt(parts[i]);
    if (!n || *n < 1 || *n > (1 << 30)) fail(flag + " takes positive integers, got '" + v + "'", kExitBadInput);
    d[i] = *n;
  }
  return d;
}

std::string firstLine(const std::string& s) { return s.substr(0, s.find('\n')); }

void emulateCommand(const EmulateFlags& f) {
  std::ifstream in(f.file, std::ios::binary);
  if (!in) fail("cannot read " + f.file, kExitBadInput);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string all = ss.str();
  // The printed header (config, launch, resources, estimate lines) precedes the module.
  std::smatch m;
  if (!std::regex_search(all, m, std::regex("(^|\\n)(gpu\\.module|module)[ {]")))
    fail(f.file + " holds no gpu.module: give the text `tessera compile ... --emit nvvm` (or rocdl) prints", kExitBadInput);
  const size_t start = size_t(m.position(0)) + m[1].length();
  // Blank lines stand for the header, so that the reported lines are the file's.
  const std::string header = all.substr(0, start);
  const std::string text = std::string(size_t(std::count(header.begin(), header.end(), '\n')), '\n') + all.substr(start);

  std::string target = f.target;
  if (target.empty() && std::regex_search(text, m, std::regex("chip = \"([A-Za-z0-9_]+)\""))) target = m[1];
  if (target.empty()) fail(f.file + " names no chip: pass --target sm_XX|gfxXXX", kExitBadInput);
  auto t = getTarget(target);
  if (!t.ok() || !t->isGpu()) fail("--target: '" + target + "' is no GPU target", kExitBadInput);

  // The kernel: its name, its parameters (buffers, as the emitted kernels take them).
  std::regex fnRe("llvm\\.func @([A-Za-z0-9_$.]+)\\(([^)]*)\\)[^\\n]*(gpu\\.kernel|rocdl\\.kernel|nvvm\\.kernel)");
  std::string name, params, attrs;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), fnRe); it != std::sregex_iterator(); ++it)
    if (f.kernel.empty() || (*it)[1] == f.kernel) {
      name = (*it)[1], params = (*it)[2], attrs = it->str();
      break;
    }
  if (name.empty())
    fail(f.file + ": no kernel" + (f.kernel.empty() ? std::string("") : " named " + f.kernel) + " (an llvm.func with gpu.kernel)",
         kExitBadInput);
  int nparams = 0;
  for (const auto& p : split(params, ',')) {
    if (trim(p).empty()) continue;
    if (p.find("!llvm.ptr") == std::string::npos)
      fail("kernel " + name + ": parameter " + std::to_string(nparams) + " (" + std::string(trim(p)) + ") is no pointer; emulate passes buffers",
           kExitBadInput);
    ++nparams;
  }
  if (int(f.buffers.size()) != nparams)
    fail("kernel " + name + " takes " + std::to_string(nparams) + " buffer(s): pass --buffer BYTES once for each (got " +
             std::to_string(f.buffers.size()) + ")",
         kExitBadInput);
  for (int64_t b : f.buffers)
    if (b < 1 || b > (int64_t(1) << 32)) fail("--buffer takes 1 byte to 4 GiB, got " + std::to_string(b), kExitBadInput);

  codegen::GpuBinary bin;
  bin.target = t->name;
  bin.mlirDevice = text;
  bin.launch.kernel = name;
  auto known = [&](const char* what) -> std::string {
    std::smatch k;
    return std::regex_search(attrs, k, std::regex(std::string(what) + " = array<i32: ([0-9, ]+)>")) ? std::string(k[1]) : "";
  };
  const std::string grid = !f.grid.empty() ? f.grid : known("gpu.known_grid_size");
  const std::string block = !f.block.empty() ? f.block : known("gpu.known_block_size");
  if (grid.empty() || block.empty()) fail("kernel " + name + " has no known grid or block size: pass --grid and --block", kExitBadInput);
  std::string g = grid, bl = block;
  g.erase(std::remove(g.begin(), g.end(), ' '), g.end());
  bl.erase(std::remove(bl.begin(), bl.end(), ' '), bl.end());
  bin.launch.grid = dims("--grid", g);
  bin.launch.block = dims("--block", bl);
  if (bin.launch.block[0] * bin.launch.block[1] * bin.launch.block[2] > 1024) fail("--block: more than 1024 threads", kExitBadInput);
  int64_t shared = f.shared;
  if (shared < 0 && std::regex_search(header, m, std::regex("([0-9]+) B dynamic shared memory"))) shared = std::stoll(m[1]);
  bin.launch.dynamicSharedBytes = std::max<int64_t>(0, shared);
  for (int i = 0; i < nparams; ++i) bin.launch.kernelParams.push_back(i);

  codegen::MappedEmuOptions o;
  o.run.schedules = f.schedules;
  o.run.seed = f.seed;
  o.run.countInstructions = true;
  auto mk = codegen::compileMapped(bin, *t, o);
  if (!mk.ok()) fail(f.file + ": " + firstLine(mk.error().message), kExitBadInput);
  // Buffers of seeded bytes (no NaN or infinity in any float width: the top bits of each byte clear).
  std::vector<std::vector<char>> bufs;
  std::vector<uint64_t> args;
  std::vector<emu::Extent> extents;
  uint64_t s = f.seed * 0x9E3779B97F4A7C15ull + 1;
  for (int i = 0; i < nparams; ++i) {
    bufs.emplace_back(size_t(f.buffers[size_t(i)]));
    for (char& c : bufs.back()) {
      s ^= s << 13, s ^= s >> 7, s ^= s << 17;
      c = char(s & 0x3f);
    }
    args.push_back(reinterpret_cast<uint64_t>(bufs.back().data()));
    extents.push_back({bufs.back().data(), bufs.back().size(), "buffer " + std::to_string(i) + " (" + std::to_string(f.buffers[size_t(i)]) + " B)"});
  }
  emu::Report r = (*mk)->run(args, extents);
  const std::string report = codegen::formatEmulationReport(r, (*mk)->sites(), t->warpSize);
  if (f.json) {
    const nlohmann::json j = {{"kernel", name},          {"target", t->name},      {"file", f.file},
                              {"launch", bin.launch.str()}, {"ok", r.ok},          {"error_count", r.errorCount},
                              {"errors", r.errors},      {"report", report}};
    std::printf("%s\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    std::printf("kernel     %s on %s, from %s\nlaunch     %s\n", name.c_str(), t->name.c_str(), f.file.c_str(),
                bin.launch.str().c_str());
    std::printf("%s", report.c_str());
  }
  if (!r.ok) throw CLI::RuntimeError(kExitFailure);
}

}  // namespace

void addEmulateCommand(CLI::App& app) {
  auto f = std::make_shared<EmulateFlags>();
  auto* c = app.add_subcommand("emulate",
                               "run an NVVM/ROCDL module (as compile --emit nvvm|rocdl prints it) on the emulator: races, faults");
  c->add_option("file", f->file, "the module's text (a header before gpu.module is read for the launch)")->required();
  c->add_option("--target", f->target, "sm_XX or gfxXXX (default: the module's chip)");
  c->add_option("--kernel", f->kernel, "the kernel to run (default: the first with gpu.kernel)");
  c->add_option("--grid", f->grid, "X[,Y[,Z]] blocks (default: the kernel's gpu.known_grid_size)");
  c->add_option("--block", f->block, "X[,Y[,Z]] threads (default: the kernel's gpu.known_block_size)");
  c->add_option("--shared", f->shared, "dynamic shared memory bytes per block (default: the header's, else 0)");
  c->add_option("--buffer", f->buffers, "BYTES of one kernel parameter's buffer, once per parameter in order (seeded bytes)")
      ->take_all();
  c->add_option("--schedules", f->schedules, "fiber orders to run (the fixed one, then seeded PCT orders)")->capture_default_str();
  c->add_option("--seed", f->seed, "seed of the buffers and of the PCT fiber orders")->capture_default_str();
  addJsonFlag(c, f->json, "the report as JSON (ok, errors, the text report)");
  c->callback([f] {
    if (f->schedules < 1 || f->schedules > 1000) fail("--schedules must be 1 to 1000", kExitBadInput);
    if (f->shared > (int64_t(1) << 20)) fail("--shared: more than 1 MiB per block", kExitBadInput);
    emulateCommand(*f);
  });
}

}  // namespace tessera::cli
