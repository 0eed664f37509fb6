// Owns checking a winner from the shared cache (or a stored claim of another machine) before it is
// trusted (issues 15 and 25: clients verify before they trust): its config must be legal in this
// kernel's space, compile, and reproduce the reference's result through this machine's measurer;
// and unless the record is confirmed (trust.h: another identity's measurement agrees with it, or
// an admin vouched for it), it is re-timed here and refused when this machine measures it more
// than the noise slower than it claims (cache::contradicts, twice when the first re-timing does:
// one busy moment must not refuse an honest claim). `tessera tune` passes it to the session as
// SessionCallbacks::verifySharedHit; `tessera best` calls it before printing a shared winner.
#pragma once

#include <optional>

#include "store/record.h"
#include "ir/schedule.h"
#include "measure/measurer.h"
#include "support/status.h"

namespace tessera::session {

struct VerifyHitSettings {
  enum class Time {
    IfUnconfirmed,  // re-time a claim, trust a confirmed record's time (the default)
    Always,         // --verify-time
    Never,          // results only (--no-verify-time; an emulated device's time is never compared)
  };
  Time time = Time::IfUnconfirmed;
  double agree_factor = cache::kDefaultAgreeFactor;
};

struct HitCheck {
  double measured_us = 0;  // the median this machine measured (0 when it did not run)
  double max_rel_err = 0;  // against the reference
  bool timed = false;      // its time was compared with the claim
  // The measurement taken here (status ok, this machine's; unset when none ran or it was taken
  // elsewhere): a second identity's measurement of the config, worth keeping and sharing.
  std::optional<measure::TrialResult> here;
  // The measurer's own error (measurer.h: the backend itself gone, e.g. the workers): not a verdict
  // on the record; the tune cannot go on and ends with it. verifySharedHit returns it as well.
  std::optional<Error> lost;
};

// Ok when the record's config passes; otherwise an error saying why (InvalidConfig: not legal
// here; WrongResult: it compiled and ran but the output or its time is wrong; other codes: it did
// not compile or run). `check`, when given, gets what was measured.
Status verifySharedHit(const cache::Record& rec, const ir::Space& space, measure::Measurer& measurer,
                       const VerifyHitSettings& s = {}, HitCheck* check = nullptr);

}  // namespace tessera::session
