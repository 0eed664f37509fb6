// Owns the shared cache's flags and the client options they make (cache_flags.h).
#include "cli/cache_flags.h"

#include "client/endpoints.h"

namespace tessera::cli {

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

cache::JobClientOptions jobClientOptions(const CacheFlags& f, double timeout_s, double patience_s) {
  return {cache::splitServiceUrls(f.url), f.token, f.caCert, timeout_s, patience_s};
}

}  // namespace tessera::cli
