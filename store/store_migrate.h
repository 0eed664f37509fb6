// Owns copying a whole store from one database to another (`tessera serve migrate`): SQLite to
// PostgreSQL, PostgreSQL to SQLite, or within one engine. A faithful copy: every row of every table
// as stored (records with their writer, received_at, trust and quarantine; tokens as their hashes;
// workers, jobs, items, the kernel table), identity counters included; nothing is re-validated or
// re-stamped. Resumable after any interruption, and verified at the end by row counts and content
// checksums computed on both sides.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "support/status.h"

namespace tessera::cache {

struct MigrateOptions {
  std::string from, to;  // a SQLite file path or a postgresql:// URL each
  int batch_rows = 1000;  // rows per destination transaction (and per progress step)
  // Called with one line per step (a table started, every tenth of it, resumed, verified).
  std::function<void(const std::string&)> progress;
};

// One table (or identity counter) as both sides hold it at the end.
struct MigrateCheck {
  std::string table;  // "records", or "records.id high-water" for an identity counter
  int64_t source_rows = 0, destination_rows = 0;
  std::string source_sha256, destination_sha256;  // the counters: their values
  bool equal() const { return source_rows == destination_rows && source_sha256 == destination_sha256; }
};

struct MigrateReport {
  std::string from_shown, to_shown;  // locations without passwords
  bool resumed = false;              // an interrupted migration was continued
  bool already_done = false;         // the destination held this migration complete: verified only
  std::vector<MigrateCheck> checks;  // every copied table, then the identity counters
  std::string mismatch;              // "" when every check is equal; else the first table that differs
};

// Copies o.from into o.to. The destination must be empty (a new SQLite file, an empty PostgreSQL
// database, or a store that holds no rows) or hold an interrupted or finished migration from the
// same source, which is continued or verified again. The source is read in one snapshot and never
// written. An Error says what is wrong in one line (unknown scheme, missing file, unreachable
// server, a schema newer than this tessera, the same store twice, a destination holding other
// data); a finished copy whose checks differ returns a report naming the table in `mismatch`.
Expected<MigrateReport> migrateStore(const MigrateOptions& o);

// When `location` is the destination of a migration that has not finished, the source it copies
// from (as messages show it: no password); nullopt otherwise (no such store yet, or no migration,
// or a finished one). `serve` refuses such a store: every write would fail on its half-copied
// tables (issue 47), and the same `serve migrate` command finishes it.
Expected<std::optional<std::string>> unfinishedMigration(const std::string& location);

}  // namespace tessera::cache
