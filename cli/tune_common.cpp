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

search::ProvenanceInputs provenanceInputs() {
  search::ProvenanceInputs p;
  p.tesseraVersion = TESSERA_VERSION;
  p.llvmVersion = "22";
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  p.host = host;
  p.user = envOr("USER", "");
  if (p.user.empty())
    if (const passwd* pw = getpwuid(getuid())) p.user = pw->pw_name;
  return p;
}

void addCacheFlags(CLI::App* cmd, CacheFlags* f) {
  cmd->add_option("--cache", f->url, "shared cache URL, several comma-separated for replicas (default: $TESSERA_CACHE_URL)")
      ->envname("TESSERA_CACHE_URL");
  cmd->add_option("--token", f->token, "shared cache token (default: $TESSERA_TOKEN; prefer the variable: flags show in ps)")
      ->envname("TESSERA_TOKEN");
  cmd->add_option("--ca-cert", f->caCert, "https: PEM file the service's certificate must chain to (default: $TESSERA_CA_CERT)")
      ->envname("TESSERA_CA_CERT");
}

cache::CacheClientOptions clientOptions(const CacheFlags& f) {
  cache::CacheClientOptions o;
  o.base_url = f.url;
  o.token = f.token;
  o.ca_cert = f.caCert;  // https with a private CA (deploy/nginx/)
  return o;
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
