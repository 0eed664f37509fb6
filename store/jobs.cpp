// Owns the engine-independent parts of the job queue contract (jobs.h).
#include "store/jobs.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <string_view>
#include <vector>

#include "store/record_json.h"
#include "support/hash.h"

namespace tessera::cache {

nlohmann::json workerInfoToJson(const WorkerInfo& w) {
  return nlohmann::json{{"id", w.id},
                        {"token", w.token},
                        {"target", w.target},
                        {"arch", w.arch},
                        {"units", w.units},
                        {"model", w.model},
                        {"device", w.device},
                        {"host", w.host},
                        {"tessera_version", w.tessera_version},
                        {"llvm_version", w.llvm_version},
                        {"toolkit_version", w.toolkit_version},
                        {"driver_version", w.driver_version},
                        {"runtime_version", w.runtime_version},
                        {"slots", w.slots},
                        {"live", w.live},
                        {"leased", w.leased},
                        {"registered_at", w.registered_at},
                        {"last_seen", w.last_seen},
                        {"quarantined", w.quarantined},
                        {"probe_signature", w.probe_signature}};
}

std::optional<ReportResult> settledReport(const std::string& state, const std::string& holder,
                                          const std::string& worker_id, int64_t record_id,
                                          const std::string& past_holders) {
  ReportResult res;
  if (state != "done") {
    // The first report of any worker that leased the item wins (a slow honest holder whose item
    // was taken over loses only the race to report, not its measurement).
    if ((state == "leased" && holder == worker_id) || listHas(past_holders, worker_id)) return std::nullopt;
    res.outcome = ReportOutcome::NotLeased;
    return res;
  }
  if (holder != worker_id) {
    res.outcome = ReportOutcome::NotLeased;
    return res;
  }
  res.outcome = ReportOutcome::Duplicate;
  res.put.id = record_id;
  res.put.duplicate = true;
  return res;
}

bool refusedBy(const std::string& refused_by, const std::string& worker_id) {
  size_t at = 0;
  while (at < refused_by.size()) {
    const size_t end = std::min(refused_by.find(',', at), refused_by.size());
    const std::string_view entry = std::string_view(refused_by).substr(at, end - at);
    const size_t colon = entry.find(':');
    if ((colon == std::string_view::npos ? entry : entry.substr(colon + 1)) == worker_id) return true;
    at = end + 1;
  }
  return false;
}

bool listHas(const std::string& comma_list, const std::string& item) {
  size_t at = 0;
  while (at <= comma_list.size()) {
    const size_t end = std::min(comma_list.find(',', at), comma_list.size());
    if (comma_list.compare(at, end - at, item) == 0) return true;
    at = end + 1;
  }
  return false;
}

namespace {
void listAdd(std::string& comma_list, const std::string& item) {
  if (item.empty() || listHas(comma_list, item)) return;
  comma_list += (comma_list.empty() ? "" : ",") + item;
}
// A refusal is listed as "token:worker_id" (a plain worker id in stores from before refusals were
// counted per token, standing for a token of its own).
std::string_view refuserToken(std::string_view entry) { return entry.substr(0, entry.find(':')); }
int64_t refusingTokens(const std::string& refused_by) {
  std::vector<std::string_view> tokens;
  size_t at = 0;
  while (at < refused_by.size()) {
    const size_t end = std::min(refused_by.find(',', at), refused_by.size());
    const std::string_view t = refuserToken(std::string_view(refused_by).substr(at, end - at));
    if (std::find(tokens.begin(), tokens.end(), t) == tokens.end()) tokens.push_back(t);
    at = end + 1;
  }
  return static_cast<int64_t>(tokens.size());
}
// How many entries of a comma list are `item` (lost_tokens lists a token once per expiry).
int64_t listCount(const std::string& comma_list, std::string_view item) {
  int64_t n = 0;
  size_t at = 0;
  while (at < comma_list.size()) {
    const size_t end = std::min(comma_list.find(',', at), comma_list.size());
    n += std::string_view(comma_list).substr(at, end - at) == item;
    at = end + 1;
  }
  return n;
}
int64_t distinctEntries(const std::string& comma_list) {
  std::vector<std::string_view> seen;
  size_t at = 0;
  while (at < comma_list.size()) {
    const size_t end = std::min(comma_list.find(',', at), comma_list.size());
    const std::string_view e = std::string_view(comma_list).substr(at, end - at);
    if (std::find(seen.begin(), seen.end(), e) == seen.end()) seen.push_back(e);
    at = end + 1;
  }
  return static_cast<int64_t>(seen.size());
}
LeaseStep giveUp(LeaseStep s, int64_t attempts, bool total_bound) {
  s.kind = LeaseStep::GiveUp;
  s.attempts = attempts;
  s.total_bound = total_bound;
  return s;
}
}  // namespace

int64_t leasesPerItem(const QueuePolicy& p) { return int64_t{p.max_attempts} * kLeasesPerAttempt; }

LeaseStep leaseStep(const LeaseCandidate& c, const std::string& worker_id, const std::string& token, int64_t held,
                    const QueuePolicy& p, const std::function<int64_t(const std::string&)>& others_live) {
  LeaseStep s;
  s.lost_workers = c.lost_workers;
  s.lost_tokens = c.lost_tokens;
  s.stolen_by = c.stolen_by;
  if (refusedBy(c.refused_by, worker_id)) return s;  // it refused this item once; another worker's turn
  s.mine = c.state == "leased" && c.holder == worker_id;
  // The total bound, whatever the tokens (the per-token rules below bound each token; this bounds
  // the item): a candidate leased this often without a report is given up, so a tune always ends.
  const bool spent = !s.mine && c.attempts >= leasesPerItem(p);
  if (c.state == "leased" && !s.mine && !c.expired) {
    // Held by a live worker: taken over only by an idle worker of another token that has not
    // spent its expiries of the item, and only once it was held for steal_after_s (a hoarder's
    // items; not a loss of the holder's, whose report is still taken if it comes first).
    if (held > 0 || c.holder_token == token || c.held_s < p.steal_after_s ||
        tokenSpentItsExpiries(c.lost_tokens, token) || listCount(c.stolen_by, token) >= kTakeOversPerToken)
      return s;
    s.lost_workers += (s.lost_workers.empty() ? "" : ",") + c.holder;
    s.stolen_by += (s.stolen_by.empty() ? "" : ",") + token;
    if (spent) return giveUp(s, c.attempts, true);
    s.kind = LeaseStep::Take;
    s.attempts = c.attempts + 1;
    return s;
  }
  const bool taken_over = c.state == "leased" && !s.mine;  // its holder's lease expired
  if (taken_over) {
    s.lost_workers += (s.lost_workers.empty() ? "" : ",") + c.holder;
    // Listed once per expiry: a vanished worker costs its item one attempt per token, however many
    // ids that token rotates, and its token's expiries of the item are counted.
    s.lost_tokens += (s.lost_tokens.empty() ? "" : ",") + (c.holder_token.empty() ? c.holder : c.holder_token);
    if (distinctEntries(s.lost_tokens) >= p.max_attempts) return giveUp(s, c.attempts, false);
  }
  if (spent) return giveUp(s, c.attempts, true);
  // Issue 47: the expiries of one token are bounded per token, not in total (one token leasing
  // under fresh ids and letting the leases expire gave every item up after 12). Past the bound the
  // token's workers leave the item to other tokens' live workers; with none (a tune whose only
  // fleet is this token) it is given up, as a refusal is (refusalStep).
  if (listCount(s.lost_tokens, token) >= kExpiriesPerToken && !s.mine) {
    if (others_live && others_live(s.lost_tokens) > 0) return LeaseStep{};
    return giveUp(s, c.attempts, false);
  }
  s.kind = LeaseStep::Take;
  s.attempts = s.mine ? c.attempts : c.attempts + 1;
  return s;
}

bool tokenSpentItsExpiries(const std::string& lost_tokens, const std::string& token) {
  return listCount(lost_tokens, token) >= kExpiriesPerToken;
}

int leaseBudget(int requested, int64_t slots, int64_t held_by_worker, int64_t held_by_token, const QueuePolicy& p) {
  const int64_t token_room = int64_t{p.max_leased_per_token} - (held_by_token - held_by_worker);
  return static_cast<int>(std::max<int64_t>(0, std::min({int64_t{requested}, std::max<int64_t>(slots, 1), token_room})));
}

RefusalStep refusalStep(const std::string& refused_by, const std::string& token, const std::string& worker_id,
                        int64_t others_live, const QueuePolicy& p) {
  RefusalStep s;
  s.refused_by = refused_by;
  listAdd(s.refused_by, token.empty() ? worker_id : token + ":" + worker_id);
  s.finished = others_live <= 0 || refusingTokens(s.refused_by) >= p.max_attempts;
  return s;
}

Expected<std::string> checkWorkerProbe(const WorkerInfo& w, const nlohmann::json& probe) {
  auto bad = [](const std::string& what) { return makeError(ErrorCode::InvalidArgument, what); };
  if (!probe.is_object()) return bad("probe: expected an object");
  for (const auto& [k, v] : probe.items())
    if (k != "model" && k != "cores" && k != "isa" && k != "l1d" && k != "l2" && k != "l3")
      return bad("probe." + k + ": not a probe field (model, cores, isa, l1d, l2, l3)");
  auto model = probe.find("model");
  if (model == probe.end() || !model->is_string() || model->get_ref<const std::string&>().size() > 256)
    return bad("probe.model: expected the probed CPU or device name");
  for (const char* k : {"cores", "l1d", "l2", "l3"})
    if (auto it = probe.find(k); it != probe.end() && (!it->is_number_integer() || it->get<int64_t>() < 0 ||
                                                       it->get<int64_t>() > (int64_t{1} << 40)))
      return bad(std::string("probe.") + k + ": expected a count");
  std::vector<std::string> isa;
  if (auto it = probe.find("isa"); it != probe.end()) {
    if (!it->is_array() || it->size() > 64) return bad("probe.isa: expected the probed ISA flags");
    for (const auto& f : *it) {
      if (!f.is_string() || f.get_ref<const std::string&>().size() > 32) return bad("probe.isa: expected flag names");
      isa.push_back(f.get<std::string>());
    }
  }
  if (model->get_ref<const std::string&>() != w.model)
    return bad("model: '" + w.model + "' is not the probed '" + model->get<std::string>() + "' (probe.model)");
  if (w.target == "host") {
    const int64_t cores = probe.value("cores", int64_t{0});
    if (cores > 0 && w.units > cores)
      return bad("units: " + std::to_string(w.units) + " threads on a machine the probe found " + std::to_string(cores) +
                 " cores in (probe.cores)");
    const auto has = [&](const char* f) { return std::find(isa.begin(), isa.end(), f) != isa.end(); };
    const char* need = w.arch == "x86-64-v4" ? "avx512f" : w.arch == "x86-64-v3" ? (has("avx2") ? "fma" : "avx2") : nullptr;
    if (need && !has(need))
      return bad("arch: " + w.arch + " needs " + need + ", which the probe's ISA flags lack (probe.isa)");
  }
  nlohmann::json canon = probe;
  std::sort(isa.begin(), isa.end());
  if (canon.contains("isa")) canon["isa"] = isa;
  return sha256Hex(dumpJson(canon)).substr(0, 16);
}

bool isJobId(std::string_view s) {
  if (s.size() != 32) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

std::string lostItemResult(int64_t attempts, const std::string& lost_workers, bool total_bound) {
  const std::string why = total_bound ? "leased " + std::to_string(attempts) +
                                            " times without a report, the most one item may be leased"
                                      : "its lease expired " + std::to_string(attempts) + " times";
  return dumpJson(nlohmann::json{
      {"lost", attempts}, {"message", "not measured: " + why + " (workers that held it: " + lost_workers + ")"}});
}

namespace {
std::string ph(bool numbered, int n) { return (numbered ? "$" : "?") + std::to_string(n); }
}  // namespace

std::string jobListSql(bool numbered) {
  const std::string now = "CAST(" + ph(numbered, 1) + " AS DOUBLE PRECISION)";
  return "SELECT j.id, j.submitter, j.kind, j.key_json, j.model, j.state, j.items, j.done_items, j.created_at,"
         " j.finished_at, (SELECT count(*) FROM job_items i WHERE i.job_id = j.id AND i.state = 'leased'"
         " AND i.lease_expires >= " + now + ") FROM jobs j WHERE (" + ph(numbered, 2) + " = '' OR j.submitter = " +
         ph(numbered, 2) + ") ORDER BY j.seq DESC LIMIT CAST(" + ph(numbered, 3) + " AS BIGINT)";
}

std::string jobHoldersSql(bool numbered) {
  return "SELECT DISTINCT worker_id FROM job_items WHERE job_id = " + ph(numbered, 1) +
         " AND state = 'leased' AND lease_expires >= CAST(" + ph(numbered, 2) + " AS DOUBLE PRECISION) ORDER BY worker_id";
}

std::string queueTotalsSql(bool numbered) {
  const std::string now = "CAST(" + ph(numbered, 1) + " AS DOUBLE PRECISION)";
  return "SELECT (SELECT count(*) FROM jobs WHERE state = 'open'),"
         " (SELECT coalesce(sum(items), 0) FROM jobs WHERE state = 'open'),"
         " (SELECT count(*) FROM job_items i JOIN jobs j ON j.id = i.job_id WHERE j.state = 'open'"
         " AND i.state = 'leased' AND i.lease_expires >= " + now + "),"
         " (SELECT coalesce(sum(done_items), 0) FROM jobs WHERE state = 'open')";
}

double epochSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace tessera::cache
