// Tests the SQLite store's file: it persists and marks its file, migrates older layouts in place
// (versions 1, 3 and 4, made by undoing later migrations) and keeps estimated records through it.
// The RecordStore rules on every engine are store_test.cpp's.
#include <gtest/gtest.h>

#include <sqlite3.h>

#include <string>

#include "store/engine.h"
#include "store/schema.h"
#include "store/store.h"
#include "store/tokens.h"
#include "tests/cache_service/test_util.h"

namespace tessera::cache {
namespace {

using test::makeRecord;
using test::TempDir;

// A SQLite file at `path` holding `r`, closed again.
void writeStoreFile(const std::string& path, const Record& r) {
  auto s = openSqliteStore(path);
  ASSERT_TRUE(s.ok()) << s.error().message;
  ASSERT_TRUE((*s)->putOne(r).ok());
}

TEST(SqliteStore, PersistsAndMarksTheFile) {
  TempDir dir;
  const std::string path = dir.file("p.db");
  Record r = makeRecord({.key = 9, .median_us = 33});
  ASSERT_NO_FATAL_FAILURE(writeStoreFile(path, r));
  EXPECT_EQ(test::queryRows(path, "PRAGMA user_version")[0][0], std::to_string(kSchemaVersion));
  EXPECT_EQ(test::queryRows(path, "PRAGMA application_id")[0][0], std::to_string(0x54535352));
  EXPECT_EQ(test::queryRows(path, "PRAGMA journal_mode")[0][0], "wal");
  auto s = openSqliteStore(path, {.index_winners = true});
  ASSERT_TRUE(s.ok());
  auto w = (*s)->best(r.key_id);
  ASSERT_TRUE(w.ok() && *w);
  EXPECT_EQ(fingerprint((*w)->record), fingerprint(r));
  EXPECT_EQ(test::integrityCheck(path), "ok");
}

// What version 6 (the trust of measurements) added outside the job tables, undone to make an
// older file (version 8's kernel table is dropped with it).
// Version 11's column of `records`.
constexpr const char* kUndoV11 = "ALTER TABLE records DROP COLUMN measured_for";
// Version 7's columns of `records` (its other columns are in tables the older layouts drop whole).
constexpr const char* kUndoV7[] = {"ALTER TABLE records DROP COLUMN driver_version",
                                   "ALTER TABLE records DROP COLUMN runtime_version"};
constexpr const char* kUndoV6[] = {"DROP INDEX records_by_key_config", "ALTER TABLE records DROP COLUMN trust",
                                   "ALTER TABLE keys DROP COLUMN winner_rank"};

// A version-1 file (before re-measured winners were marked) is migrated in place when opened: its
// records and winners stay, and a re-measured record then outranks the old winner.
TEST(SqliteStore, MigratesAVersion1File) {
  TempDir dir;
  const std::string path = dir.file("v1.db");
  Record old = makeRecord({.key = 12, .median_us = 40});
  ASSERT_NO_FATAL_FAILURE(writeStoreFile(path, old));
  {  // back to the version-1 layout
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    for (const char* q : {kUndoV11, kUndoV7[0], kUndoV7[1], kUndoV6[0], kUndoV6[1], kUndoV6[2], "DROP TABLE job_items", "DROP TABLE jobs", "DROP TABLE workers",
                          "DROP INDEX records_by_writer", "DROP INDEX records_by_received",
                          "ALTER TABLE records DROP COLUMN writer", "ALTER TABLE records DROP COLUMN received_at",
                          "ALTER TABLE records DROP COLUMN quarantined",
                          "ALTER TABLE records DROP COLUMN estimator", "ALTER TABLE records DROP COLUMN bound",
                          "ALTER TABLE records DROP COLUMN remeasured", "ALTER TABLE keys DROP COLUMN winner_remeasured",
                          "DROP TABLE kernel_texts", "PRAGMA user_version=1"})
      EXPECT_EQ(sqlite3_exec(db, q, nullptr, nullptr, nullptr), SQLITE_OK) << q << ": " << sqlite3_errmsg(db);
    sqlite3_close(db);
  }
  auto s = openSqliteStore(path, {.index_winners = true});
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(test::queryRows(path, "PRAGMA user_version")[0][0], std::to_string(kSchemaVersion));
  auto w = (*s)->best(old.key_id);
  ASSERT_TRUE(w.ok() && *w);
  EXPECT_EQ(fingerprint((*w)->record), fingerprint(old));
  EXPECT_FALSE((*w)->record.remeasured);
  auto put = (*s)->putOne(makeRecord({.key = 12, .median_us = 45, .remeasured = true}));
  ASSERT_TRUE(put.ok());
  EXPECT_EQ(put->outcome, PutOutcome::Improved);
  EXPECT_EQ((*(*s)->best(old.key_id))->record.median_us, 45);
  EXPECT_EQ(test::integrityCheck(path), "ok");
}

// A version-3 file (before the trust model) is migrated in place: records keep their content,
// get no writer, received_at = created_at, and the stale flags the old key-level rule stored are
// ignored (staleness is computed per record now).
TEST(SqliteStore, MigratesAVersion3File) {
  TempDir dir;
  const std::string path = dir.file("v3.db");
  Record old = makeRecord({.key = 13, .median_us = 40, .created_at = "2025-05-05T05:05:05Z"});
  ASSERT_NO_FATAL_FAILURE(writeStoreFile(path, old));
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    for (const char* q : {kUndoV11, kUndoV7[0], kUndoV7[1], kUndoV6[0], kUndoV6[1], kUndoV6[2], "DROP TABLE job_items", "DROP TABLE jobs", "DROP TABLE workers",
                          "DROP INDEX records_by_writer", "DROP INDEX records_by_received",
                          "ALTER TABLE records DROP COLUMN writer", "ALTER TABLE records DROP COLUMN received_at",
                          "ALTER TABLE records DROP COLUMN quarantined", "UPDATE records SET stale = 1",
                          "DROP TABLE kernel_texts", "PRAGMA user_version=3"})
      EXPECT_EQ(sqlite3_exec(db, q, nullptr, nullptr, nullptr), SQLITE_OK) << q << ": " << sqlite3_errmsg(db);
    sqlite3_close(db);
  }
  auto s = openSqliteStore(path, {.index_winners = true});
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(test::queryRows(path, "PRAGMA user_version")[0][0], std::to_string(kSchemaVersion));
  auto w = (*s)->best(old.key_id);
  ASSERT_TRUE(w.ok() && *w);
  EXPECT_EQ(fingerprint((*w)->record), fingerprint(old));
  EXPECT_FALSE((*w)->record.stale);
  EXPECT_FALSE((*w)->record.quarantined);
  EXPECT_EQ((*w)->record.writer, "");
  EXPECT_EQ((*w)->record.received_at, "2025-05-05T05:05:05Z");
  EXPECT_EQ(*(*s)->administer({.until = "2025-06-01T00:00:00Z"}, AdminAction::Quarantine), 1);
  EXPECT_EQ(*(*s)->best(old.key_id), nullptr);
  EXPECT_EQ(test::integrityCheck(path), "ok");
}

// Estimated records keep their model and bound through a SQLite file, never become the winner of
// their key, and do not displace one.
// A version-4 file (before the job queue) is migrated in place: its tokens keep their hashes and
// scopes in the rebuilt table, which now also takes the worker scope, and the queue tables exist.
TEST(SqliteStore, MigratesAVersion4File) {
  TempDir dir;
  const std::string path = dir.file("v4.db");
  Record old = makeRecord({.key = 14, .median_us = 40});
  ASSERT_NO_FATAL_FAILURE(writeStoreFile(path, old));
  std::string secret;
  {
    auto tokens = TokenStore::open(path);
    ASSERT_TRUE(tokens.ok());
    secret = *(*tokens)->add("alice", Scope::Write);
  }
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    for (const char* q :
         {kUndoV11, kUndoV7[0], kUndoV7[1], kUndoV6[0], kUndoV6[1], kUndoV6[2], "DROP TABLE job_items", "DROP TABLE jobs", "DROP TABLE workers",
          "CREATE TABLE tokens_v4(name TEXT PRIMARY KEY, hash TEXT NOT NULL UNIQUE, scope TEXT NOT NULL CHECK"
          " (scope IN ('read','write','admin')), created_at TEXT NOT NULL, revoked_at TEXT)",
          "INSERT INTO tokens_v4 SELECT * FROM tokens", "DROP TABLE tokens", "ALTER TABLE tokens_v4 RENAME TO tokens",
          "DROP TABLE kernel_texts", "PRAGMA user_version=4"})
      EXPECT_EQ(sqlite3_exec(db, q, nullptr, nullptr, nullptr), SQLITE_OK) << q << ": " << sqlite3_errmsg(db);
    sqlite3_close(db);
  }
  auto s = openSqliteStore(path, {.index_winners = true});
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(test::queryRows(path, "PRAGMA user_version")[0][0], std::to_string(kSchemaVersion));
  EXPECT_EQ(fingerprint((*(*s)->best(old.key_id))->record), fingerprint(old));
  ASSERT_NE((*s)->jobs(), nullptr);
  auto tokens = TokenStore::open(path);
  ASSERT_TRUE(tokens.ok());
  auto active = (*tokens)->active();
  ASSERT_TRUE(active.ok());
  ASSERT_EQ(active->size(), 1u);
  EXPECT_EQ(active->front().name, "alice");
  EXPECT_EQ(active->front().scope, Scope::Write);
  TokenAuthenticator auth;
  auth.reset(*active);
  EXPECT_TRUE(auth.identify(secret).has_value());
  EXPECT_TRUE((*tokens)->add("gpu-box", Scope::Worker).ok());
  EXPECT_EQ(test::integrityCheck(path), "ok");
}

TEST(SqliteStore, EstimatesKeepTheirModelAndNeverWin) {
  TempDir dir;
  const std::string path = dir.file("e.db");
  Record est = makeRecord({.key = 14, .median_us = 5, .status = RecordStatus::Estimated});
  ASSERT_NO_FATAL_FAILURE(writeStoreFile(path, est));
  auto s = openSqliteStore(path, {.index_winners = true});
  ASSERT_TRUE(s.ok()) << s.error().message;
  auto w = (*s)->best(est.key_id);
  ASSERT_TRUE(w.ok());
  EXPECT_FALSE(*w);  // an estimate alone is no winner
  auto page = (*s)->list({.key_id = est.key_id});
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->records.size(), 1u);
  EXPECT_EQ(page->records[0].estimator, "analytic-v1");
  EXPECT_EQ(page->records[0].bound, "compute");
  EXPECT_EQ(fingerprint(page->records[0]), fingerprint(est));
  auto put = (*s)->putOne(makeRecord({.key = 14, .median_us = 50}));  // a measurement, 10x slower
  ASSERT_TRUE(put.ok());
  EXPECT_EQ(put->outcome, PutOutcome::Inserted);
  EXPECT_EQ((*(*s)->best(est.key_id))->record.median_us, 50);
}

}  // namespace
}  // namespace tessera::cache
