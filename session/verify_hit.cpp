// Owns the verification of a shared-cache winner (verify_hit.h).
#include "session/verify_hit.h"

#include <algorithm>
#include <cstdio>

#include "measure/trial.h"

namespace tessera::session {

using measure::Measurer;
using measure::TrialResult;
using measure::TrialStatus;
using measure::trialStatusName;

namespace {
std::string us(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3g us", v);
  return b;
}
}  // namespace

Status verifySharedHit(const cache::Record& rec, const ir::Space& space, Measurer& measurer,
                       const VerifyHitSettings& s, HitCheck* check) {
  HitCheck local;
  HitCheck& c = check ? *check : local;
  auto cfg = ir::Config::fromJson(rec.config);
  if (!cfg.ok()) return makeError(ErrorCode::InvalidConfig, "its config does not parse: " + cfg.error().message);
  // Only knobs and values this kernel's space has: a config naming anything else is not ours.
  if (auto why = space.check(*cfg)) return makeError(ErrorCode::InvalidConfig, "its config is not legal here: " + *why);
  auto measured = measurer.measure({*cfg});
  if (!measured.ok()) {
    c.lost = measured.error();
    return measured.takeError();
  }
  const std::vector<TrialResult>& results = *measured;
  if (results.size() != 1) return makeError(ErrorCode::Internal, "the measurer returned no result");
  TrialResult r = results.front();
  c.measured_us = r.ok() ? r.samples.median_us : 0;
  c.max_rel_err = r.maxRelErr;
  // An estimate runs nothing: it cannot vouch for a config's result.
  if (r.estimated)
    return makeError(ErrorCode::Unsupported, "nothing runs here (analytic estimates only): it cannot be checked");
  if (!r.ok()) {
    const ErrorCode code = r.status == TrialStatus::WrongResult    ? ErrorCode::WrongResult
                           : r.status == TrialStatus::InvalidConfig ? ErrorCode::InvalidConfig
                           : r.status == TrialStatus::CompileError  ? ErrorCode::CompileError
                           : r.status == TrialStatus::Timeout       ? ErrorCode::Timeout
                                                                    : ErrorCode::Internal;
    return makeError(code, std::string("its config failed here: ") + trialStatusName(r.status) +
                               (r.message.empty() ? "" : " (" + r.message + ")"));
  }
  // An emulated device's time is this CPU's, not the target's: only the result is checked.
  const bool time = !r.emulated && (s.time == VerifyHitSettings::Time::Always ||
                                    (s.time == VerifyHitSettings::Time::IfUnconfirmed && !cache::isConfirmed(rec.trust)));
  if (!r.emulated && !r.origin) c.here = r;
  if (!time) return {};
  c.timed = true;
  if (cache::contradicts(rec.median_us, r.samples.median_us, s.agree_factor)) {
    // Once more before a claim is called a lie: the faster of two re-timings counts.
    auto measuredAgain = measurer.measure({*cfg});
    if (!measuredAgain.ok()) {
      c.lost = measuredAgain.error();
      return measuredAgain.takeError();
    }
    const std::vector<TrialResult>& again = *measuredAgain;
    if (again.size() == 1 && again.front().ok() && again.front().samples.median_us < r.samples.median_us) {
      r = again.front();
      c.measured_us = r.samples.median_us;
      if (!r.origin) c.here = r;
    }
  }
  if (cache::contradicts(rec.median_us, r.samples.median_us, s.agree_factor)) {
    char factor[16];
    std::snprintf(factor, sizeof factor, "%.3g", s.agree_factor * s.agree_factor);
    return makeError(ErrorCode::WrongResult, "re-timed at " + us(r.samples.median_us) + ", more than " + factor +
                                                 "x the " + us(rec.median_us) + " the record claims");
  }
  return {};
}

}  // namespace tessera::session
