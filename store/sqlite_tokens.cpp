// Owns the SQLite TokenStore: tokens (SHA-256 hashes only) in the `tokens` table of a Tessera
// database file, next to the records they authorize.
#include "store/record.h"
#include "store/schema.h"
#include "store/sqlite_db.h"
#include "store/tokens.h"
#include "support/hash.h"

namespace tessera::cache {

namespace {

class SqliteTokenStore final : public TokenStore {
 public:
  explicit SqliteTokenStore(std::unique_ptr<sql::Db> db) : db_(std::move(db)) {}

  Expected<std::string> add(const std::string& name, Scope scope) override {
    TESSERA_TRY(checkTokenName(name));
    TESSERA_ASSIGN(std::string secret, generateTokenSecret());
    TESSERA_ASSIGN(sql::Stmt st, db_->prepare(
        "INSERT INTO tokens(name, hash, scope, created_at) VALUES(?,?,?,?) ON CONFLICT(name) DO NOTHING"));
    st.bind(1, name).bind(2, sha256Hex(secret)).bind(3, scopeName(scope)).bind(4, utcNow());
    TESSERA_TRY(st.run());
    if (sqlite3_changes(db_->handle()) == 0) return nameTaken(name);
    return secret;
  }

  Expected<std::vector<TokenInfo>> list() override {
    TESSERA_ASSIGN(sql::Stmt st, db_->prepare(
        "SELECT name, scope, created_at, coalesce(revoked_at, ''), substr(hash, 1, 12) FROM tokens ORDER BY name"));
    std::vector<TokenInfo> out;
    for (;;) {
      TESSERA_ASSIGN(bool row, st.step());
      if (!row) break;
      TokenInfo t;
      t.name = st.text(0);
      t.scope = parseScope(st.text(1)).value_or(Scope::Read);
      t.created_at = st.text(2);
      t.revoked_at = st.text(3);
      t.hash_prefix = st.text(4);
      out.push_back(std::move(t));
    }
    return out;
  }

  Status revoke(const std::string& name) override {
    TESSERA_ASSIGN(sql::Stmt st, db_->prepare("UPDATE tokens SET revoked_at = ? WHERE name = ? AND revoked_at IS NULL"));
    st.bind(1, utcNow()).bind(2, name);
    TESSERA_TRY(st.run());
    if (sqlite3_changes(db_->handle()) == 0) return makeError(ErrorCode::NotFound, "no active token named '" + name + "'");
    return {};
  }

  Expected<bool> exists(const std::string& name) override {
    TESSERA_ASSIGN(sql::Stmt st, db_->prepare("SELECT 1 FROM tokens WHERE name = ?"));
    st.bind(1, name);
    return st.step();
  }

  Expected<std::vector<ActiveToken>> active() override {
    TESSERA_ASSIGN(sql::Stmt st, db_->prepare("SELECT hash, scope, name FROM tokens WHERE revoked_at IS NULL"));
    std::vector<ActiveToken> out;
    for (;;) {
      TESSERA_ASSIGN(bool row, st.step());
      if (!row) break;
      auto scope = parseScope(st.text(1));
      if (!scope) continue;
      out.push_back({st.text(0), *scope, st.text(2)});
    }
    return out;
  }

 private:
  std::unique_ptr<sql::Db> db_;
};

}  // namespace

Expected<std::unique_ptr<TokenStore>> openSqliteTokenStore(const std::string& db_path) {
  TESSERA_ASSIGN(auto db, sql::Db::open(db_path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE));
  TESSERA_TRY(openSchema(*db, /*synchronous_full=*/true));
  return std::unique_ptr<TokenStore>(new SqliteTokenStore(std::move(db)));
}

}  // namespace tessera::cache
