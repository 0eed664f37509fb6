// Owns the engine choice: a postgresql:// URL opens the PostgreSQL engine (when built in), anything
// else is a SQLite database file.
#include "store/engine.h"

#ifdef TESSERA_WITH_POSTGRES
#include "store/pg_store_impl.h"
#endif

namespace tessera::cache {

namespace {
[[maybe_unused]] Error noPostgres() {
  return makeError(ErrorCode::Unsupported,
                   "this tessera was built without the PostgreSQL store engine (install libpqxx-dev and rebuild: "
                   "scripts/setup.sh does); give a SQLite database file");
}
}  // namespace

bool postgresBuiltIn() {
#ifdef TESSERA_WITH_POSTGRES
  return true;
#else
  return false;
#endif
}

std::string redactLocation(const std::string& location) {
  if (!isPostgresLocation(location)) return location;
#ifdef TESSERA_WITH_POSTGRES
  return pg::redactUrl(location);
#else
  return "postgresql://***";
#endif
}

Expected<std::unique_ptr<RecordStore>> openStore(const std::string& location, const EngineOptions& o) {
  if (isPostgresLocation(location)) {
#ifdef TESSERA_WITH_POSTGRES
    TESSERA_ASSIGN(auto s, pg::PgStore::open(location, o));
    return std::unique_ptr<RecordStore>(std::move(s));
#else
    return noPostgres();
#endif
  }
  SqliteStoreOptions so;
  so.synchronous_full = o.synchronous_full;
  so.index_winners = o.index_winners;
  so.current = o.current;
  return openSqliteStore(location, so);
}

Expected<std::unique_ptr<TokenStore>> TokenStore::open(const std::string& location) {
  if (isPostgresLocation(location)) {
#ifdef TESSERA_WITH_POSTGRES
    return pg::openTokenStore(location);
#else
    return noPostgres();
#endif
  }
  return openSqliteTokenStore(location);
}

}  // namespace tessera::cache
