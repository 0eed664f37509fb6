// Owns the worker loop: register, lease, build and measure each job's candidates here, report;
// a heartbeat thread renews the leases meanwhile.
#include "measure/worker.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <thread>

#include "ir/families.h"
#include "ir/text.h"
#include "ir/verifier.h"
#include <nlohmann/json.hpp>
#include "measure/job_wire.h"
#include "measure/records.h"

namespace tessera::measure {

namespace {

using Clock = std::chrono::steady_clock;

// A job as this worker holds it: the kernel parsed from its IR text and verified, its measurement
// settings, the measurer built for it while its items are measured (it holds the kernel's inputs,
// outputs and reference outputs: the job's memory), or why it is refused here.
struct JobContext {
  cache::JobSpec spec;
  std::unique_ptr<ir::Kernel> kernel;  // the measurer keeps a reference: declared first, destroyed last
  MeasureSettings settings;
  std::unique_ptr<Measurer> measurer;
  double bytes = 0;  // the kernel's tensors (ir::kernelBytes)
  bool computeBound = true;
  std::string refusal;
};

constexpr size_t kJobsKept = 4;

class Worker {
 public:
  explicit Worker(const WorkerSettings& s) : s_(s), client_(s.service) {}

  Expected<WorkerStats> run() {
    info_.id = s_.workerId;
    if (info_.id.empty()) {
      TESSERA_ASSIGN(info_.id, cache::newJobId());
    }
    info_.target = s_.target.name;
    info_.arch = s_.target.arch;
    info_.units = s_.target.units;
    info_.model = s_.model;
    info_.device = s_.deviceLabel;
    info_.host = s_.provenance.host;
    info_.tessera_version = s_.provenance.tessera_version;
    info_.llvm_version = s_.provenance.llvm_version;
    info_.toolkit_version = s_.toolkitVersion;
    info_.driver_version = s_.driverVersion;
    info_.runtime_version = s_.runtimeVersion;
    info_.slots = s_.slots;
    // What this start probed of the machine, which the service checks the registration against.
    nlohmann::json probe = {{"model", s_.model}};
    if (!s_.gpu)
      probe.update({{"cores", s_.target.cores},
                    {"isa", s_.target.isa},
                    {"l1d", s_.target.l1dBytes},
                    {"l2", s_.target.l2Bytes},
                    {"l3", s_.target.l3Bytes}});
    probe_ = probe.dump();
    TESSERA_ASSIGN(cache::WorkerGrant grant, client_.registerWorker(info_, probe_));
    log("registered as worker " + info_.id + " for " + s_.target.keyString() + " (" + s_.model + ") at " +
        client_.currentUrl() + "; leases " + std::to_string(int(grant.lease_s)) + " s, heartbeat every " +
        fmt(grant.heartbeat_s) + " s");
    std::thread beat([this, grant] { heartbeats(grant.heartbeat_s); });
    auto result = loop();
    {
      std::lock_guard<std::mutex> g(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    beat.join();
    // A clean stop (its last item done, SIGINT or SIGTERM): the service stops counting this worker
    // as live now rather than after its TTL, and its unfinished items go to other workers at once.
    auto released = client_.deregister(info_.id);
    if (!released.ok()) log("could not deregister: " + released.error().message);
    else if (*released > 0) log("gave back " + std::to_string(*released) + " unfinished items");
    return result;
  }

 private:
  static std::string fmt(double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.3g", v);
    return b;
  }
  void log(const std::string& line) const {
    if (s_.log) s_.log(line);
  }
  bool stopRequested() const { return s_.shouldStop && s_.shouldStop(); }

  // Sleeps up to `sec`, waking early when the worker stops.
  void pause(double sec) {
    const auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(sec));
    while (Clock::now() < until && !stopRequested()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }

  // The heartbeat thread has its own client (its own connections): a long report on the main
  // thread never delays a renewal.
  void heartbeats(double every) {
    cache::JobClient hb(s_.service);
    std::unique_lock<std::mutex> lk(mu_);
    while (!stopping_) {
      cv_.wait_for(lk, std::chrono::duration<double>(every));
      if (stopping_) break;
      lk.unlock();
      auto r = hb.heartbeat(info_.id);
      if (!r.ok() && r.error().code == ErrorCode::NotFound) (void)hb.registerWorker(info_, probe_);  // the service forgot us
      else if (!r.ok()) log("heartbeat: " + r.error().message);
      lk.lock();
    }
  }

  Expected<WorkerStats> loop() {
    while (!stopRequested() && !(s_.maxItems > 0 && stats_.items >= s_.maxItems)) {
      auto lease = client_.lease(info_.id, s_.slots);
      if (!lease.ok()) {
        if (lease.error().code == ErrorCode::NotFound) {
          log("the service does not know this worker: registering again");
          TESSERA_TRY(client_.registerWorker(info_, probe_));
          continue;
        }
        if (lease.error().code == ErrorCode::InvalidArgument) return lease.takeError();
        // Refused (quarantined, or the token revoked): asking again every few seconds changes
        // nothing and fills the log; the worker stops and says why once (an admin releases it).
        if (lease.error().code == ErrorCode::PermissionDenied)
          return makeError(ErrorCode::PermissionDenied,
                           "the service refuses this worker's leases (" + lease.error().message +
                               "): stopping rather than asking again; `tessera workers` shows why, and an admin "
                               "decides (a quarantine is lifted only there)");
        // The service is away (every replica): keep trying, a worker outlives an outage.
        log("lease: " + lease.error().message + "; retrying");
        pause(s_.idlePollSec * 4);
        continue;
      }
      if (lease->items.empty()) {
        // Idle: the jobs' tensors go back to the system (a worker holds memory only while it
        // measures; --max-job-mb bounds what it holds then).
        for (auto& c : jobs_) c->measurer.reset();
        pause(s_.idlePollSec);
        continue;
      }
      for (const cache::JobSpec& j : lease->jobs) remember(j);
      // Items of one job are built together (the pool) and measured one after another.
      std::vector<std::string> order;
      for (const auto& it : lease->items)
        if (std::find(order.begin(), order.end(), it.job_id) == order.end()) order.push_back(it.job_id);
      for (const std::string& job_id : order) {
        std::vector<cache::LeasedItem> items;
        for (const auto& it : lease->items)
          if (it.job_id == job_id) items.push_back(it);
        JobContext* ctx = find(job_id);
        if (!ctx) continue;  // not in the answer: the lease expires and another worker takes it
        process(*ctx, items);
      }
    }
    return stats_;
  }

  void remember(const cache::JobSpec& spec) {
    if (find(spec.id)) return;
    auto ctx = std::make_unique<JobContext>();
    ctx->spec = spec;
    ++stats_.jobs;
    prepare(*ctx);
    if (ctx->refusal.empty())
      log("job " + spec.id + ": " + spec.kind + " " + ctx->kernel->name + " (key " + spec.key_id.substr(0, 12) + ")");
    jobs_.push_front(std::move(ctx));
    if (jobs_.size() > kJobsKept) jobs_.pop_back();
  }

  JobContext* find(const std::string& id) {
    for (auto& c : jobs_)
      if (c->spec.id == id) return c.get();
    return nullptr;
  }

  // A worker runs nothing but what it compiled itself, from IR text it parsed with the parser's
  // limits and verified, and only when the kernel on this machine has exactly the job's key.
  void prepare(JobContext& c) {
    auto refuse = [&](const std::string& why) {
      c.refusal = why;
      log("job " + c.spec.id + " refused: " + why);
    };
    auto k = ir::parseKernel(c.spec.kernel);
    if (!k.ok()) return refuse("the kernel's IR text does not parse: " + k.error().message);
    if (Status v = ir::verify(*k); !v.ok()) return refuse("the kernel does not verify: " + v.error().message);
    c.kernel = std::make_unique<ir::Kernel>(std::move(*k));
    c.bytes = ir::kernelBytes(*c.kernel);
    if (c.bytes > s_.maxJobBytes) {
      char why[160];
      std::snprintf(why, sizeof why, "the kernel's tensors need %.0f MiB, more than this worker's limit of %.0f MiB",
                    c.bytes / (1 << 20), s_.maxJobBytes / (1 << 20));
      return refuse(why);
    }
    const cache::HardKey here = hardKeyFor(*c.kernel, s_.target);
    if (!(here == c.spec.key))
      return refuse("the kernel on this machine has key " + cache::canonicalKey(here) + ", the job says " +
                    cache::canonicalKey(c.spec.key));
    MeasureSettings defaults;
    defaults.buildThreads = s_.buildThreads;
    auto ms = measureSettingsFromJson(c.spec.settings, defaults);
    if (!ms.ok()) return refuse(ms.error().message);
    ms->buildThreads = s_.buildThreads;  // this machine's business, not the tuner's
    // A job may lower the reference check's work, never raise it past this worker's default: the
    // reference runs in this process, and a job is written by any write token.
    ms->ref.maxWork = std::min(ms->ref.maxWork, defaults.ref.maxWork);
    c.computeBound = ir::isComputeBound(*c.kernel);
    c.settings = *ms;
  }

  // The job's measurer, built now; the measurers of other jobs are released first (least
  // recently used) until every job held together fits --max-job-mb: the limit is the worker's,
  // not one job's (four jobs of 69 MiB under a 100 MiB limit held 480 MB).
  Measurer& measurerOf(JobContext& c) {
    if (!c.measurer) {
      double held = c.bytes;
      for (auto it = jobs_.begin(); it != jobs_.end(); ++it)
        if (it->get() != &c && (*it)->measurer) held += (*it)->bytes;
      for (auto it = jobs_.rbegin(); it != jobs_.rend() && held > s_.maxJobBytes; ++it)
        if (it->get() != &c && (*it)->measurer) {
          (*it)->measurer.reset();
          held -= (*it)->bytes;
        }
      c.measurer = s_.gpu ? makeDeviceMeasurer(*c.kernel, s_.target, s_.device, c.settings)
                          : makeHostMeasurer(*c.kernel, s_.target, c.settings);
    }
    // Most recently used first: the release above takes the oldest.
    for (auto it = jobs_.begin(); it != jobs_.end(); ++it)
      if (it->get() == &c) {
        std::rotate(jobs_.begin(), it, std::next(it));
        break;
      }
    return *c.measurer;
  }

  cache::Record recordOf(const TrialResult& t, const JobContext& c, int64_t item) const {
    cache::Provenance p = s_.provenance;
    p.created_at = cache::utcNow();
    return toRecord(t, c.spec.key, p, {c.spec.first_trial + item + 1, c.spec.elapsed_s});
  }

  void report(const JobContext& c, int64_t item, const std::vector<cache::Record>& recs,
              const std::vector<std::string>& messages, double compile_s, double run_s) {
    auto r = client_.report(info_.id, c.spec.id, item, recs, messages, compile_s, run_s);
    ++stats_.items;
    if (!r.ok()) {
      if (r.error().code == ErrorCode::Unsupported) ++stats_.lost;
      log("job " + c.spec.id + " item " + std::to_string(item) + ": " + r.error().message);
      return;
    }
    log("job " + c.spec.id + " item " + std::to_string(item) + ": " + (recs.size() == 1 ? std::string(
        cache::recordStatusName(recs[0].status)) : std::to_string(recs.size()) + " re-measured") + ", " + *r);
  }

  void process(JobContext& c, const std::vector<cache::LeasedItem>& items) {
    if (!c.refusal.empty()) {
      for (const auto& it : items) {
        auto r = client_.refuse(info_.id, c.spec.id, it.item, c.refusal);
        if (!r.ok()) log("job " + c.spec.id + ": " + r.error().message);
        ++stats_.refused;
      }
      return;
    }
    if (c.spec.kind == cache::kJobRemeasure) {
      for (const auto& it : items) {
        std::vector<ir::Config> configs;
        auto arr = nlohmann::json::parse(it.payload, nullptr, false);
        for (const auto& cfg : arr.is_array() ? arr : nlohmann::json::array()) {
          auto parsed = ir::Config::fromJson(cfg.dump());
          if (parsed.ok()) configs.push_back(*parsed);
        }
        auto rs = measurerOf(c).remeasure(configs, int(std::max<int64_t>(1, c.spec.rounds)));
        if (!rs.ok()) {
          c.refusal = "measuring here failed: " + rs.error().message;
          process(c, {it});
          continue;
        }
        std::vector<cache::Record> recs;
        std::vector<std::string> msgs;
        double compile = 0, run = 0;
        for (const auto& t : *rs) {
          recs.push_back(recordOf(t, c, it.item));
          msgs.push_back(t.message);
          compile += t.compileSeconds;
          run += t.runSeconds;
        }
        report(c, it.item, recs, msgs, compile, run);
      }
      return;
    }
    std::vector<ir::Config> configs;
    std::vector<int64_t> ids;
    for (const auto& it : items) {
      auto cfg = ir::Config::fromJson(it.payload);
      if (!cfg.ok()) {
        (void)client_.refuse(info_.id, c.spec.id, it.item, "the item's config is not a config: " + cfg.error().message);
        continue;
      }
      configs.push_back(*cfg);
      ids.push_back(it.item);
    }
    if (configs.empty()) return;
    auto measured = measurerOf(c).measure(configs);
    if (!measured.ok()) {
      c.refusal = "measuring here failed: " + measured.error().message;
      std::vector<cache::LeasedItem> left;
      for (const auto& it : items)
        if (std::find(ids.begin(), ids.end(), it.item) != ids.end()) left.push_back(it);
      process(c, left);
      return;
    }
    const std::vector<TrialResult>& rs = *measured;
    for (size_t i = 0; i < rs.size() && i < ids.size(); ++i)
      report(c, ids[i], {recordOf(rs[i], c, ids[i])}, {rs[i].message}, rs[i].compileSeconds, rs[i].runSeconds);
  }

  const WorkerSettings& s_;
  cache::JobClient client_;
  cache::WorkerInfo info_;
  std::string probe_;  // the registration's probe (JSON)
  WorkerStats stats_;
  std::deque<std::unique_ptr<JobContext>> jobs_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
};

}  // namespace

Expected<WorkerStats> runWorker(const WorkerSettings& s) { return Worker(s).run(); }

}  // namespace tessera::measure
