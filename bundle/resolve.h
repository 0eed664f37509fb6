// Owns choosing what a bundle compiles for one (kernel, target): the tuned winner of the exact key
// (local store, then the shared cache), an estimated record of that key when nothing was measured,
// else the winners of the nearest tuned shapes whose config the space rules accept at the asked
// shape (one config tuned at 4096 serving 4000), else the space's default. The result is an
// ordered list: the bundler compiles the first candidate that compiles and passes its check.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "client/client.h"
#include "store/record.h"
#include "store/store.h"
#include "ir/ir.h"
#include "ir/schedule.h"
#include "support/status.h"
#include "targets/target_desc.h"

namespace tessera::bundle {

// Where winners come from; either may be null.
struct RecordSources {
  cache::RecordStore* store = nullptr;
  std::string storeName;  // for provenance: "tessera.db"
  cache::CacheClient* client = nullptr;
  cache::Provenance current;  // this machine's, for the cache's staleness answer
};

struct Candidate {
  ir::Config config;
  // "exact": tuned for this kernel at this shape; "nearest": the config of another tuned shape
  // (or kernel), legal here by the space rules; "default": the space's default, untuned.
  std::string source;
  std::optional<cache::Record> record;  // exact / nearest: the record whose config this is
  std::string from;                     // the store name or the cache URL
  double distance = 0;                  // shapeDistance to the record's shape (nearest)
};

enum class MissingPolicy {
  Default,  // no tuned config: compile the space's default, labelled untuned
  Skip,     // leave the kernel out of the bundle (with a note)
  Fail,     // an error
};

struct ResolveSettings {
  MissingPolicy missing = MissingPolicy::Default;
  int nearestLimit = 8;  // nearby tuned shapes considered at most
  // Never a claim (one token's word) for an exact or nearest record: only reproduced records
  // (cache/trust.h, Tier) and estimates, labelled (`bundle --trust reproduced`).
  bool reproducedOnly = false;
  // Exact candidates of the shared cache taken after its winner (trust, then time): what the
  // bundle falls back to when it refutes the winner here.
  int sharedFallbacks = 4;
};

// Candidates for `k` on `t`, best first. Rejected records (illegal at this shape, configs that do
// not parse) are explained in `notes`. An empty list only with MissingPolicy::Skip; with Fail a
// NotFound error.
Expected<std::vector<Candidate>> resolveCandidates(const ir::Kernel& k, const TargetDesc& t, const RecordSources& src,
                                                   const ResolveSettings& s, std::vector<std::string>* notes);

}  // namespace tessera::bundle
