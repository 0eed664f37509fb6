// Owns the on-disk schema of a Tessera database (records, keys with their winners, tokens, the
// measurement job queue) and
// its migrations, keyed by PRAGMA user_version and marked with a PRAGMA application_id.
#pragma once

#include "store/sqlite_db.h"

namespace tessera::cache {

inline constexpr int kApplicationId = 0x54535352;  // "TSSR"
inline constexpr int kSchemaVersion = 11;

// Sets WAL mode and synchronous level, refuses files that belong to another application or to a
// newer Tessera, and migrates older schemas forward inside one write transaction.
// synchronous_full: fsync on every commit (survives power loss); otherwise NORMAL (WAL survives
// process crashes, may lose the last commits on power loss). in_memory: a private database in
// memory (the in-memory store), which has no file to keep a WAL for: its journal stays in memory.
Status openSchema(sql::Db& db, bool synchronous_full, bool in_memory = false);

}  // namespace tessera::cache
