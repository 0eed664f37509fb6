// Owns the config resolution of bundle entries (see resolve.h): exact winner, exact estimate,
// nearest legal tuned shape, default.
#include "bundle/resolve.h"

#include <algorithm>

#include "measure/records.h"
#include "search/space.h"
#include "store/list_all.h"

namespace tessera::bundle {
namespace {

// The record's config if the space of the asked kernel accepts it; otherwise why not.
Expected<ir::Config> legalConfig(const ir::Space& space, const cache::Record& r) {
  TESSERA_ASSIGN(ir::Config c, ir::Config::fromJson(r.config));
  if (auto why = space.check(c)) return makeError(ErrorCode::InvalidConfig, *why);
  return c;
}

}  // namespace

Expected<std::vector<Candidate>> resolveCandidates(const ir::Kernel& k, const TargetDesc& t, const RecordSources& src,
                                                   const ResolveSettings& s, std::vector<std::string>* notes) {
  TESSERA_ASSIGN(ir::Space space, search::makeSpace(k, t));
  const cache::HardKey key = measure::hardKeyFor(k, t);
  const std::string keyId = cache::keyIdOf(key);
  const std::string shape = cache::formatShape(key.shape);
  std::vector<Candidate> out;
  std::vector<cache::NearestMatch> nearby;
  auto note = [&](const std::string& n) {
    if (notes) notes->push_back(n);
  };
  auto consider = [&](const cache::Record& r, const std::string& source, const std::string& from, double distance) {
    if (s.reproducedOnly && r.status == cache::RecordStatus::Ok && !cache::isConfirmed(r.trust)) {
      note(source + " record (shape " + cache::formatShape(r.key.shape) + ", from " + from + ") not used: a " +
           std::string(cache::trustName(r.trust)) + " of token " + (r.writer.empty() ? "?" : r.writer) +
           ", not reproduced (--trust reproduced)");
      return;
    }
    for (const auto& c : out)
      if (c.record && c.record->config == r.config && c.source == source) return;  // the same config again
    auto cfg = legalConfig(space, r);
    if (!cfg.ok()) {
      note(source + " record (shape " + cache::formatShape(r.key.shape) + ", from " + from + ") not used: " +
           cfg.error().message);
      return;
    }
    out.push_back({*cfg, source, r, from, distance});
  };

  // 1. The measured winner of this very key: the local store, then the shared cache.
  if (src.store) {
    auto b = src.store->best(keyId);
    if (!b.ok()) note("store " + src.storeName + ": " + b.error().message);
    else if (*b) consider((*b)->record, "exact", src.storeName, 0);
  }
  if (src.client && src.client->enabled()) {
    cache::LookupResult r = src.client->best(key, src.current, true);
    if (!r.warning.empty()) note("shared cache: " + r.warning);
    if (r.kind == cache::LookupResult::Kind::Hit && r.record) {
      consider(*r.record, "exact", src.client->options().base_url, 0);
      // A winner that is not reproduced may be refuted here: the next candidates of the key in the
      // winner order follow it, so the bundle falls back to them instead of to an untuned default.
      if (!cache::isConfirmed(r.record->trust) && s.sharedFallbacks > 0) {
        auto more = src.client->candidates(keyId, s.sharedFallbacks + 1);
        if (!more.ok()) note("shared cache: " + more.error().message);
        else
          for (const cache::Record& c : *more)
            if (c.id != r.record->id) consider(c, "exact", src.client->options().base_url, 0);
      }
    } else if (r.kind == cache::LookupResult::Kind::Nearest)
      for (auto& n : r.nearest) nearby.push_back(n);
  }
  // 2. Nothing measured for this key: its best estimate (estimates never win a key, so the
  // store's winner lookup does not return them).
  if (out.empty() && src.store) {
    cache::ListQuery q;
    q.key_id = keyId;
    q.status = "estimated";
    auto est = cache::listAll(*src.store, q, 1000);
    if (est.ok() && !est->empty()) {
      auto best = std::min_element(est->begin(), est->end(),
                                   [](const cache::Record& a, const cache::Record& b) { return a.median_us < b.median_us; });
      consider(*best, "exact", src.storeName, 0);
    }
  }
  // 3. Winners of nearby shapes (and of other workloads of the family at the same shape), closest
  // first, whose configs the space rules accept at this shape.
  if (src.store) {
    auto near = src.store->nearest(key, s.nearestLimit);
    if (near.ok())
      for (auto& n : *near) nearby.push_back(n);
  }
  std::stable_sort(nearby.begin(), nearby.end(),
                   [](const cache::NearestMatch& a, const cache::NearestMatch& b) { return a.distance < b.distance; });
  int considered = 0;
  for (const auto& n : nearby) {
    if (n.record.key_id == keyId) continue;  // the key itself: handled above
    if (considered++ >= s.nearestLimit) break;
    // The same workload measured on another machine of this arch (other core count) is this kernel.
    bool same = n.record.key.workload == key.workload && n.record.key.shape == key.shape;
    std::string from = n.record.provenance.host.empty() ? src.storeName : n.record.provenance.host;
    consider(n.record, same ? "exact" : "nearest", same ? from : src.storeName, n.distance);
  }
  // 4. The default, labelled untuned. Why nothing stored answered: the nearest record's key
  // fields that differ (another --threads is the usual one).
  std::string nearestWhy;
  if (!nearby.empty()) {
    std::string diff;
    for (const auto& d : cache::keyDifferences(key, nearby.front().record.key)) diff += (diff.empty() ? "" : "; ") + d;
    nearestWhy = "; the nearest stored record differs in " + diff;
  }
  if (out.empty() || s.missing == MissingPolicy::Default) {
    bool tuned = !out.empty();
    if (!tuned && s.missing == MissingPolicy::Fail)
      return makeError(ErrorCode::NotFound, "no tuned config for " + k.name + " (" + shape + ") on " + t.name +
                                                " in the store or the cache, and none of a nearby shape is legal here" +
                                                nearestWhy);
    if (!tuned && s.missing == MissingPolicy::Skip) {
      note("no tuned config for " + k.name + " on " + t.name + ": left out" + nearestWhy);
      return out;
    }
    if (!tuned) note("no tuned config for " + k.name + " on " + t.name + ": the space's default (untuned)" + nearestWhy);
    out.push_back({space.defaults(), "default", std::nullopt, "", 0});
  }
  return out;
}

}  // namespace tessera::bundle
