// Owns the kernel page's digest of one key (issue 51): what the page draws, computed where the
// records are, so that a key of 10,000 or 100,000 records reaches the browser as one bounded
// answer instead of every record: the tunes' convergence (each trial and the best so far), the
// per-knob statistics of measured and of predicted times, bounded points over time and a bounded
// sample of whole records (the fastest first).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "store/store.h"

namespace tessera::cache {

struct DigestLimits {
  int64_t max_records = 200'000;  // records read at most (the newest beyond are left out, "capped")
  int time_points = 2000;         // points of the time chart at most
  int curve_points = 4000;        // points of the convergence chart at most, over all tunes (50 a tune at least)
  int sample = 100;               // whole records in "sample" at most
};

// {"records", "capped", "max_id", "statuses", "tunes", "time", "knobs", "importance", "sample"}:
// see docs/dashboard.md, "The kernel digest". An estimated record's time is a prediction and is
// kept apart from measured ones (knobs.predicted, a tune's "estimated").
Expected<nlohmann::json> kernelDigestJson(RecordStore& store, const std::string& key_id, const DigestLimits& limits = {});

// The id of the newest record of a key (0: none), for a page that waits for new records.
Expected<int64_t> newestRecordId(RecordStore& store, const std::string& key_id, int64_t after_id);

}  // namespace tessera::cache
