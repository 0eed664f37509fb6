// Owns what a store migration (store_migrate.h) knows of the databases it copies between: the tables
// of the schema with their columns in each engine, and one side of a migration (a database of
// either engine opened for raw table access: snapshots, write transactions, key-ordered scans,
// identity high-water marks). Private to store/; the engines implement Side in
// sqlite_migrate_side.cpp and pg_migrate_side.cpp.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "store/sql_tx.h"

namespace tessera::cache::migrate {

enum class ColType { Int, Real, Text };

// A column of the schema and its name in each engine ("" where that engine has no such column:
// SQLite keeps three columns PostgreSQL never had, dead since SQLite's version 4).
struct Column {
  std::string name;
  ColType type;
  std::string sqlite, postgres;
  const std::string& in(SqlDialect::Engine e) const { return e == SqlDialect::Engine::Sqlite ? sqlite : postgres; }
};

struct Table {
  std::string name;
  std::vector<std::string> key;  // primary key columns (logical names), the copy and checksum order
  std::string identity;          // the column ids are handed out from ("" if none)
  std::vector<Column> columns;
  const Column& column(const std::string& name) const;
};

// Every table the migration copies, in copy order.
const std::vector<Table>& copiedTables();
// Tables a Tessera database holds that are not copied, each with why.
const std::map<std::string, std::string>& uncopiedTables();
// The key order of a table's rows, and the condition "the key comes after these values" (one SQL
// expression per key column: placeholders or literals); text keys compare by their bytes in both
// engines (PostgreSQL: COLLATE "C").
std::string keyOrder(const Table& t, SqlDialect::Engine e);
std::string keyAfter(const Table& t, SqlDialect::Engine e, const std::vector<std::string>& values);
// The table that records a migration's progress in its destination (kept there once it is done).
inline constexpr const char* kProgressTable = "tessera_migration";

// Reads a table's rows in key order, a batch at a time.
class Scan {
 public:
  virtual ~Scan() = default;
  // Up to n rows; none at the end. Columns as selected, engine-typed (SqlRow's accessors convert).
  virtual Expected<std::vector<SqlRow>> next(int n) = 0;
};

enum class Role { Source, Destination };

class Side {
 public:
  virtual ~Side() = default;
  virtual SqlDialect::Engine engine() const = 0;
  // The same database gives the same text whichever way it is named (a file's real path; a
  // PostgreSQL cluster's system identifier and the database's name).
  virtual const std::string& identity() const = 0;
  // What messages show: the path, or the URL without its password.
  virtual const std::string& shown() const = 0;
  // A destination's schema is created or brought up to this tessera's (a source is never written).
  virtual Status prepareDestination() = 0;
  // fn in one consistent read snapshot / one write transaction, committed when fn succeeds.
  virtual Status read(const std::function<Status(SqlTx&)>& fn) = 0;
  virtual Status write(const std::function<Status(SqlTx&)>& fn) = 0;
  // Every table and its columns as the database has them.
  virtual Expected<std::map<std::string, std::vector<std::string>>> layout(SqlTx& tx) = 0;
  // The rows of `table` (these physical columns) in key order, after the key values `after`
  // (empty: from the first row). Text keys are ordered by their bytes in both engines.
  virtual Expected<std::unique_ptr<Scan>> scan(SqlTx& tx, const Table& table, const std::vector<std::string>& columns,
                                               const std::vector<SqlValue>& after) = 0;
  // The largest id the table's identity ever handed out (ids are never reused), and setting it.
  virtual Expected<int64_t> highWater(SqlTx& tx, const Table& table) = 0;
  virtual Status setHighWater(SqlTx& tx, const Table& table, int64_t value) = 0;
  // Inserts rows: `values` holds them one after the other, each with a value for every column of
  // `columns` (schema typed: integers, doubles, text, NULL), identity columns included.
  virtual Status insertRows(SqlTx& tx, const Table& table, const std::vector<const Column*>& columns,
                            const std::vector<SqlValue>& values) = 0;
  // Batches commit without waiting for the disk (a crash loses the last ones, rows and progress
  // together, and the copy continues from there); from this call on every commit is durable and so
  // is everything committed before it.
  virtual Status makeDurable() = 0;
};

Expected<std::unique_ptr<Side>> openSqliteSide(const std::string& path, Role role);
Expected<std::unique_ptr<Side>> openPgSide(const std::string& url, Role role);  // pg_migrate_side.cpp

}  // namespace tessera::cache::migrate
