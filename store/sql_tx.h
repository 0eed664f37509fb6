// Owns what the store core needs from a SQL engine: a transaction that runs statements (SqlTx) and
// the engine's dialect (SqlDialect: placeholders, the few spellings that differ, whose clock stamps
// a record). The SQLite and PostgreSQL engines each implement SqlTx once; every statement of the
// record write path is written once in store_core.cpp, in the neutral form described below.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "support/status.h"

namespace tessera::cache {

// A bound parameter or a returned column: NULL, an integer, a double or text. PostgreSQL returns
// every column as text; the accessors of SqlRow convert either way.
using SqlValue = std::variant<std::monostate, int64_t, double, std::string>;

struct SqlRow {
  std::vector<SqlValue> cols;
  int64_t i64(size_t i) const;  // NULL: 0
  double f64(size_t i) const;   // NULL: 0
  std::string text(size_t i) const;
};

// How an engine spells what the neutral SQL leaves open. Neutral statements number their
// parameters ?1, ?2, ... (SQLite's own syntax); the dialect turns them into the engine's.
struct SqlDialect {
  enum class Engine { Sqlite, Postgres } engine;
  // The records column that holds Provenance::user (`user` is reserved in PostgreSQL).
  const char* user_column;
  // A condition over `records` matching the config given as parameter ?N (PostgreSQL indexes the
  // md5 of a config: configs may exceed a btree entry).
  std::string configIs(int n) const;
  // The records' received_at: the database's clock (one clock for every replica sharing a
  // PostgreSQL database), or nullptr where the store's process stamps it (SQLite).
  const char* now_utc_sql;
  // The smaller of two values (SQLite's two-argument min, PostgreSQL's least).
  const char* least;
  // What a SELECT appends to lock the rows it reads until the transaction ends: FOR UPDATE [OF
  // alias] [SKIP LOCKED] on PostgreSQL; nothing on SQLite, whose single writer holds the database.
  std::string lockRows(const char* alias, bool skip_locked) const;
  // A neutral statement in this engine's placeholders.
  std::string sql(const std::string& neutral) const;

  static const SqlDialect& sqlite();
  static const SqlDialect& postgres();
};

// One open write transaction of an engine. Statements are neutral (see SqlDialect) and may be
// prepared and cached by the engine under their text.
class SqlTx {
 public:
  virtual ~SqlTx() = default;
  virtual const SqlDialect& dialect() const = 0;
  // once: the text varies from call to call (an admin selector), so it is not kept prepared.
  // Runs a statement and returns its rows.
  virtual Expected<std::vector<SqlRow>> query(const std::string& neutral_sql, const std::vector<SqlValue>& params,
                                              bool once = false) = 0;
  // Runs a statement and returns how many rows it changed.
  virtual Expected<int64_t> run(const std::string& neutral_sql, const std::vector<SqlValue>& params,
                                bool once = false) = 0;
  // Seconds since the epoch on the engine's clock (PostgreSQL: the database's, one clock for every
  // replica; SQLite: this machine's).
  virtual Expected<double> nowEpoch() = 0;
  // Serializes the transactions that take the same name until they end (the per-token limits of
  // the job queue are counted, then acted on). SQLite's single writer serializes them already.
  virtual Status lockName(const std::string& name) = 0;
};

}  // namespace tessera::cache
