// Owns the write side of the PostgreSQL RecordStore: its transaction for the store core
// (store_core.h: the best-wins put, admin actions with winner recomputation), the outbox marks,
// and the store and token factories of the engine.
#include <variant>

#include "store/pg_store_impl.h"
#include "store/store_core.h"
#include "support/hash.h"

namespace tessera::cache::pg {

namespace {
void lockRecordWrites(Conn& c, pqxx::transaction_base& t) {
  exec(c, t, "SELECT pg_advisory_xact_lock($1::bigint)", std::to_string(kRecordWriteLock));
}
}  // namespace

Expected<std::vector<SqlRow>> PgTx::query(const std::string& sql, const std::vector<SqlValue>& params, bool once) {
  TESSERA_ASSIGN(pqxx::result res, execNeutral(sql, params, once));
  std::vector<SqlRow> rows;
  rows.reserve(res.size());
  for (const auto& r : res) {
    SqlRow row;
    for (const auto& f : r) {
      if (f.is_null()) row.cols.emplace_back();
      else row.cols.emplace_back(asText(f));
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

Expected<int64_t> PgTx::run(const std::string& sql, const std::vector<SqlValue>& params, bool once) {
  TESSERA_ASSIGN(pqxx::result res, execNeutral(sql, params, once));
  return static_cast<int64_t>(res.affected_rows());
}

Expected<double> PgTx::nowEpoch() { return asDouble(exec(c_, t_, std::string("SELECT ") + kNowEpoch)[0][0]); }

Status PgTx::lockName(const std::string& name) {
  exec(c_, t_, "SELECT pg_advisory_xact_lock(1414746962, hashtext($1))", name);
  return {};
}

Expected<pqxx::result> PgTx::execNeutral(const std::string& neutral, const std::vector<SqlValue>& params, bool once) {
  // Text for every value, then a pointer to each (nullptr: SQL NULL, as libpqxx passes it).
  std::vector<std::string> texts(params.size());
  std::vector<const char*> values(params.size(), nullptr);
  for (size_t i = 0; i < params.size(); ++i) {
    const SqlValue& v = params[i];
    if (const auto* n = std::get_if<int64_t>(&v)) texts[i] = std::to_string(*n);
    else if (const auto* d = std::get_if<double>(&v)) texts[i] = num(*d);
    else if (const auto* s = std::get_if<std::string>(&v)) texts[i] = *s;
    else continue;
    values[i] = texts[i].c_str();
  }
  const std::string sql = dialect().sql(neutral);
  auto dyn = pqxx::prepare::make_dynamic_params(values);
  if (once) return t_.exec_params(sql, dyn);
  return exec(c_, t_, sql, dyn);
}

Status PgStore::transact(TxMode mode, const std::function<Status(SqlTx&, core::TouchedKeys&)>& fn) {
  return runTx(pool_, mode == TxMode::Read ? TxKind::ReadOnly : TxKind::Write,
               [&](Conn& c, pqxx::transaction_base& t) -> Status {
                 // Records commit in id order (pg_store_impl.h): the lock is taken first, before any row lock.
                 if (mode == TxMode::WriteRecords) lockRecordWrites(c, t);
                 PgTx tx(c, t);
                 core::TouchedKeys touched;  // nothing is cached in a replica
                 return fn(tx, touched);
               });
}



Status PgStore::markPushed(std::span<const int64_t> ids) {
  if (ids.empty()) return {};
  std::string list;
  for (size_t i = 0; i < ids.size(); ++i) list += (i ? "," : "") + std::to_string(ids[i]);
  return runTx(pool_, TxKind::Write, [&](Conn& c, pqxx::transaction_base& t) -> Status {
    exec(c, t, "UPDATE records SET pushed = 1 WHERE id = ANY($1::bigint[])", "{" + list + "}");
    return {};
  });
}

namespace {

// Tokens of a PostgreSQL store: the `tokens` table next to the records (hashes only).
class PgTokenStore final : public TokenStore {
 public:
  explicit PgTokenStore(const std::string& url) : pool_(url, 2, 30) {}
  Status init() {
    TESSERA_ASSIGN(auto conn, pool_.acquire());
    Status st = openSchema(*conn);
    pool_.release(std::move(conn), !st.ok());
    return st;
  }

  Expected<std::string> add(const std::string& name, Scope scope) override {
    TESSERA_TRY(checkTokenName(name));
    TESSERA_ASSIGN(std::string secret, generateTokenSecret());
    bool added = false;
    TESSERA_TRY(runTx(pool_, TxKind::Write, [&](Conn& c, pqxx::transaction_base& t) -> Status {
      auto r = exec(c, t,
                    std::string("INSERT INTO tokens(name, hash, scope, created_at) VALUES($1,$2,$3,") + kNowUtc +
                        ") ON CONFLICT(name) DO NOTHING",
                    name, sha256Hex(secret), std::string(scopeName(scope)));
      added = r.affected_rows() > 0;
      return {};
    }));
    if (!added) return nameTaken(name);
    return secret;
  }

  Expected<std::vector<TokenInfo>> list() override {
    std::vector<TokenInfo> out;
    TESSERA_TRY(runTx(pool_, TxKind::Single, [&](Conn& c, pqxx::transaction_base& t) -> Status {
      out.clear();
      for (const auto& row : exec(c, t, "SELECT name, scope, created_at, coalesce(revoked_at, ''), substr(hash, 1, 12)"
                                        " FROM tokens ORDER BY name")) {
        TokenInfo ti;
        ti.name = asText(row[0]);
        ti.scope = parseScope(asText(row[1])).value_or(Scope::Read);
        ti.created_at = asText(row[2]);
        ti.revoked_at = asText(row[3]);
        ti.hash_prefix = asText(row[4]);
        out.push_back(std::move(ti));
      }
      return {};
    }));
    return out;
  }

  Status revoke(const std::string& name) override {
    bool revoked = false;
    TESSERA_TRY(runTx(pool_, TxKind::Write, [&](Conn& c, pqxx::transaction_base& t) -> Status {
      revoked = exec(c, t, std::string("UPDATE tokens SET revoked_at = ") + kNowUtc +
                               " WHERE name = $1 AND revoked_at IS NULL",
                     name)
                    .affected_rows() > 0;
      return {};
    }));
    if (!revoked) return makeError(ErrorCode::NotFound, "no active token named '" + name + "'");
    return {};
  }

  Expected<bool> exists(const std::string& name) override {
    bool found = false;
    TESSERA_TRY(runTx(pool_, TxKind::Single, [&](Conn& c, pqxx::transaction_base& t) -> Status {
      found = !exec(c, t, "SELECT 1 FROM tokens WHERE name = $1", name).empty();
      return {};
    }));
    return found;
  }

  Expected<std::vector<ActiveToken>> active() override {
    std::vector<ActiveToken> out;
    TESSERA_TRY(runTx(pool_, TxKind::Single, [&](Conn& c, pqxx::transaction_base& t) -> Status {
      out.clear();
      for (const auto& row : exec(c, t, "SELECT hash, scope, name FROM tokens WHERE revoked_at IS NULL")) {
        auto scope = parseScope(asText(row[1]));
        if (scope) out.push_back({asText(row[0]), *scope, asText(row[2])});
      }
      return {};
    }));
    return out;
  }

 private:
  Pool pool_;
};

}  // namespace

Expected<std::unique_ptr<TokenStore>> openTokenStore(const std::string& url) {
  auto s = std::make_unique<PgTokenStore>(url);
  TESSERA_TRY(s->init());
  return std::unique_ptr<TokenStore>(std::move(s));
}

}  // namespace tessera::cache::pg
