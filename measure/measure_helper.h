// Owns measuring from any process (ARCHITECTURE.md §2.7): the measuring children of a tune are not forked
// from the tuning process itself but from a measuring helper, a separate executable
// (tessera-measure) started with posix_spawn (a fresh exec, no fork handlers run), so that a
// process that has already initialised a GPU driver (a Python session that used torch, a service
// embedding Tessera) can tune: a forked child of such a process cannot use the GPU. The helper
// receives the kernel, the target and the protocol's settings once, builds the candidates in its
// own pool and runs each in a forked child with the same watchdog (isolation.h), exactly as the
// in-process protocol measurer did; results come back over a pipe. The helper never opens a GPU
// itself (its children do), and it exits when its parent goes away.
#pragma once

#include <memory>
#include <string>

#include "ir/ir.h"
#include "measure/measurer.h"
#include "measure/protocol_measurer.h"
#include "targets/target_desc.h"

namespace tessera::measure {

// The helper executable: `settingsPath` when given; else tessera-measure next to the program or
// shared object this code is linked into (the tessera binary, the Python extension), then next to
// the running program, then the build tree's copy. NotFound with one line naming where it looked.
Expected<std::string> findMeasureHelper(const std::string& settingsPath = "");

// What the helper measures on: this CPU, or a device of the target's vendor (or its emulation).
struct HelperBackend {
  bool device = false;
  int deviceIndex = 0;
  bool emulated = false, emulatePre = false;
};

// A Measurer whose candidates are built and run by a measuring helper process (started on first
// use; one that dies, hangs or stays stopped mid-batch is killed and the batch measured once more
// in a fresh one; a helper that cannot start, or is lost twice, makes the batch's results crashes
// that say why).
std::unique_ptr<Measurer> makeHelperMeasurer(const ir::Kernel& k, const TargetDesc& t, const HelperBackend& b,
                                             const MeasureSettings& s);

// Asks a fresh helper to open device `index` of t's vendor: "ok\narch\nname\nl2" or "error\nwhy"
// (the probe's text form of device_measurer.cpp).
Expected<std::string> probeThroughHelper(const TargetDesc& t, int index, const std::string& helperPath);

// The helper's main: `tessera-measure --in FD --out FD --parent PID`.
int measureHelperMain(int argc, char** argv);

}  // namespace tessera::measure
