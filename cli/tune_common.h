// Owns what the tuning front ends of the CLI share (tune, best, compare, bundle, worker): this
// machine's provenance, the shared-cache client options from flags and the environment (read
// here, at the edge: TESSERA_CACHE_URL, TESSERA_TOKEN, TESSERA_CA_CERT, USER), and the CLI's
// answer to a refused or absent service. Where candidates are measured is session/tune_request.h.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "client/client.h"
#include "cli/cache_flags.h"
#include "measure/records.h"
#include "support/status.h"

namespace tessera::cli {

measure::ProvenanceInputs provenanceInputs();

// Before a command relies on the shared cache for `need` ("read" or "write"): a refusal (an
// unknown token, none where one is needed, a scope below `need`) ends the command (exit 6, with
// what to do); a service that does not answer is a warning and the command goes on without it.
void requireCacheAccess(cache::CacheClient& c, const std::string& need, const std::string& what);

// Why a stored record of another key did not answer: the key fields that differ, and the flag that
// asks for that record when the thread count is the difference ("threads 1 (asked 2): --threads 1
// asks for it").
std::string missReason(const cache::HardKey& asked, const cache::HardKey& stored);
std::string fmtDuration(double seconds);  // "42s", "3m05s"

}  // namespace tessera::cli
