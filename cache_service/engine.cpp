// Owns the engine choice: today a location is a SQLite file path; postgresql:// is refused.
#include "cache_service/engine.h"

namespace tessera::cache {

namespace {
Error noPostgres() {
  return makeError(ErrorCode::Unsupported,
                   "the PostgreSQL store engine is not built yet; give a SQLite database file");
}
}  // namespace

bool isPostgresLocation(std::string_view location) {
  return location.starts_with("postgresql://") || location.starts_with("postgres://");
}

Expected<std::unique_ptr<RecordStore>> openStore(const std::string& location, const EngineOptions& o) {
  if (isPostgresLocation(location)) return noPostgres();
  SqliteStoreOptions so;
  so.synchronous_full = o.synchronous_full;
  so.index_winners = o.index_winners;
  so.current = o.current;
  return openSqliteStore(location, so);
}

Expected<std::unique_ptr<TokenStore>> TokenStore::open(const std::string& location) {
  if (isPostgresLocation(location)) return noPostgres();
  return openSqliteTokenStore(location);
}

}  // namespace tessera::cache
