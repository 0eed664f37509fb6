// Owns `tessera bundle`'s library part: for a list of kernels and targets, choose each one's
// config (resolve.h), compile it ahead of time (a host object with a plain C entry point, or a
// cubin plus PTX / an hsaco with its launch), check host kernels against the reference, and write
// the folder a deployment links: the C runtime (runtime/), the generated kernel table, the
// objects and code objects, a Makefile and manifest.json (every key, config, time measured or
// estimated and labelled, provenance, Tessera and LLVM versions).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "bundle/dispatch_rule.h"
#include "bundle/resolve.h"
#include "ir/ir.h"
#include "support/status.h"
#include "targets/target_desc.h"

namespace tessera::bundle {

struct KernelRequest {
  ir::Kernel kernel;
  std::string origin;  // where it was asked for: "kernels.txt:3", "attn.tsr", "store winner"
  // Host targets: the threads the kernel runs on, its key's units (`--threads N`, tuned so);
  // -1: every core of the target, as `tessera tune` without --threads.
  int threads = -1;
};

enum class HostCpu {
  Level,   // compile for the key's ISA level (x86-64-v3/v4): runs on every CPU of that level
  Native,  // compile for this CPU exactly, as it was tuned (targets of this machine's level only)
};

struct BundleSettings {
  std::vector<TargetDesc> targets;
  std::string outDir;
  ResolveSettings resolve;
  HostCpu hostCpu = HostCpu::Level;
  bool verify = true;        // host kernels: run the chosen config here (forked child) against the reference
  bool replace = false;      // replace an existing bundle folder (only one with a Tessera manifest)
  double verifyTimeoutSec = 60;
  std::string tesseraVersion = "unknown";
  // Dispatch rules (`--dispatch RULE`): each compiled into shape-generic host kernels, one per
  // config, and a range the runtime's tessera_find answers from (dispatch_bundle.h).
  std::vector<RangeRuleFile> dispatch;
};

struct BundleCallbacks {
  std::function<void(const std::string&)> onProgress;  // one line per kernel
  std::function<void(const std::string&)> onWarning;
};

// One entry of the bundle as the table shows it: which config, and what it is.
struct BundleRow {
  std::string name, target, arch;
  int64_t units = 1;
  // "tuned" (this key's measured winner), "estimated" (this key's best estimate), "nearest" (the
  // config of the tuned shape `tunedShape`, legal here), "default" (the space's default, untuned).
  std::string kind;
  std::string config, tunedShape, from;
  double timeUs = 0;  // measured or estimated (kind), 0 for defaults
};

struct BundleSummary {
  std::string dir;
  // What a program linking libtessera_bundle.a adds (also in the bundle's link.flags): -ldl
  // -lpthread -lm, and LLVM's OpenMP runtime when a host kernel runs on several threads.
  std::string link_flags;
  int entries = 0, exact = 0, nearest = 0, untuned = 0, estimated = 0;
  std::vector<std::string> skipped;  // "<kernel> on <target>: why"
  std::vector<BundleRow> rows;       // every entry, in the table's order
};

// Writes the bundle. An error leaves no half-written folder behind. With MissingPolicy::Fail every
// entry is resolved first and one NotFound error names every entry without a tuned config
// (nothing is compiled or written then).
Expected<BundleSummary> writeBundle(const std::vector<KernelRequest>& kernels, const BundleSettings& s,
                                    const RecordSources& src, const BundleCallbacks& cb = {});

// "host" (this CPU's ISA level), "x86-64-v2|v3|v4" (a host of that level), or a GPU target name.
Expected<TargetDesc> parseBundleTarget(const std::string& name);

// The LLVM version this Tessera was built with ("22.1.0").
const char* llvmVersion();

}  // namespace tessera::bundle
