// Owns the remote measurer: a batch becomes a job, its items' records come back as results.
#include "measure/remote_measurer.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <thread>

#include "ir/families.h"
#include "ir/text.h"
#include "measure/job_wire.h"
#include "measure/records.h"

namespace tessera::measure {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string describe(const TargetDesc& t) {
  return t.name + " (" + t.arch + ", " + std::to_string(t.units) + (t.isGpu() ? " SMs/CUs)" : " threads)");
}

std::string noWorkerLine(const TargetDesc& t, const RemoteSettings& s, double waited) {
  std::string urls;
  for (const auto& u : s.service.urls) urls += (urls.empty() ? "" : ",") + u;
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.0f", waited);
  return "no live worker for " + describe(t) + " at " + urls + " after " + secs + " s; start one there: tessera worker --cache " +
         (s.service.urls.empty() ? std::string("URL") : s.service.urls.front()) + " --target " + t.name +
         (s.hostThreads > 0 ? " --threads " + std::to_string(s.hostThreads) : "");
}

class RemoteMeasurer : public Measurer {
 public:
  RemoteMeasurer(const ir::Kernel& k, const WorkerTarget& w, const RemoteSettings& s)
      : w_(w), s_(s), client_(s.service), key_(hardKeyFor(k, w.target)), kernelText_(ir::printKernel(k)),
        computeBound_(ir::isComputeBound(k)), settings_(measureSettingsJson(s.measure)), started_(Clock::now()) {}

  Expected<std::vector<TrialResult>> measure(const std::vector<ir::Config>& batch) override {
    // One item per distinct config (a job's items are identified by their config).
    std::vector<std::string> configs;
    std::vector<size_t> slot(batch.size());
    for (size_t i = 0; i < batch.size(); ++i) {
      const std::string c = batch[i].toJson();
      auto it = std::find(configs.begin(), configs.end(), c);
      slot[i] = size_t(it - configs.begin());
      if (it == configs.end()) configs.push_back(c);
    }
    TESSERA_ASSIGN(cache::JobSpec job, newJob(cache::kJobMeasure));
    trials_ += int64_t(configs.size());
    TESSERA_ASSIGN(std::vector<cache::JobItemProgress> items, run(job, configs));
    std::vector<TrialResult> out;
    for (size_t i = 0; i < batch.size(); ++i) out.push_back(resultOf(job.id, items[slot[i]], batch[i], 0, true));
    return out;
  }

  Expected<std::vector<TrialResult>> remeasure(const std::vector<ir::Config>& configs, int rounds) override {
    if (configs.empty()) return std::vector<TrialResult>{};
    TESSERA_ASSIGN(cache::JobSpec job, newJob(cache::kJobRemeasure));
    job.rounds = std::max(1, rounds);
    std::vector<std::string> texts;
    for (const auto& c : configs) texts.push_back(c.toJson());
    TESSERA_ASSIGN(std::vector<cache::JobItemProgress> items, run(job, texts));
    std::vector<TrialResult> out;
    for (size_t i = 0; i < configs.size(); ++i) out.push_back(resultOf(job.id, items[0], configs[i], i, false));
    return out;
  }

 private:
  // The measuring backend itself gone: what was measured before is stored, and --resume continues.
  static Error gone(std::string why) { return makeError(ErrorCode::Unavailable, std::move(why)); }

  Expected<cache::JobSpec> newJob(const char* kind) {
    cache::JobSpec j;
    auto id = cache::newJobId();
    if (!id.ok()) return gone(id.error().message);
    j.id = *id;
    j.kind = kind;
    j.key = key_;
    j.model = w_.model;
    j.kernel = kernelText_;
    j.settings = settings_;
    j.first_trial = trials_;
    j.elapsed_s = since(started_);
    return j;
  }

  void warn(const std::string& w) const {
    if (s_.onWarning) s_.onWarning(w);
  }

  // Submits the job and waits until every item is done; an error when the tune cannot go on.
  Expected<std::vector<cache::JobItemProgress>> run(const cache::JobSpec& job,
                                                    const std::vector<std::string>& configs) {
    auto sub = client_.submit(job, configs);
    if (!sub.ok()) return gone("submitting a measurement job: " + sub.error().message);
    double poll = 0.02;
    std::optional<Clock::time_point> alone;  // since when no live worker could take the job
    for (;;) {
      std::this_thread::sleep_for(std::chrono::duration<double>(poll));
      poll = std::min(poll * 1.5, s_.pollSec);
      auto p = client_.progress(job.id);
      if (!p.ok()) {
        (void)client_.cancel(job.id);
        return gone("following measurement job " + job.id + ": " + p.error().message);
      }
      if (p->state == "done") {
        // An item is finished as refused only when no other worker would take it (fair leasing,
        // jobs.h): one worker's refusal costs nothing; a job no worker runs ends the tune.
        const bool all_refused = std::all_of(p->items.begin(), p->items.end(), [](const cache::JobItemProgress& it) {
          return it.result && !it.result->refused.empty();
        });
        if (all_refused && !p->items.empty())
          return gone("every worker refused the job (" + p->items.front().result->worker + ": " +
                      p->items.front().result->refused + ")");
        return std::move(p->items);
      }
      if (p->state == "cancelled") return gone("measurement job " + job.id + " was cancelled by the service");
      // Items leased to a worker are in hand (a dead worker's lease expires and its item returns
      // to the queue); only a job that no live worker can take is waiting for nothing.
      if (p->live_workers > 0) {
        alone.reset();
      } else {
        if (!alone) alone = Clock::now();
        if (since(*alone) > s_.noWorkerTimeoutSec) {
          (void)client_.cancel(job.id);
          return gone(noWorkerLine(w_.target, s_, since(*alone)));
        }
      }
    }
  }

  TrialResult resultOf(const std::string& job_id, const cache::JobItemProgress& item, const ir::Config& cfg,
                       size_t index, bool shared) const {
    TrialResult t;
    t.config = cfg;
    const auto& r = item.result;
    if (!r || r->lost) {
      // The queue gave up on it: its leases kept expiring, or it reached the bound on its leases.
      t.status = TrialStatus::Crash;
      t.message = r ? r->lost_message : "no result";
      return t;
    }
    if (!r->refused.empty()) {
      t.status = TrialStatus::Crash;
      t.message = "refused by every worker that could take it (" + r->worker + ": " + r->refused + ")";
      return t;
    }
    if (index >= r->records.size()) {
      t.status = TrialStatus::Crash;
      t.message = "worker " + r->worker + " sent no record for this config";
      return t;
    }
    const std::string msg = index < r->messages.size() ? r->messages[index] : "";
    t = trialFromRecord(r->records[index], msg, computeBound_, shared);
    t.config = cfg;
    t.origin->writer = r->token.empty() ? "worker-" + r->worker : r->token;
    t.origin->workerId = r->worker;
    t.origin->jobId = job_id;
    t.origin->item = item.item;
    if (r->records.size() == 1) {
      t.compileSeconds = r->compile_s;
      t.runSeconds = r->run_s;
    }
    return t;
  }

  WorkerTarget w_;
  RemoteSettings s_;
  cache::JobClient client_;
  cache::HardKey key_;
  std::string kernelText_;
  bool computeBound_;
  std::string settings_;
  Clock::time_point started_;
  int64_t trials_ = 0;
};

}  // namespace

Expected<WorkerTarget> chooseWorkerTarget(const TargetDesc& target, const RemoteSettings& s) {
  cache::JobClient client(s.service);
  const auto start = Clock::now();
  for (;;) {
    cache::WorkerFilter f;
    f.target = target.name;
    if (target.isGpu()) {
      f.arch = target.arch;
      f.units = target.units;
    } else if (s.hostThreads > 0) {
      f.units = s.hostThreads;
    }
    auto live = client.workers(f);
    if (!live.ok()) return live.takeError();
    // The largest group of identical hardware: a batch spread over them compares like with like.
    std::map<std::tuple<std::string, int64_t, std::string>, int64_t> groups;
    for (const auto& w : *live) ++groups[{w.arch, w.units, w.model}];
    if (!groups.empty()) {
      auto best = std::max_element(groups.begin(), groups.end(),
                                   [](const auto& a, const auto& b) { return a.second < b.second; });
      const auto& [arch, units, model] = best->first;
      WorkerTarget out;
      out.model = model;
      out.workers = best->second;
      if (target.isGpu()) {
        out.target = target;
      } else {
        auto t = hostTargetAs(arch);
        if (!t.ok()) return makeError(ErrorCode::InvalidArgument, "workers report host ISA level '" + arch + "': " + t.error().message);
        out.target = *t;
        out.target.units = int(units);
        out.target.model = model;
      }
      return out;
    }
    if (since(start) >= s.noWorkerTimeoutSec) return makeError(ErrorCode::NotFound, noWorkerLine(target, s, since(start)));
    std::this_thread::sleep_for(std::chrono::duration<double>(std::min(0.5, s.noWorkerTimeoutSec / 10 + 0.01)));
  }
}

std::unique_ptr<Measurer> makeRemoteMeasurer(const ir::Kernel& k, const WorkerTarget& w, const RemoteSettings& s) {
  return std::make_unique<RemoteMeasurer>(k, w, s);
}

}  // namespace tessera::measure
