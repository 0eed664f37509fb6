// Owns the CLI's shared tuning plumbing: provenance, cache client options and access, messages.
#include "cli/tune_common.h"

#include <pwd.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "session/tune_request.h"

namespace tessera::cli {

namespace {

std::string envOr(const char* name, const std::string& def) {
  const char* v = std::getenv(name);
  return v && *v ? v : def;
}

}  // namespace

measure::ProvenanceInputs provenanceInputs() {
  std::string user = envOr("USER", "");
  if (user.empty())
    if (const passwd* pw = getpwuid(getuid())) user = pw->pw_name;
  return session::provenanceInputs(std::move(user));
}

void requireCacheAccess(cache::CacheClient& c, const std::string& need, const std::string& what) {
  Status s = session::checkCacheAccess(c, need, what, [](const std::string& w) {
    std::fprintf(stderr, "tessera: warning: %s\n", w.c_str());
  });
  if (!s.ok()) fail(s.error().message, kExitRefused);
}

std::string missReason(const cache::HardKey& asked, const cache::HardKey& stored) {
  std::string out;
  for (const auto& d : cache::keyDifferences(asked, stored)) out += (out.empty() ? "" : "; ") + d;
  if (out.empty()) return "nothing (the same key)";
  if (asked.target == "host" && asked.units != stored.units)
    out += ": --threads " + std::to_string(stored.units) + " asks for it";
  return out;
}

std::string fmtDuration(double s) {
  char b[32];
  if (s >= 60) std::snprintf(b, sizeof b, "%dm%02ds", int(s / 60), int(s) % 60);
  else std::snprintf(b, sizeof b, "%.0fs", s);
  return b;
}

}  // namespace tessera::cli
