// Owns choosing the store engine behind a location: a SQLite database file (the embedded default),
// or a PostgreSQL database named by a libpq URL (postgresql://...), which several `tessera serve`
// replicas may share. Either keeps the records, the tokens and the measurement job queue together
// (store.h, tokens.h, jobs.h). Library tessera_store_engines (with the PostgreSQL engine and the
// cross-engine migration): the service and the CLI link it; a tuner links the SQLite store only.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "store/location.h"
#include "store/store.h"
#include "store/tokens.h"

namespace tessera::cache {

struct EngineOptions {
  bool synchronous_full = true;  // fsync every commit (else synchronous=NORMAL)
  bool index_winners = false;    // keep every key's winner in memory (the server)
  Provenance current;            // the toolchain records are stale against
  int max_connections = 16;      // PostgreSQL: connections this process opens at most
};

// Whether this build has the PostgreSQL engine (libpqxx found at configure time).
bool postgresBuiltIn();
// The location with any password replaced by "***": what may be printed or logged.
std::string redactLocation(const std::string& location);

Expected<std::unique_ptr<RecordStore>> openStore(const std::string& location, const EngineOptions& o = {});

}  // namespace tessera::cache
