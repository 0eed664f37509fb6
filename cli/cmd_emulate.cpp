// Owns `tessera emulate FILE`: runs an NVVM / ROCDL module as `compile --emit nvvm|rocdl` prints it
// (hand-edited or not) on the mapped-kernel emulator, its launch, buffers and TMA tensor maps
// described by flags (defaults from the launch comment compile appends, the printed header and the
// kernel's known grid and block sizes), and reports the races, faults and counters the emulator
// finds: exit 0 clean, 1 a fault found, 2 bad input.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/cmd_emulate.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "emulator/gpu_emu.h"
#include "codegen/gpu.h"
#include "support/strings.h"
#include "targets/target_desc.h"

namespace tessera::cli {

namespace {

constexpr const char* kLaunchComment = "// tessera emulate:";

struct EmulateFlags {
  std::string file, target, kernel, grid, block;
  int64_t shared = -1;
  std::vector<int64_t> buffers;
  std::vector<std::string> maps;  // --tensor-map P:DTYPE:DIMS:STRIDES:BOX:SWIZZLE[:@Q]
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

// One --tensor-map: kernel parameter `param` receives a tensor map (the emulator's 128-byte form)
// of `spec` over a buffer of its own, or over parameter `over`'s buffer.
struct MapFlag {
  int param = -1, over = -1;
  ir::ScalarType dtype = ir::ScalarType::F16;
  codegen::TensorMapSpec spec;
  int64_t spanBytes = 0;  // the last byte the map can address, plus one
};

// "AxBxC" of `n` (1..3) positive integers; "-" for none.
std::vector<int64_t> xs(const std::string& what, const std::string& v, const std::string& all) {
  std::vector<int64_t> out;
  if (v == "-") return out;
  for (const auto& p : split(v, 'x')) {
    auto n = parseInt(p);
    if (!n || *n < 1 || *n > (int64_t(1) << 40)) fail("--tensor-map " + all + ": " + what + " takes positive integers AxBxC, got '" + v + "'", kExitBadInput);
    out.push_back(*n);
  }
  return out;
}

MapFlag parseMap(const std::string& v) {
  const std::string usage = "--tensor-map takes PARAM:DTYPE:DIMS:STRIDES:BOX:SWIZZLE[:@PARAM] (e.g. 0:f16:64x128x1:128x16384:64x64x1:128), got '" + v + "'";
  auto parts = split(v, ':');
  if (parts.size() != 6 && parts.size() != 7) fail(usage, kExitBadInput);
  MapFlag m;
  auto p = parseInt(parts[0]);
  auto dt = ir::parseDType(parts[1]);
  auto sw = parseInt(parts[5]);
  if (!p || *p < 0 || !dt || !sw) fail(usage, kExitBadInput);
  m.param = int(*p), m.dtype = *dt, m.spec.swizzleBytes = int(*sw);
  if (parts.size() == 7) {
    auto q = parts[6].size() > 1 && parts[6][0] == '@' ? parseInt(parts[6].substr(1)) : std::nullopt;
    if (!q || *q < 0) fail(usage, kExitBadInput);
    m.over = int(*q);
  }
  const auto dims = xs("DIMS", parts[2], v), strides = xs("STRIDES", parts[3], v), box = xs("BOX", parts[4], v);
  const int rank = int(dims.size());
  if (rank < 1 || rank > 3 || int(box.size()) != rank || int(strides.size()) != rank - 1)
    fail("--tensor-map " + v + ": mismatched dims: " + std::to_string(dims.size()) + " dims, " + std::to_string(strides.size()) +
             " strides, " + std::to_string(box.size()) + " box extents (rank R takes R dims, R-1 byte strides, R box extents)",
         kExitBadInput);
  m.spec.rank = rank;
  const int64_t eb = ir::byteSize(m.dtype);
  int64_t prev = dims[0] * eb;
  m.spanBytes = dims[0] * eb;
  for (int d = 0; d < rank; ++d) {
    m.spec.dims[size_t(d)] = dims[size_t(d)];
    m.spec.box[size_t(d)] = box[size_t(d)];
    if (d == 0) continue;
    const int64_t st = strides[size_t(d - 1)];
    // cuTensorMapEncodeTiled's rule: each stride spans the dimensions inside it (plus padding).
    if (st < prev)
      fail("--tensor-map " + v + ": mismatched dims: stride " + std::to_string(d - 1) + " (" + std::to_string(st) + " B) is less than the " +
               std::to_string(prev) + " B the dimensions inside it span",
           kExitBadInput);
    m.spec.strides[size_t(d - 1)] = st;
    prev = st * dims[size_t(d)];
    m.spanBytes += (dims[size_t(d)] - 1) * st;
  }
  if (m.spanBytes > (int64_t(1) << 32)) fail("--tensor-map " + v + ": the tensor spans more than 4 GiB", kExitBadInput);
  return m;
}

// The parameters the kernel hands to a TMA as its tensor map (cp.async.bulk.tensor's map operand,
// prefetch.tensormap's), through the casts NVVM puts between a parameter and its use.
std::set<int> tensorMapParams(const std::string& body) {
  std::map<std::string, std::string> from;
  static const std::regex castRe("(%[A-Za-z0-9_]+) = llvm\\.(?:ptrtoint|inttoptr|bitcast|addrspacecast) (%[A-Za-z0-9_]+)");
  for (auto it = std::sregex_iterator(body.begin(), body.end(), castRe); it != std::sregex_iterator(); ++it) from[(*it)[1]] = (*it)[2];
  static const std::regex useRe("nvvm\\.cp\\.async\\.bulk\\.tensor\\.[a-z.]+ +%[A-Za-z0-9_]+, (%[A-Za-z0-9_]+)|nvvm\\.prefetch tensormap, (%[A-Za-z0-9_]+)");
  std::set<int> out;
  for (auto it = std::sregex_iterator(body.begin(), body.end(), useRe); it != std::sregex_iterator(); ++it) {
    std::string v = (*it)[1].matched ? (*it)[1].str() : (*it)[2].str();
    for (int hop = 0; hop < 16 && from.count(v); ++hop) v = from[v];
    if (v.rfind("%arg", 0) == 0)
      if (auto n = parseInt(v.substr(4))) out.insert(int(*n));
  }
  return out;
}

// The flags of the file's launch comment (compile appends it); empty when it has none.
EmulateFlags fileFlags(const std::string& all, const std::string& file) {
  EmulateFlags f;
  const size_t at = all.find(kLaunchComment);
  if (at == std::string::npos) return f;
  std::istringstream line(all.substr(at + std::strlen(kLaunchComment), all.find('\n', at) - at - std::strlen(kLaunchComment)));
  std::vector<std::string> tok;
  for (std::string t; line >> t;) tok.push_back(t);
  auto bad = [&](const std::string& why) { fail(file + ": its '" + kLaunchComment + "' line " + why, kExitBadInput); };
  for (size_t i = 0; i < tok.size(); ++i) {
    const std::string& flag = tok[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= tok.size() || tok[i + 1].rfind("--", 0) == 0) bad("gives " + flag + " no value");
      return tok[++i];
    };
    if (flag == "--kernel") f.kernel = value();
    else if (flag == "--grid") f.grid = value();
    else if (flag == "--block") f.block = value();
    else if (flag == "--tensor-map") f.maps.push_back(value());
    else if (flag == "--shared" || flag == "--buffer") {
      do {
        auto n = parseInt(value());
        if (!n || *n < 0) bad("gives " + flag + " no byte count");
        if (flag == "--shared") f.shared = *n;
        else f.buffers.push_back(*n);
      } while (flag == "--buffer" && i + 1 < tok.size() && tok[i + 1].rfind("--", 0) != 0);
    } else
      bad("has an unknown flag '" + flag + "'");
  }
  return f;
}

// Seeded bytes: no NaN or infinity in any float width (the top bits of each byte clear).
void seed(char* b, size_t n, uint64_t& s) {
  for (size_t i = 0; i < n; ++i) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    b[i] = char(s & 0x3f);
  }
}

// A buffer at a 256-byte boundary, as a device allocation is (cudaMalloc, hipMalloc): the
// coalescing counters (sectors per request) and a tensor map's 16-byte rule depend on where it
// starts, and a heap allocation's alignment changes from run to run. Red zones of no buffer's on
// both sides, as the in-process emulated device has: an overrun lands there and is named by the
// buffer it overran, never inside a neighbour.
struct DeviceBuffer {
  explicit DeviceBuffer(size_t n) : raw(kRedZone + kAlign + n + kRedZone), size(n) {
    data = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(raw.data()) + kRedZone + kAlign - 1) & ~uintptr_t(kAlign - 1));
  }
  static constexpr size_t kAlign = 256, kRedZone = 4096;
  std::vector<char> raw;
  char* data = nullptr;
  size_t size = 0;
};

}  // namespace

std::string emulateLaunchComment(const codegen::GpuLaunch& l, const ir::Kernel& k) {
  auto decls = k.inputs();
  for (const auto* o : k.outputs()) decls.push_back(o);
  auto joined = [](const std::array<int64_t, 3>& d) {
    return std::to_string(d[0]) + "," + std::to_string(d[1]) + "," + std::to_string(d[2]);
  };
  std::string s = std::string(kLaunchComment) + " --kernel " + l.kernel + " --grid " + joined(l.grid) + " --block " + joined(l.block) +
                  " --shared " + std::to_string(l.dynamicSharedBytes);
  std::string buffers, maps;
  for (size_t p = 0; p < l.kernelParams.size(); ++p) {
    const codegen::GpuArg& a = l.args[size_t(l.kernelParams[p])];
    if (a.kind != codegen::GpuArg::Kind::TensorMap) {
      const bool user = a.kind == codegen::GpuArg::Kind::Tensor && a.tensor >= 0 && size_t(a.tensor) < decls.size();
      buffers += " " + std::to_string(user ? codegen::userBytesAt(l, a.tensor, *decls[size_t(a.tensor)], nullptr) : codegen::wrapper::argBytes(a));
      continue;
    }
    const codegen::TensorMapSpec& m = a.tensorMap;
    auto x = [&](auto& v, int n) {
      std::string r;
      for (int d = 0; d < n; ++d) r += (d ? "x" : "") + std::to_string(v[size_t(d)]);
      return n ? r : std::string("-");
    };
    maps += " --tensor-map " + std::to_string(p) + ":" + std::string(ir::typeName(a.dtype)) + ":" + x(m.dims, m.rank) + ":" +
            x(m.strides, m.rank - 1) + ":" + x(m.box, m.rank) + ":" + std::to_string(m.swizzleBytes);
    for (size_t q = 0; q < l.kernelParams.size(); ++q)
      if (l.kernelParams[q] == m.of) maps += ":@" + std::to_string(q);
  }
  return s + (buffers.empty() ? "" : " --buffer" + buffers) + maps + "\n";
}

namespace {

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

  // The file's launch comment fills in what the flags leave out (for the kernel it names).
  const EmulateFlags ff = fileFlags(all, f.file);
  const bool useFile = f.kernel.empty() || f.kernel == ff.kernel;
  const std::string wantKernel = !f.kernel.empty() ? f.kernel : ff.kernel;

  std::string target = f.target;
  if (target.empty() && std::regex_search(text, m, std::regex("chip = \"([A-Za-z0-9_]+)\""))) target = m[1];
  if (target.empty()) fail(f.file + " names no chip: pass --target sm_XX|gfxXXX", kExitBadInput);
  auto t = getTarget(target);
  if (!t.ok() || !t->isGpu()) fail("--target: '" + target + "' is no GPU target", kExitBadInput);

  // The kernel: its name, its parameters (buffers or tensor maps, as the emitted kernels take them).
  std::regex fnRe("llvm\\.func @([A-Za-z0-9_$.]+)\\(([^)]*)\\)[^\\n]*(gpu\\.kernel|rocdl\\.kernel|nvvm\\.kernel)");
  std::string name, params, attrs, body;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), fnRe); it != std::sregex_iterator(); ++it)
    if (wantKernel.empty() || (*it)[1] == wantKernel) {
      name = (*it)[1], params = (*it)[2], attrs = it->str();
      const size_t from = size_t(it->position(0)), next = text.find("\n  llvm.func ", from + 1);
      body = text.substr(from, next == std::string::npos ? std::string::npos : next - from);
      break;
    }
  if (name.empty())
    fail(f.file + ": no kernel" + (wantKernel.empty() ? std::string("") : " named " + wantKernel) + " (an llvm.func with gpu.kernel)",
         kExitBadInput);
  int nparams = 0;
  for (const auto& p : split(params, ',')) {
    if (trim(p).empty()) continue;
    if (p.find("!llvm.ptr") == std::string::npos)
      fail("kernel " + name + ": parameter " + std::to_string(nparams) + " (" + std::string(trim(p)) + ") is no pointer; emulate passes buffers",
           kExitBadInput);
    ++nparams;
  }

  // Tensor maps: the flags', else the file's; every parameter a TMA reads as its map needs one.
  std::map<int, MapFlag> maps;
  for (const auto& v : !f.maps.empty() ? f.maps : useFile ? ff.maps : std::vector<std::string>{}) {
    MapFlag mf = parseMap(v);
    if (mf.param >= nparams || mf.over >= nparams)
      fail("--tensor-map " + v + ": kernel " + name + " has " + std::to_string(nparams) + " parameter(s)", kExitBadInput);
    if (mf.over == mf.param) fail("--tensor-map " + v + ": a map cannot describe its own parameter", kExitBadInput);
    if (!maps.emplace(mf.param, mf).second) fail("--tensor-map: parameter " + std::to_string(mf.param) + " has two maps", kExitBadInput);
  }
  for (const auto& [p, mf] : maps)
    if (maps.count(mf.over)) fail("--tensor-map: parameter " + std::to_string(p) + "'s map is over parameter " + std::to_string(mf.over) + ", itself a map", kExitBadInput);
  for (int p : tensorMapParams(body))
    if (p < nparams && !maps.count(p))
      fail("kernel " + name + ": parameter " + std::to_string(p) +
               " is a TMA tensor map (cp.async.bulk.tensor reads it): describe it with --tensor-map " + std::to_string(p) +
               ":DTYPE:DIMS:STRIDES:BOX:SWIZZLE[:@PARAM] (compile --emit nvvm appends the launch's)",
           kExitBadInput);

  for (const auto& [p, mf] : maps) {
    // A map is 128 bytes only a TMA reads: a parameter the kernel indexes is a buffer.
    const std::string arg = "%arg" + std::to_string(p);
    if (std::regex_search(body, std::regex("llvm\\.getelementptr[^\\n]* " + arg + "\\[")))
      fail("kernel " + name + ": parameter " + std::to_string(p) + " is no tensor map: the kernel indexes it as a buffer (give it a --buffer)",
           kExitBadInput);
  }
  const std::vector<int64_t>& buffers = !f.buffers.empty() ? f.buffers : useFile ? ff.buffers : f.buffers;
  const int nbuffers = nparams - int(maps.size());
  if (int(buffers.size()) != nbuffers)
    fail("kernel " + name + " takes " + std::to_string(nbuffers) + " buffer(s)" +
             (maps.empty() ? std::string() : " besides its " + std::to_string(maps.size()) + " tensor map(s)") +
             ": pass --buffer BYTES once for each (got " + std::to_string(buffers.size()) + ")",
         kExitBadInput);
  for (int64_t b : buffers)
    if (b < 1 || b > (int64_t(1) << 32)) fail("--buffer takes 1 byte to 4 GiB, got " + std::to_string(b), kExitBadInput);

  codegen::GpuBinary bin;
  bin.target = t->name;
  bin.mlirDevice = text;
  bin.launch.kernel = name;
  auto known = [&](const char* what) -> std::string {
    std::smatch k;
    return std::regex_search(attrs, k, std::regex(std::string(what) + " = array<i32: ([0-9, ]+)>")) ? std::string(k[1]) : "";
  };
  const std::string grid = !f.grid.empty() ? f.grid : useFile && !ff.grid.empty() ? ff.grid : known("gpu.known_grid_size");
  const std::string block = !f.block.empty() ? f.block : useFile && !ff.block.empty() ? ff.block : known("gpu.known_block_size");
  if (grid.empty() || block.empty()) fail("kernel " + name + " has no known grid or block size: pass --grid and --block", kExitBadInput);
  std::string g = grid, bl = block;
  g.erase(std::remove(g.begin(), g.end(), ' '), g.end());
  bl.erase(std::remove(bl.begin(), bl.end(), ' '), bl.end());
  bin.launch.grid = dims("--grid", g);
  bin.launch.block = dims("--block", bl);
  if (bin.launch.block[0] * bin.launch.block[1] * bin.launch.block[2] > 1024) fail("--block: more than 1024 threads", kExitBadInput);
  int64_t shared = f.shared >= 0 ? f.shared : useFile ? ff.shared : -1;
  if (shared < 0 && std::regex_search(header, m, std::regex("([0-9]+) B dynamic shared memory"))) shared = std::stoll(m[1]);
  if (shared > (int64_t(1) << 20)) fail("--shared: more than 1 MiB per block", kExitBadInput);
  bin.launch.dynamicSharedBytes = std::max<int64_t>(0, shared);
  for (int i = 0; i < nparams; ++i) bin.launch.kernelParams.push_back(i);

  // Plain parameters' buffers, then the tensors under maps of their own, then the maps over them.
  std::vector<int64_t> bytes(size_t(nparams), 128);
  for (int p = 0, b = 0; p < nparams; ++p)
    if (!maps.count(p)) bytes[size_t(p)] = buffers[size_t(b++)];
  for (const auto& [p, mf] : maps)
    if (mf.over >= 0 && mf.spanBytes > bytes[size_t(mf.over)])
      fail("--tensor-map " + std::to_string(p) + ": mismatched dims: the map spans " + std::to_string(mf.spanBytes) + " B of parameter " +
               std::to_string(mf.over) + "'s buffer of " + std::to_string(bytes[size_t(mf.over)]) + " B",
           kExitBadInput);

  codegen::MappedEmuOptions o;
  o.run.schedules = f.schedules;
  o.run.seed = f.seed;
  o.run.countInstructions = true;
  auto mk = codegen::compileMapped(bin, *t, o);
  if (!mk.ok()) fail(f.file + ": " + firstLine(mk.error().message), kExitBadInput);
  std::vector<DeviceBuffer> bufs;
  bufs.reserve(size_t(nparams));
  std::vector<uint64_t> args(static_cast<size_t>(nparams));
  std::vector<emu::Extent> extents;
  uint64_t s = f.seed * 0x9E3779B97F4A7C15ull + 1;
  for (int i = 0; i < nparams; ++i) {
    DeviceBuffer& b = bufs.emplace_back(size_t(bytes[size_t(i)]));
    if (!maps.count(i)) seed(b.data, b.size, s);
    args[size_t(i)] = reinterpret_cast<uint64_t>(b.data);
    extents.push_back({b.data, b.size,
                       maps.count(i) ? "tensor map " + std::to_string(i) : "buffer " + std::to_string(i) + " (" + std::to_string(bytes[size_t(i)]) + " B)"});
  }
  std::vector<DeviceBuffer> tensors;
  tensors.reserve(maps.size());
  for (const auto& [p, mf] : maps) {
    uint64_t global = args[size_t(std::max(mf.over, 0))];
    if (mf.over < 0) {
      DeviceBuffer& t = tensors.emplace_back(size_t(mf.spanBytes));
      seed(t.data, t.size, s);
      global = reinterpret_cast<uint64_t>(t.data);
      extents.push_back({t.data, t.size, "the tensor of tensor map " + std::to_string(p) + " (" + std::to_string(mf.spanBytes) + " B)"});
    }
    if (Status st = codegen::encodeEmulatedTensorMap(mf.spec, mf.dtype, global, bufs[size_t(p)].data); !st.ok())
      fail("--tensor-map " + std::to_string(p) + ": " + st.error().message, kExitBadInput);
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
    for (const auto& [p, mf] : maps)
      std::printf("tensor map parameter %d: %s, rank %d, box %lldx%lldx%lld, %dB swizzle, over %s\n", p, std::string(ir::typeName(mf.dtype)).c_str(),
                  mf.spec.rank, (long long)mf.spec.box[0], (long long)mf.spec.box[1], (long long)mf.spec.box[2], mf.spec.swizzleBytes,
                  mf.over >= 0 ? ("parameter " + std::to_string(mf.over) + "'s buffer").c_str()
                               : ("a seeded tensor of " + std::to_string(mf.spanBytes) + " B").c_str());
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
  c->add_option("--grid", f->grid, "X[,Y[,Z]] blocks (default: the file's launch comment, else the kernel's gpu.known_grid_size)");
  c->add_option("--block", f->block, "X[,Y[,Z]] threads (default: the file's launch comment, else the kernel's gpu.known_block_size)");
  c->add_option("--shared", f->shared, "dynamic shared memory bytes per block (default: the file's launch comment, else a printed header's, else 0)");
  c->add_option("--buffer", f->buffers,
                "BYTES of one kernel parameter's buffer, once per parameter that is no tensor map, in order (seeded bytes; "
                "default: the file's launch comment)")
      ->take_all();
  c->add_option("--tensor-map", f->maps,
                "PARAM:DTYPE:DIMS:STRIDES:BOX:SWIZZLE[:@PARAM] a TMA tensor map the host encodes for PARAM, over a seeded "
                "tensor of its own or @PARAM's buffer; dims and box innermost first, byte strides of the outer dims, e.g. "
                "0:f16:64x128x1:128x16384:64x64x1:128 (default: the file's launch comment; any replaces them all)");
  c->add_option("--schedules", f->schedules, "fiber orders to run (the fixed one, then seeded PCT orders)")->capture_default_str();
  c->add_option("--seed", f->seed, "seed of the buffers and of the PCT fiber orders")->capture_default_str();
  addJsonFlag(c, f->json, "the report as JSON (ok, errors, the text report)");
  c->callback([f] {
    if (f->schedules < 1 || f->schedules > 1000) fail("--schedules must be 1 to 1000", kExitBadInput);
    emulateCommand(*f);
  });
}

}  // namespace tessera::cli
