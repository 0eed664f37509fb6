// Owns choosing the store engine behind a location, the seam where a second engine (PostgreSQL,
// issue 16, not built yet) plugs in: today every location is a SQLite database file, which keeps
// the records, the tokens and the measurement job queue together (store.h, tokens.h, jobs.h).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "cache_service/store.h"
#include "cache_service/tokens.h"

namespace tessera::cache {

struct EngineOptions {
  bool synchronous_full = true;  // fsync every commit (else synchronous=NORMAL)
  bool index_winners = false;    // keep every key's winner in memory (the server)
  Provenance current;            // the toolchain records are stale against
};

// postgresql:// or postgres:// (a libpq connection URI): refused with a clear message until the
// PostgreSQL engine exists, rather than created as a SQLite file of that name.
bool isPostgresLocation(std::string_view location);

Expected<std::unique_ptr<RecordStore>> openStore(const std::string& location, const EngineOptions& o = {});

}  // namespace tessera::cache
