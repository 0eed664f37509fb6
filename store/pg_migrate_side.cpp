// Owns the PostgreSQL side of a store migration (migrate_side.h): a source database read in one
// REPEATABLE READ, READ ONLY snapshot (never written, never upgraded), or a destination database
// given this tessera's schema and written in READ COMMITTED transactions. Scans stream through a
// server-side cursor, so a table of any size is read in bounded memory and sorted once.
#include "store/migrate_side.h"
#include "store/pg_store_impl.h"

namespace tessera::cache::migrate {

namespace {

// libpq's messages run over several lines (a hint on the second): one line, for one-line errors.
std::string trimmed(const std::string& m) {
  std::string out;
  for (char c : m) {
    if (c == '\n' || c == '\t' || c == '\r') c = ' ';
    if (c == ' ' && (out.empty() || out.back() == ' ')) continue;
    out += c;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

// One element of an array literal: NULL, a number, or text in double quotes (\\ and \" escaped).
void arrayElement(const SqlValue& v, std::string& out) {
  if (const auto* n = std::get_if<int64_t>(&v)) {
    out += std::to_string(*n);
  } else if (const auto* d = std::get_if<double>(&v)) {
    out += pg::num(*d);
  } else if (const auto* s = std::get_if<std::string>(&v)) {
    out += '"';
    for (char ch : *s) {
      if (ch == '"' || ch == '\\') out += '\\';
      out += ch;
    }
    out += '"';
  } else {
    out += "NULL";
  }
}

class PgScan final : public Scan {
 public:
  PgScan(SqlTx& tx, std::string cursor) : tx_(tx), cursor_(std::move(cursor)) {}
  Expected<std::vector<SqlRow>> next(int n) override {
    return tx_.query("FETCH FORWARD " + std::to_string(n) + " FROM " + cursor_, {}, /*once=*/true);
  }

 private:
  SqlTx& tx_;
  std::string cursor_;
};

class PgSide final : public Side {
 public:
  PgSide(std::string url, Role role, std::unique_ptr<pg::Conn> conn)
      : url_(std::move(url)), shown_(pg::redactUrl(url_)), role_(role), conn_(std::move(conn)) {}

  Status identify() {
    // The cluster's system identifier names the server whatever host name reaches it; a role that
    // may not read it falls back to the address the connection reached.
    return guarded("identify the database", [&]() -> Status {
      pqxx::nontransaction t(*conn_->c);
      const std::string db = t.exec1("SELECT current_database()")[0].c_str();
      std::string cluster;
      if (t.exec1("SELECT has_function_privilege('pg_control_system()', 'execute')")[0].as<bool>()) {
        cluster = t.exec1("SELECT system_identifier::text FROM pg_control_system()")[0].c_str();
      } else {
        const char* host = conn_->c->hostname();
        const char* port = conn_->c->port();
        cluster = std::string(host ? host : "") + ":" + (port ? port : "");
      }
      identity_ = "postgresql:" + cluster + "/" + db;
      return {};
    });
  }

  Status checkSource() {
    return guarded("read the source's schema", [&]() -> Status {
      pqxx::nontransaction t(*conn_->c);
      if (!t.exec1("SELECT to_regclass('tessera_meta') IS NOT NULL")[0].as<bool>())
        return makeError(ErrorCode::InvalidArgument, shown_ + " holds no Tessera store (no tessera_meta table)");
      auto app = t.exec("SELECT value FROM tessera_meta WHERE name = 'application'");
      if (app.empty() || pg::asText(app[0][0]) != "tessera")
        return makeError(ErrorCode::InvalidArgument, shown_ + " is not a Tessera store");
      auto v = t.exec("SELECT value FROM tessera_meta WHERE name = 'schema_version'");
      const int64_t version = v.empty() ? 0 : pg::asInt(v[0][0]);
      if (version > pg::kPgSchemaVersion)
        return makeError(ErrorCode::Unsupported, "the source's schema (PostgreSQL version " + std::to_string(version) +
                                                     ") is newer than this tessera's (" +
                                                     std::to_string(pg::kPgSchemaVersion) +
                                                     "): migrate with the tessera that wrote it");
      if (version < pg::kPgSchemaVersion)
        return makeError(ErrorCode::Unsupported,
                         "the source's schema (PostgreSQL version " + std::to_string(version) +
                             ") is older than this tessera's (" + std::to_string(pg::kPgSchemaVersion) +
                             "); migrate never writes its source: upgrade it first by opening it once with this "
                             "tessera (e.g. tessera serve token list --store URL)");
      return {};
    });
  }

  SqlDialect::Engine engine() const override { return SqlDialect::Engine::Postgres; }
  const std::string& identity() const override { return identity_; }
  const std::string& shown() const override { return shown_; }

  Status prepareDestination() override {
    TESSERA_TRY(pg::openSchema(*conn_));
    return guarded("set up the session", [&]() -> Status {
      pqxx::nontransaction t(*conn_->c);
      t.exec("SET synchronous_commit = off");  // makeDurable() turns it back on
      return {};
    });
  }

  Status read(const std::function<Status(SqlTx&)>& fn) override {
    return guarded("read", [&]() -> Status {
      pqxx::transaction<pqxx::repeatable_read, pqxx::read_only> t(*conn_->c);
      pg::PgTx tx(*conn_, t);
      TESSERA_TRY(fn(tx));
      t.commit();
      return {};
    });
  }

  Status write(const std::function<Status(SqlTx&)>& fn) override {
    if (role_ != Role::Destination) return makeError(ErrorCode::Internal, "a migration never writes its source");
    return guarded("write", [&]() -> Status {
      pqxx::work t(*conn_->c);
      pg::PgTx tx(*conn_, t);
      TESSERA_TRY(fn(tx));  // an error aborts (the destructor rolls back)
      t.commit();
      return {};
    });
  }

  Expected<std::map<std::string, std::vector<std::string>>> layout(SqlTx& tx) override {
    TESSERA_ASSIGN(auto rows, tx.query("SELECT table_name, column_name FROM information_schema.columns "
                                       "WHERE table_schema = current_schema() ORDER BY table_name, ordinal_position",
                                       {}));
    std::map<std::string, std::vector<std::string>> out;
    for (const SqlRow& r : rows) out[r.text(0)].push_back(r.text(1));
    return out;
  }

  Expected<std::unique_ptr<Scan>> scan(SqlTx& tx, const Table& t, const std::vector<std::string>& columns,
                                       const std::vector<SqlValue>& after) override {
    std::string list;
    for (const std::string& c : columns) list += (list.empty() ? "" : ", ") + c;
    const std::string cursor = "tessera_scan_" + std::to_string(++scans_);
    std::string query = "SELECT " + list + " FROM " + t.name;
    if (!after.empty()) {
      // DECLARE takes no parameters: the key values go in as literals, quoted by the connection.
      std::vector<std::string> literals;
      for (const SqlValue& v : after) {
        if (const auto* n = std::get_if<int64_t>(&v)) literals.push_back(std::to_string(*n));
        else if (const auto* s = std::get_if<std::string>(&v)) literals.push_back(textLiteral(*s));
        else return makeError(ErrorCode::Internal, "migrate: a key of " + t.name + " is neither text nor an integer");
      }
      query += " WHERE " + keyAfter(t, engine(), literals);
    }
    query += " ORDER BY " + keyOrder(t, engine());
    TESSERA_ASSIGN(int64_t declared, tx.run("DECLARE " + cursor + " NO SCROLL CURSOR FOR " + query, {}, true));
    (void)declared;
    return std::unique_ptr<Scan>(std::make_unique<PgScan>(tx, cursor));
  }

  Expected<int64_t> highWater(SqlTx& tx, const Table& t) override {
    TESSERA_ASSIGN(std::string seq, sequence(tx, t));
    TESSERA_ASSIGN(auto rows, tx.query("SELECT last_value, CASE WHEN is_called THEN 1 ELSE 0 END FROM " + seq, {}, true));
    const int64_t last = rows.at(0).i64(0);
    const int64_t handed_out = rows.at(0).i64(1) ? last : last - 1;  // not called: last_value comes next
    TESSERA_ASSIGN(auto top, tx.query("SELECT coalesce(max(" + t.identity + "), 0) FROM " + t.name, {}));
    return std::max(handed_out, top.at(0).i64(0));
  }

  Status setHighWater(SqlTx& tx, const Table& t, int64_t value) override {
    TESSERA_ASSIGN(std::string seq, sequence(tx, t));
    // setval(seq, v, true): the next id is v + 1; a table that never had a row starts at 1.
    const std::string sql = value > 0 ? "SELECT setval(?1, ?2, true)" : "SELECT setval(?1, 1, false)";
    std::vector<SqlValue> params{seq};
    if (value > 0) params.emplace_back(value);
    TESSERA_ASSIGN(auto rows, tx.query(sql, params, true));
    (void)rows;
    return {};
  }

  Status insertRows(SqlTx& tx, const Table& t, const std::vector<const Column*>& columns,
                    const std::vector<SqlValue>& values) override {
    // One array parameter per column, unnested into rows: a statement of a few parameters that
    // PostgreSQL plans once, whatever the batch size (a VALUES list of thousands of rows is slow to
    // parse and plan). Identity columns are GENERATED ALWAYS: a copied id needs OVERRIDING SYSTEM VALUE.
    const size_t width = columns.size(), rows = values.size() / width;
    std::string list, unnest;
    std::vector<SqlValue> arrays;
    for (size_t c = 0; c < width; ++c) {
      list += (c ? ", " : "") + columns[c]->postgres;
      const char* type = columns[c]->type == ColType::Int    ? "bigint[]"
                         : columns[c]->type == ColType::Real ? "double precision[]"
                                                             : "text[]";
      unnest += (c ? ", " : "") + std::string("CAST(?") + std::to_string(c + 1) + " AS " + type + ")";
      std::string a = "{";
      for (size_t r = 0; r < rows; ++r) {
        if (r) a += ',';
        arrayElement(values[r * width + c], a);
      }
      arrays.emplace_back(a + "}");
    }
    const std::string sql = "INSERT INTO " + t.name + "(" + list + ")" +
                            (t.identity.empty() ? "" : " OVERRIDING SYSTEM VALUE") + " SELECT * FROM unnest(" + unnest +
                            ")";
    TESSERA_ASSIGN(int64_t inserted, tx.run(sql, arrays));
    if (inserted != static_cast<int64_t>(rows))
      return makeError(ErrorCode::Internal, "migrate: " + std::to_string(inserted) + " of " + std::to_string(rows) +
                                                " rows of " + t.name + " went in");
    return {};
  }

  Status makeDurable() override {
    // A commit with synchronous_commit on waits for the WAL up to it, every earlier commit included.
    return guarded("make the copy durable", [&]() -> Status {
      pqxx::nontransaction t(*conn_->c);
      t.exec("SET synchronous_commit = on");
      return {};
    });
  }

 private:
  // A quoted literal; the statement passes through the neutral-to-PostgreSQL placeholder rewrite,
  // which turns every '?' into '$', so a '?' in the text is spelled chr(63).
  std::string textLiteral(const std::string& text) {
    std::string out = "(";
    size_t start = 0;
    for (;;) {
      const size_t q = text.find('?', start);
      out += conn_->c->quote(text.substr(start, q == std::string::npos ? std::string::npos : q - start));
      if (q == std::string::npos) break;
      out += " || chr(63) || ";
      start = q + 1;
    }
    return out + ")";
  }

  Expected<std::string> sequence(SqlTx& tx, const Table& t) {
    TESSERA_ASSIGN(auto rows, tx.query("SELECT pg_get_serial_sequence(?1, ?2)", {t.name, t.identity}));
    if (rows.empty() || std::holds_alternative<std::monostate>(rows[0].cols.at(0)))
      return makeError(ErrorCode::Internal, "migrate: " + t.name + "." + t.identity + " has no sequence");
    return rows[0].text(0);
  }

  Status guarded(const char* what, const std::function<Status()>& fn) {
    try {
      return fn();
    } catch (const pqxx::broken_connection& e) {
      return makeError(ErrorCode::Unavailable, "PostgreSQL at " + shown_ + " went away: " + trimmed(e.what()));
    } catch (const std::exception& e) {
      return makeError(ErrorCode::IOError,
                       std::string("PostgreSQL at ") + shown_ + ": cannot " + what + ": " + trimmed(e.what()));
    }
  }

  std::string url_, shown_, identity_;
  Role role_;
  std::unique_ptr<pg::Conn> conn_;
  int scans_ = 0;
};

}  // namespace

Expected<std::unique_ptr<Side>> openPgSide(const std::string& url, Role role) {
  auto conn = std::make_unique<pg::Conn>();
  try {
    conn->c = std::make_unique<pqxx::connection>(url);
  } catch (const std::exception& e) {
    return makeError(ErrorCode::Unavailable,
                     "cannot connect to PostgreSQL at " + pg::redactUrl(url) + ": " + trimmed(e.what()));
  }
  auto side = std::make_unique<PgSide>(url, role, std::move(conn));
  TESSERA_TRY(side->identify());
  if (role == Role::Source) TESSERA_TRY(side->checkSource());
  return std::unique_ptr<Side>(std::move(side));
}

}  // namespace tessera::cache::migrate
