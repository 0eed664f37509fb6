// Owns the shared cache's options as every command takes them: --cache URL[,URL...], --token and
// --ca-cert, each defaulting to its environment variable (TESSERA_CACHE_URL, TESSERA_TOKEN,
// TESSERA_CA_CERT; read by CLI11 here, at the edge), and the client options they make for the
// record client and the job client. Builds without MLIR (`tessera cache` needs it too).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "client/client.h"
#include "client/job_client.h"

namespace tessera::cli {

struct CacheFlags {
  std::string url, token, caCert;
};
void addCacheFlags(CLI::App* cmd, CacheFlags* f);
cache::CacheClientOptions clientOptions(const CacheFlags& f);
// The job client's options (workers, `tessera worker`): the service's URLs in failover order,
// the same token and CA certificate; `timeout_s` per request, `patience_s` while no URL answers.
cache::JobClientOptions jobClientOptions(const CacheFlags& f, double timeout_s, double patience_s);

}  // namespace tessera::cli
