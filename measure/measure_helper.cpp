// Owns the measuring helper: finding and spawning it, the proxy Measurer of the tuning process
// and the helper's own loop.
#include "measure/measure_helper.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>

#include "ir/text.h"
#include "measure/device_measurer.h"
#include "measure/helper_wire.h"

extern char** environ;

namespace tessera::measure {

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

constexpr const char* kHelperName = "tessera-measure";

bool executable(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec) && access(p.c_str(), X_OK) == 0;
}

// A running helper: its pid and our ends of its two pipes.
struct HelperProcess {
  pid_t pid = -1;
  int to = -1, from = -1;
};

void stopHelper(HelperProcess& h) {
  if (h.to >= 0) close(h.to);
  if (h.from >= 0) close(h.from);
  h.to = h.from = -1;
  if (h.pid <= 0) return;
  // Closing its input ends its loop; one that does not go within a second is killed.
  for (int i = 0; i < 200; ++i) {
    if (waitpid(h.pid, nullptr, WNOHANG) == h.pid) {
      h.pid = -1;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  kill(h.pid, SIGKILL);
  waitpid(h.pid, nullptr, 0);
  h.pid = -1;
}

// posix_spawn, not fork: no fork handlers run in this process and nothing of it (a GPU context,
// locks held by other threads) is copied; the helper starts as a fresh program.
Expected<HelperProcess> spawnHelper(const std::string& path, bool probe) {
  int down[2], up[2];
  if (pipe2(down, O_CLOEXEC) != 0) return makeError(ErrorCode::IOError, "pipe failed");
  if (pipe2(up, O_CLOEXEC) != 0) {
    close(down[0]), close(down[1]);
    return makeError(ErrorCode::IOError, "pipe failed");
  }
  // The helper's ends become its fds 3 and 4; dup'ed above both first so that neither dup2
  // overwrites the other's source.
  int childIn = fcntl(down[0], F_DUPFD_CLOEXEC, 100), childOut = fcntl(up[1], F_DUPFD_CLOEXEC, 100);
  close(down[0]), close(up[1]);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, childIn, 3);
  posix_spawn_file_actions_adddup2(&fa, childOut, 4);
  const std::string parent = std::to_string(getpid());
  std::vector<std::string> args = {path, "--in", "3", "--out", "4", "--parent", parent};
  if (probe) args.push_back("--probe");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, path.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(childIn), close(childOut);
  if (rc != 0) {
    close(down[1]), close(up[0]);
    return makeError(ErrorCode::IOError, "cannot start the measuring helper " + path + ": " + std::strerror(rc));
  }
  return HelperProcess{pid, down[1], up[0]};
}

// A helper stopped this long (SIGSTOP, a debugger that never lets go) is given up on: its batch
// goes to a fresh helper. Long enough for a job-control stop and continue by hand to pass.
constexpr double kStoppedHelperGraceSec = 3;

// Whether process `pid` is stopped or traced (state T or t in /proc/PID/stat).
bool processStopped(pid_t pid) {
  std::FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r");
  if (!f) return false;
  char buf[512] = {};
  const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  // The name in parentheses may hold ')' itself: the state follows the last one.
  const std::string stat(buf, n);
  const size_t close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && (stat[close + 2] == 'T' || stat[close + 2] == 't');
}

// Waits until the helper's answer starts to arrive. IOError when the helper stays stopped for
// kStoppedHelperGraceSec or says nothing before `deadline` (a helper that hangs): the caller then
// kills it and measures the batch again in a fresh one, instead of waiting forever.
Status awaitAnswer(const HelperProcess& h, std::chrono::steady_clock::time_point deadline) {
  double stopped = 0;
  while (true) {
    pollfd p{h.from, POLLIN, 0};
    const int rc = ::poll(&p, 1, 200);
    if (rc > 0) return {};
    if (rc < 0 && errno != EINTR) return makeError(ErrorCode::IOError, std::string("poll: ") + std::strerror(errno));
    if (std::chrono::steady_clock::now() > deadline)
      return makeError(ErrorCode::IOError, "the measuring helper answered nothing before its deadline");
    stopped = processStopped(h.pid) ? stopped + 0.2 : 0;
    if (stopped >= kStoppedHelperGraceSec)
      return makeError(ErrorCode::IOError, "the measuring helper was stopped for " +
                                               std::to_string(int(kStoppedHelperGraceSec)) + " s");
  }
}

// Sends `request` and reads the answer; a helper that died says how (IOError: the helper was
// lost, not the candidates' fault; Internal: it answered an error).
Expected<json> call(HelperProcess& h, const json& request,
                    std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max()) {
  Status sent = writeFrame(h.to, request);
  if (sent.ok()) {
    if (Status waited = awaitAnswer(h, deadline); !waited.ok()) {
      kill(h.pid, SIGKILL);
      stopHelper(h);
      return makeError(ErrorCode::IOError, waited.error().message + "; killed");
    }
  }
  Expected<json> answer = sent.ok() ? readFrame(h.from) : Expected<json>(sent.takeError());
  if (answer.ok()) {
    if (answer->contains("error")) return makeError(ErrorCode::Internal, (*answer)["error"].get<std::string>());
    return answer;
  }
  int status = 0;
  std::string why = answer.error().message;
  for (int i = 0; i < 100 && h.pid > 0; ++i) {
    if (waitpid(h.pid, &status, WNOHANG) == h.pid) {
      why = WIFSIGNALED(status) ? std::string("killed by signal ") + strsignal(WTERMSIG(status))
                                : "exited with status " + std::to_string(WEXITSTATUS(status));
      h.pid = -1;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  stopHelper(h);
  return makeError(ErrorCode::IOError, "the measuring helper died (" + why + ")");
}

// The protocol's settings, exactly (the helper is this program's own: nothing is bounded here as a
// job from the network is, job_wire.h).
json settingsToJson(const MeasureSettings& s) {
  return {{"timeout_s", s.timeoutSec}, {"min_time_s", s.measure.minTimeSec}, {"min_runs", s.measure.minRuns},
          {"max_runs", s.measure.maxRuns}, {"warmup", s.measure.warmup}, {"flush_cache", s.measure.flushCache},
          {"seed", s.seed}, {"ref_max_work", s.ref.maxWork}, {"ref_generic", s.ref.generic},
          {"build_threads", s.buildThreads}};
}

MeasureSettings settingsFromJson(const json& j) {
  MeasureSettings s;
  j.at("timeout_s").get_to(s.timeoutSec);
  j.at("min_time_s").get_to(s.measure.minTimeSec);
  j.at("min_runs").get_to(s.measure.minRuns);
  j.at("max_runs").get_to(s.measure.maxRuns);
  j.at("warmup").get_to(s.measure.warmup);
  j.at("flush_cache").get_to(s.measure.flushCache);
  j.at("seed").get_to(s.seed);
  j.at("ref_max_work").get_to(s.ref.maxWork);
  j.at("ref_generic").get_to(s.ref.generic);
  j.at("build_threads").get_to(s.buildThreads);
  return s;
}

class HelperMeasurer : public Measurer {
 public:
  HelperMeasurer(const ir::Kernel& k, const TargetDesc& t, const HelperBackend& b, const MeasureSettings& s) : s_(s) {
    init_ = {{"kernel", ir::printKernel(k)},
             {"target", targetToJson(t)},
             {"backend", {{"device", b.device}, {"index", b.deviceIndex}, {"emulated", b.emulated}, {"emulate_pre", b.emulatePre}}},
             {"settings", settingsToJson(s)}};
  }
  ~HelperMeasurer() override { stopHelper(h_); }

  Expected<std::vector<TrialResult>> measure(const std::vector<ir::Config>& batch) override {
    return run({{"op", "measure"}}, batch);
  }
  Expected<std::vector<TrialResult>> remeasure(const std::vector<ir::Config>& configs, int rounds) override {
    return run({{"op", "remeasure"}, {"rounds", rounds}}, configs);
  }

 private:
  Status ensureStarted() {
    if (h_.pid > 0) return {};
    TESSERA_ASSIGN(std::string path, findMeasureHelper(s_.helperPath));
    TESSERA_ASSIGN(h_, spawnHelper(path, false));
    TESSERA_TRY(call(h_, init_));
    return {};
  }

  std::vector<TrialResult> run(json request, const std::vector<ir::Config>& configs) {
    auto failAll = [&](const std::string& why) {
      std::vector<TrialResult> out(configs.size());
      for (size_t i = 0; i < configs.size(); ++i) {
        out[i].config = configs[i];
        out[i].status = TrialStatus::Crash;
        out[i].message = why;
      }
      return out;
    };
    if (configs.empty()) return {};
    json list = json::array();
    for (const auto& c : configs) list.push_back(json::parse(c.toJson()));
    request["configs"] = std::move(list);
    // Every candidate has its watchdog in the helper; building them gets a minute each on top.
    const double budget = 600 + double(configs.size()) * (s_.timeoutSec * (1 + request.value("rounds", 1)) + 60);
    Expected<json> answer = makeError(ErrorCode::Internal, "not measured");
    // A helper lost mid-batch (stopped, hung or killed from outside) is not the candidates' doing:
    // the batch goes once more to a fresh helper. Lost twice, the batch's results say why.
    for (int attempt = 0; attempt < 2; ++attempt) {
      if (Status st = ensureStarted(); !st.ok()) return failAll(st.error().message);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                                   std::chrono::duration<double>(budget));
      answer = call(h_, request, deadline);
      if (answer.ok() || answer.error().code != ErrorCode::IOError) break;
      std::fprintf(stderr, "tessera: %s; measuring its %zu candidates again in a fresh helper\n",
                   answer.error().message.c_str(), configs.size());
    }
    if (!answer.ok()) return failAll(answer.error().message);
    const json& results = (*answer)["results"];
    if (!results.is_array() || results.size() != configs.size()) {
      stopHelper(h_);
      return failAll("the measuring helper answered " + std::to_string(results.size()) + " results for " +
                     std::to_string(configs.size()) + " candidates");
    }
    std::vector<TrialResult> out;
    for (size_t i = 0; i < configs.size(); ++i) {
      auto r = trialFromJson(results[i]);
      if (!r.ok()) return failAll("the measuring helper's answer: " + r.error().message);
      r->config = configs[i];
      out.push_back(std::move(*r));
    }
    return out;
  }

  MeasureSettings s_;
  json init_;
  HelperProcess h_;
};

// The helper's side of a tune: the in-process protocol measurer, its children forked from here.
Expected<std::unique_ptr<Measurer>> helperMeasurer(const json& init, ir::Kernel& kernel, TargetDesc& target) {
  try {
    TESSERA_ASSIGN(kernel, ir::parseKernel(init.at("kernel").get<std::string>()));
    TESSERA_ASSIGN(target, targetFromJson(init.at("target")));
    MeasureSettings s = settingsFromJson(init.at("settings"));
    s.isolation = Isolation::Fork;
    const json& b = init.at("backend");
    if (!b.at("device").get<bool>()) return makeHostMeasurer(kernel, target, s);
    DeviceSettings d;
    d.device = b.at("index").get<int>();
    d.emulated = b.at("emulated").get<bool>();
    d.emulatePre = b.at("emulate_pre").get<bool>();
    return makeDeviceMeasurer(kernel, target, d, s);
  } catch (const json::exception& e) {
    return makeError(ErrorCode::InvalidArgument, std::string("measuring helper: bad start message: ") + e.what());
  }
}

}  // namespace

Expected<std::string> findMeasureHelper(const std::string& settingsPath) {
  if (!settingsPath.empty()) {
    if (executable(settingsPath)) return settingsPath;
    return makeError(ErrorCode::NotFound, "the measuring helper " + settingsPath + " is missing or not executable");
  }
  std::vector<fs::path> places;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&findMeasureHelper), &info) != 0 && info.dli_fname && *info.dli_fname) {
    std::error_code ec;
    fs::path self = fs::weakly_canonical(fs::path(info.dli_fname), ec);
    places.push_back(self.parent_path() / kHelperName);
  }
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) places.push_back(exe.parent_path() / kHelperName);
#ifdef TESSERA_MEASURE_HELPER_BUILD_PATH
  places.push_back(TESSERA_MEASURE_HELPER_BUILD_PATH);
#endif
  for (const auto& p : places)
    if (executable(p)) return p.string();
  return makeError(ErrorCode::NotFound, std::string("the measuring helper ") + kHelperName + " is missing (looked next to " +
                                            (places.empty() ? std::string("this program") : places.front().parent_path().string()) +
                                            "): reinstall Tessera, which installs it next to the tessera binary and the Python extension");
}

std::unique_ptr<Measurer> makeHelperMeasurer(const ir::Kernel& k, const TargetDesc& t, const HelperBackend& b,
                                             const MeasureSettings& s) {
  return std::make_unique<HelperMeasurer>(k, t, b, s);
}

Expected<std::string> probeThroughHelper(const TargetDesc& t, int index, const std::string& helperPath) {
  TESSERA_ASSIGN(std::string path, findMeasureHelper(helperPath));
  TESSERA_ASSIGN(HelperProcess h, spawnHelper(path, true));
  auto answer = call(h, json{{"target", targetToJson(t)}, {"index", index}});
  stopHelper(h);
  if (!answer.ok()) return answer.takeError();
  return (*answer).value("report", std::string("error\nthe measuring helper gave no report"));
}

int measureHelperMain(int argc, char** argv) {
  int in = -1, out = -1;
  pid_t parent = 0;
  bool probe = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--probe") probe = true;
    else if (i + 1 < argc && a == "--in") in = std::atoi(argv[++i]);
    else if (i + 1 < argc && a == "--out") out = std::atoi(argv[++i]);
    else if (i + 1 < argc && a == "--parent") parent = pid_t(std::atoll(argv[++i]));
  }
  if (in < 0 || out < 0 || parent <= 0 || fcntl(in, F_GETFD) < 0 || fcntl(out, F_GETFD) < 0) {
    std::fprintf(stderr, "tessera-measure: this program measures candidates for tessera and is started by it, not by hand\n");
    return 2;
  }
  // Ctrl-C reaches the whole process group: the tuner decides what it means (cmd_tune.cpp).
  signal(SIGINT, SIG_IGN);
  signal(SIGPIPE, SIG_IGN);
  // Never outlive the tuner: its end of the pipe closing ends the loop below, and a parent killed
  // mid-batch is noticed here (the candidates' children die with this process: PR_SET_PDEATHSIG).
  std::thread([parent] {
    while (getppid() == parent) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    _exit(3);
  }).detach();

  auto first = readFrame(in);
  if (!first.ok()) return 0;
  if (probe) {
    auto t = targetFromJson((*first).value("target", json::object()));
    std::string report = t.ok() ? openDeviceReport(*t, (*first).value("index", 0)) : "error\n" + t.error().message;
    return writeFrame(out, json{{"report", report}}).ok() ? 0 : 1;
  }
  ir::Kernel kernel;
  TargetDesc target;
  auto m = helperMeasurer(*first, kernel, target);
  if (!m.ok()) {
    (void)writeFrame(out, json{{"error", m.error().message}});
    return 1;
  }
  if (!writeFrame(out, json{{"ok", true}}).ok()) return 1;
  while (true) {
    auto req = readFrame(in);
    if (!req.ok()) return 0;  // the tuner closed its end: done
    std::vector<ir::Config> configs;
    std::string bad;
    for (const auto& c : (*req).value("configs", json::array())) {
      auto cfg = ir::Config::fromJson(c.dump());
      if (!cfg.ok()) bad = cfg.error().message;
      else configs.push_back(std::move(*cfg));
    }
    if (!bad.empty()) {
      if (!writeFrame(out, json{{"error", "measuring helper: bad config: " + bad}}).ok()) return 1;
      continue;
    }
    const std::string op = (*req).value("op", "");
    Expected<std::vector<TrialResult>> results = std::vector<TrialResult>{};
    if (op == "measure") results = (*m)->measure(configs);
    else if (op == "remeasure") results = (*m)->remeasure(configs, (*req).value("rounds", 1));
    else {
      if (!writeFrame(out, json{{"error", "measuring helper: unknown request '" + op + "'"}}).ok()) return 1;
      continue;
    }
    if (!results.ok()) {
      if (!writeFrame(out, json{{"error", "measuring helper: " + results.error().message}}).ok()) return 1;
      continue;
    }
    json list = json::array();
    for (const auto& r : *results) list.push_back(trialToJson(r));
    if (!writeFrame(out, json{{"results", std::move(list)}}).ok()) return 1;
  }
}

}  // namespace tessera::measure
