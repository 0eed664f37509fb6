// Owns the trust rule (trust.h): agreement within the noise, settling a group of measurements of
// one config, and the winner rank.
#include "store/trust.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace tessera::cache {

namespace {
constexpr std::string_view kNames[] = {"disputed", "refuted", "claim", "confirmed", "vouched"};
constexpr std::string_view kTierNames[] = {"estimate", "claim", "reproduced"};
}  // namespace

std::string_view trustName(Trust t) { return kNames[static_cast<int>(t) + 2]; }

std::optional<Trust> parseTrust(std::string_view s) {
  for (int i = 0; i < 5; ++i)
    if (kNames[i] == s) return static_cast<Trust>(i - 2);
  return std::nullopt;
}

Tier tierOf(Trust t, bool estimated) {
  if (estimated) return Tier::Estimate;
  return isConfirmed(t) ? Tier::Reproduced : Tier::Claim;
}

std::string_view tierName(Tier t) { return kTierNames[static_cast<int>(t)]; }

std::optional<Tier> parseTier(std::string_view s) {
  for (int i = 0; i < 3; ++i)
    if (kTierNames[i] == s) return static_cast<Tier>(i);
  return std::nullopt;
}

bool timesAgree(double a_us, double b_us, double factor) {
  if (!(a_us > 0) || !(b_us > 0) || !std::isfinite(a_us) || !std::isfinite(b_us)) return false;
  return std::max(a_us, b_us) <= factor * std::min(a_us, b_us);
}

double spotCheckFactor(const std::string& target, const std::string& worker_model, const std::string& checker_model,
                       double agree_factor) {
  if (target != "host" || (!worker_model.empty() && worker_model == checker_model)) return agree_factor;
  return std::max(agree_factor, kOtherModelAgreeFactor);
}

bool contradicts(double claimed_us, double measured_us, double factor) {
  if (!(claimed_us > 0) || !std::isfinite(claimed_us)) return true;
  return measured_us > factor * factor * claimed_us;
}

std::vector<std::pair<int64_t, Trust>> settleTrust(const std::vector<Measurement>& group, double factor) {
  std::vector<std::pair<int64_t, Trust>> changed;
  for (const Measurement& m : group) {
    // Vouched stays vouched; a reader's dispute stays until another identity reproduces the claim,
    // and holds every record of the disputed writer's config (a claim posted again is the same word).
    const bool disputed = std::any_of(group.begin(), group.end(), [&](const Measurement& o) {
      return o.writer == m.writer && o.trust == Trust::Disputed;
    });
    const Trust alone = disputed ? Trust::Disputed : Trust::Claim;
    Trust want = m.trust == Trust::Vouched ? Trust::Vouched : alone;
    if (want != Trust::Vouched) {
      bool agreed = false, refuted = false;
      for (const Measurement& o : group) {
        if (o.id == m.id || o.writer == m.writer || o.by_worker) continue;  // never the same identity twice
        agreed = agreed || (!m.by_worker && timesAgree(m.median_us, o.median_us, factor));
        refuted = refuted || contradicts(m.median_us, o.median_us, factor);
      }
      want = agreed ? Trust::Confirmed : refuted ? Trust::Refuted : alone;
    }
    if (want != m.trust) changed.emplace_back(m.id, want);
  }
  return changed;
}

std::vector<std::pair<int64_t, Trust>> settleKey(const std::vector<ConfigMeasurement>& records, double factor) {
  std::map<std::string_view, std::vector<Measurement>> groups;
  for (const ConfigMeasurement& r : records) groups[r.config].push_back(r.m);
  std::vector<std::pair<int64_t, Trust>> changed;
  for (const auto& [config, group] : groups)
    for (auto& c : settleTrust(group, factor)) changed.push_back(c);
  return changed;
}

std::optional<int> winnerRank(Trust t, bool remeasured) {
  if (t == Trust::Refuted) return std::nullopt;
  if (t == Trust::Disputed) return -1;
  return isConfirmed(t) ? 2 + (remeasured ? 1 : 0) : 0;
}

}  // namespace tessera::cache
