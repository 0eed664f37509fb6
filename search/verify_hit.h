// Owns checking a winner from the shared cache before it is trusted (issue 15: clients verify
// before they trust): its config must be legal in this kernel's space, compile, and reproduce the
// reference's result through this machine's measurer; with `time`, its re-timed median must be
// within `slack` times what the record claims. `tessera tune` passes it to the session as
// SessionCallbacks::verifySharedHit; `tessera best` calls it before printing a shared winner.
#pragma once

#include "cache_service/record.h"
#include "ir/schedule.h"
#include "search/measurer.h"
#include "support/status.h"

namespace tessera::search {

struct VerifyHitSettings {
  bool time = false;   // re-time the config too (--verify-time)
  double slack = 2.0;  // a re-timed median above slack x the record's is refused
};

struct HitCheck {
  double measured_us = 0;  // the median this machine measured (0 when it did not run)
  double max_rel_err = 0;  // against the reference
};

// Ok when the record's config passes; otherwise an error saying why (InvalidConfig: not legal
// here; WrongResult: it compiled and ran but the output or its time is wrong; other codes: it did
// not compile or run). `check`, when given, gets what was measured.
Status verifySharedHit(const cache::Record& rec, const ir::Space& space, Measurer& measurer,
                       const VerifyHitSettings& s = {}, HitCheck* check = nullptr);

}  // namespace tessera::search
