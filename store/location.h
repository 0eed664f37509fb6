// Owns telling a store's location apart: a PostgreSQL URL or a SQLite database file. Header-only so
// the SQLite store (which refuses a URL) and the engine choice (store/engine.h) share one rule
// without the SQLite-only store library linking the PostgreSQL engine.
#pragma once

#include <string_view>

namespace tessera::cache {

// postgresql:// or postgres:// (a libpq connection URI; the password may come from PGPASSWORD or
// PGPASSFILE instead of the URL). Never taken for a SQLite file of that name.
inline bool isPostgresLocation(std::string_view location) {
  return location.starts_with("postgresql://") || location.starts_with("postgres://");
}

}  // namespace tessera::cache
