// Owns the store migration (store_migrate.h), written once over the two engines' sides
// (migrate_side.h).
//
// How it resumes: the destination holds a progress table (tessera_migration) naming the source and,
// per table, how many rows were copied and the key of the last one. Every batch is one destination
// transaction that first moves that table's progress from the value this process last wrote to the
// new one (an UPDATE ... WHERE value = old: a compare-and-set, so two migrations into one
// destination cannot interleave) and then inserts the batch's rows. The rows and their progress
// commit together or not at all, so after a SIGKILL the same command reads the progress and
// continues after the last committed key: no row is copied twice or skipped. Keys are read in
// byte order on both engines, so the order, and with it the resume point, is the same however the
// source is read.
//
// How it verifies: every table is read again on both sides in key order, each value encoded
// canonically (type, then its text; doubles as shortest round-trip text, so SQLite's REAL and
// PostgreSQL's DOUBLE PRECISION encode alike), and hashed with SHA-256; counts, digests and the
// identity counters must be equal.
#include "store/store_migrate.h"

#include <sys/stat.h>

#include <charconv>
#include <cmath>
#include <map>

#include "store/engine.h"
#include "store/migrate_side.h"
#include "store/record.h"
#include "support/hash.h"

namespace tessera::cache {

namespace {

using migrate::Column;
using migrate::ColType;
using migrate::Role;
using migrate::Side;
using migrate::Table;

// --- canonical values -----------------------------------------------------------------------------

// A column value as the schema types it, whatever the engine returned (PostgreSQL: text).
SqlValue typed(const SqlRow& row, size_t i, ColType type) {
  if (std::holds_alternative<std::monostate>(row.cols.at(i))) return std::monostate{};
  switch (type) {
    case ColType::Int: return row.i64(i);
    case ColType::Real: return row.f64(i);
    case ColType::Text: return row.text(i);
  }
  return std::monostate{};
}

// n | i<decimal>; | r<shortest round-trip>; | t<length>:<bytes>
void encode(const SqlValue& v, std::string& out) {
  if (const auto* n = std::get_if<int64_t>(&v)) {
    out += 'i';
    out += std::to_string(*n);
    out += ';';
  } else if (const auto* d = std::get_if<double>(&v)) {
    char buf[64];
    auto res = std::to_chars(buf, buf + sizeof buf, *d);
    out += 'r';
    out.append(buf, res.ptr);
    out += ';';
  } else if (const auto* s = std::get_if<std::string>(&v)) {
    out += 't';
    out += std::to_string(s->size());
    out += ':';
    out += *s;
  } else {
    out += 'n';
  }
}

// The inverse of encode for key values (integers and text); false if `in` is not such an encoding.
bool decodeKey(std::string_view in, std::vector<SqlValue>& out) {
  while (!in.empty()) {
    const char tag = in.front();
    in.remove_prefix(1);
    if (tag == 'i') {
      const size_t semi = in.find(';');
      int64_t v = 0;
      if (semi == std::string_view::npos || std::from_chars(in.data(), in.data() + semi, v).ptr != in.data() + semi)
        return false;
      out.emplace_back(v);
      in.remove_prefix(semi + 1);
    } else if (tag == 't') {
      const size_t colon = in.find(':');
      size_t len = 0;
      if (colon == std::string_view::npos ||
          std::from_chars(in.data(), in.data() + colon, len).ptr != in.data() + colon || in.size() - colon - 1 < len)
        return false;
      out.emplace_back(std::string(in.substr(colon + 1, len)));
      in.remove_prefix(colon + 1 + len);
    } else {
      return false;
    }
  }
  return true;
}

// A table's progress in the destination: "<rows copied>|<encoded key of the last row>".
struct Progress {
  int64_t rows = 0;
  std::vector<SqlValue> after;
  std::string value;  // as stored
};

Expected<Progress> parseProgress(const std::string& table, const std::string& value) {
  Progress p;
  p.value = value;
  const size_t bar = value.find('|');
  if (bar == std::string::npos || std::from_chars(value.data(), value.data() + bar, p.rows).ptr != value.data() + bar ||
      !decodeKey(std::string_view(value).substr(bar + 1), p.after))
    return makeError(ErrorCode::InvalidArgument,
                     "the destination's migration progress for " + table + " is unreadable: '" + value + "'");
  return p;
}

std::string progressValue(int64_t rows, const std::vector<SqlValue>& after) {
  std::string v = std::to_string(rows) + "|";
  for (const SqlValue& k : after) encode(k, v);
  return v;
}

// A statement whose count of changed rows does not matter.
Status exec(SqlTx& tx, const std::string& sql, const std::vector<SqlValue>& params, bool once = false) {
  auto n = tx.run(sql, params, once);
  if (!n.ok()) return n.takeError();
  return {};
}

// --- locations ------------------------------------------------------------------------------------

Expected<std::unique_ptr<Side>> openSide(const std::string& location, const char* flag, Role role) {
  if (location.empty()) return makeError(ErrorCode::InvalidArgument, std::string(flag) + " is empty");
  if (isPostgresLocation(location)) {
#ifdef TESSERA_WITH_POSTGRES
    return migrate::openPgSide(location, role);
#else
    return makeError(ErrorCode::Unsupported, std::string(flag) +
                                                 ": this tessera was built without the PostgreSQL engine "
                                                 "(install libpqxx-dev and rebuild: scripts/setup.sh does)");
#endif
  }
  if (const size_t colon = location.find("://"); colon != std::string::npos)
    return makeError(ErrorCode::InvalidArgument, std::string(flag) + ": unknown store scheme '" +
                                                     redactLocation(location.substr(0, colon)) +
                                                     "://' (give a SQLite file path or a postgresql:// URL)");
  return migrate::openSqliteSide(location, role);
}

// --- the migration --------------------------------------------------------------------------------

class Migration {
 public:
  Migration(Side& src, Side& dst, const MigrateOptions& o) : src_(src), dst_(dst), o_(o) {}

  Expected<MigrateReport> run() {
    report_.from_shown = src_.shown();
    report_.to_shown = dst_.shown();
    // One source snapshot for the copy and the verification: the copy is of one moment.
    Status s = src_.read([&](SqlTx& stx) -> Status {
      TESSERA_TRY(checkLayout(src_, stx, "source"));
      TESSERA_TRY(dst_.write([&](SqlTx& dtx) -> Status { return begin(dtx); }));
      if (!report_.already_done) {
        for (const Table& t : migrate::copiedTables()) TESSERA_TRY(copy(stx, t));
        TESSERA_TRY(copyHighWater(stx));
      }
      return verify(stx);
    });
    if (!s.ok()) return s.takeError();
    if (report_.mismatch.empty() && !report_.already_done) {
      // Durable first: a finished migration's rows survive a power loss as its mark does.
      TESSERA_TRY(dst_.makeDurable());
      TESSERA_TRY(dst_.write([&](SqlTx& dtx) -> Status {
        TESSERA_TRY(exec(dtx, "UPDATE tessera_migration SET value = 'done' WHERE item = 'state'", {}));
        return exec(dtx, "INSERT INTO tessera_migration(item, value) VALUES('finished_at', ?1)", {utcNow()});
      }));
    }
    return report_;
  }

 private:
  void say(const std::string& line) {
    if (o_.progress) o_.progress(line);
  }
  static const char* engineName(SqlDialect::Engine e) {
    return e == SqlDialect::Engine::Sqlite ? "SQLite" : "PostgreSQL";
  }

  // Both databases hold exactly the tables and columns this tessera copies (plus the uncopied
  // bookkeeping tables): a table a newer schema added is refused, never silently left behind.
  Status checkLayout(Side& side, SqlTx& tx, const char* which) {
    TESSERA_ASSIGN(auto layout, side.layout(tx));
    const auto e = side.engine();
    const std::string prefix = std::string("the ") + which + " (" + side.shown() + ") ";
    const std::string hint = ": it was written by another version of tessera; migrate with that one";
    for (const auto& [name, cols] : layout) {
      if (migrate::uncopiedTables().count(name)) continue;
      const Table* spec = nullptr;
      for (const Table& t : migrate::copiedTables())
        if (t.name == name) spec = &t;
      if (!spec) return makeError(ErrorCode::Unsupported, prefix + "holds a table migrate does not know, " + name + hint);
      for (const std::string& c : cols) {
        bool known = false;
        for (const Column& k : spec->columns) known = known || k.in(e) == c;
        if (!known)
          return makeError(ErrorCode::Unsupported,
                           prefix + "holds a column migrate does not know, " + name + "." + c + hint);
      }
    }
    for (const Table& t : migrate::copiedTables()) {
      auto it = layout.find(t.name);
      if (it == layout.end()) return makeError(ErrorCode::Unsupported, prefix + "lacks the table " + t.name + hint);
      for (const Column& k : t.columns) {
        if (k.in(e).empty()) continue;
        bool present = false;
        for (const std::string& c : it->second) present = present || c == k.in(e);
        if (!present)
          return makeError(ErrorCode::Unsupported, prefix + "lacks the column " + t.name + "." + k.in(e) + hint);
      }
    }
    if (which == std::string("destination")) has_progress_ = layout.count(migrate::kProgressTable) > 0;
    return {};
  }

  // Decides, in the destination's first transaction, whether this is a new migration (the
  // destination holds no rows), the continuation of an interrupted one, or a finished one.
  Status begin(SqlTx& dtx) {
    TESSERA_TRY(checkLayout(dst_, dtx, "destination"));
    if (has_progress_) {
      TESSERA_ASSIGN(auto rows, dtx.query("SELECT item, value FROM tessera_migration", {}));
      std::map<std::string, std::string> items;
      for (const SqlRow& r : rows) items[r.text(0)] = r.text(1);
      if (items["source"] != src_.identity())
        return makeError(ErrorCode::InvalidArgument,
                         "the destination holds a migration from another store (" + items["source_shown"] +
                             "); give an empty destination, or that store as --from to continue it");
      for (const Table& t : migrate::copiedTables()) {
        TESSERA_ASSIGN(progress_[t.name], parseProgress(t.name, items["cursor:" + t.name]));
      }
      report_.already_done = items["state"] == "done";
      report_.resumed = !report_.already_done;
      say(report_.already_done ? "the destination holds this migration, finished: verifying it again"
                               : "continuing the migration the destination holds (started " + items["started_at"] +
                                     ")");
      return {};
    }
    std::string held;
    for (const Table& t : migrate::copiedTables()) {
      TESSERA_ASSIGN(auto n, dtx.query("SELECT count(*) FROM " + t.name, {}));
      if (n.at(0).i64(0) > 0) held += (held.empty() ? "" : ", ") + std::to_string(n[0].i64(0)) + " " + t.name;
    }
    if (!held.empty())
      return makeError(ErrorCode::InvalidArgument, "the destination already holds data (" + held +
                                                       "): migrate copies into an empty store only (a new SQLite "
                                                       "file or an empty PostgreSQL database)");
    TESSERA_TRY(exec(dtx, "CREATE TABLE tessera_migration(item TEXT PRIMARY KEY, value TEXT NOT NULL)", {}, true));
    std::vector<std::pair<std::string, std::string>> items = {{"source", src_.identity()},
                                                              {"source_shown", src_.shown()},
                                                              {"source_engine", engineName(src_.engine())},
                                                              {"state", "copying"},
                                                              {"started_at", utcNow()}};
    for (const Table& t : migrate::copiedTables()) {
      progress_[t.name].value = progressValue(0, {});
      items.emplace_back("cursor:" + t.name, progress_[t.name].value);
    }
    for (const auto& [item, value] : items)
      TESSERA_TRY(exec(dtx, "INSERT INTO tessera_migration(item, value) VALUES(?1, ?2)", {item, value}));
    say("migrating " + src_.shown() + " (" + engineName(src_.engine()) + ") into " + dst_.shown() + " (" +
        engineName(dst_.engine()) + ")");
    return {};
  }

  // The columns both engines have, by their names on each side.
  void commonColumns(const Table& t, std::vector<const Column*>& cols, std::vector<std::string>& src_names,
                     std::vector<std::string>& dst_names) const {
    for (const Column& c : t.columns) {
      if (c.in(src_.engine()).empty() || c.in(dst_.engine()).empty()) continue;
      cols.push_back(&c);
      src_names.push_back(c.in(src_.engine()));
      dst_names.push_back(c.in(dst_.engine()));
    }
  }

  Status copy(SqlTx& stx, const Table& t) {
    std::vector<const Column*> cols;
    std::vector<std::string> src_names, dst_names;
    commonColumns(t, cols, src_names, dst_names);
    std::vector<size_t> key_at;
    for (const std::string& k : t.key)
      for (size_t i = 0; i < cols.size(); ++i)
        if (cols[i]->name == k) key_at.push_back(i);

    Progress& p = progress_[t.name];
    TESSERA_ASSIGN(auto total_rows, stx.query("SELECT count(*) FROM " + t.name, {}));
    const int64_t total = total_rows.at(0).i64(0);
    if (p.rows > 0 && p.rows < total)
      say(t.name + ": " + std::to_string(p.rows) + " of " + std::to_string(total) + " rows were copied before; continuing");
    TESSERA_ASSIGN(auto scan, src_.scan(stx, t, src_names, p.after));
    int want = std::max(1, o_.batch_rows);
    int64_t next_say = p.rows + std::max<int64_t>(1, total / 10);
    for (;;) {
      TESSERA_ASSIGN(auto rows, scan->next(want));
      if (rows.empty()) break;
      std::vector<SqlValue> values;
      values.reserve(rows.size() * cols.size());
      size_t bytes = 0;
      for (const SqlRow& r : rows)
        for (size_t i = 0; i < cols.size(); ++i) {
          values.push_back(typed(r, i, cols[i]->type));
          if (const auto* s = std::get_if<std::string>(&values.back())) bytes += s->size();
        }
      std::vector<SqlValue> last;
      for (size_t at : key_at) last.push_back(values[(rows.size() - 1) * cols.size() + at]);
      const std::string next = progressValue(p.rows + static_cast<int64_t>(rows.size()), last);
      TESSERA_TRY(dst_.write([&](SqlTx& dtx) -> Status {
        TESSERA_ASSIGN(int64_t moved, dtx.run("UPDATE tessera_migration SET value = ?1 WHERE item = ?2 AND value = ?3",
                                              {next, "cursor:" + t.name, p.value}));
        if (moved != 1)
          return makeError(ErrorCode::InvalidArgument,
                           "the destination's progress for " + t.name +
                               " moved under this migration: another migrate is writing it; run one at a time");
        return dst_.insertRows(dtx, t, cols, values);
      }));
      p.rows += static_cast<int64_t>(rows.size());
      p.value = next;
      p.after = std::move(last);
      if (p.rows >= next_say) {
        say(t.name + ": " + std::to_string(p.rows) + " of " + std::to_string(total) + " rows");
        next_say = p.rows + std::max<int64_t>(1, total / 10);
      }
      // Large rows (kernel texts, job payloads) make smaller batches: a batch's values stay near
      // 16 MiB whatever the rows hold.
      if (bytes > (16u << 20) && want > 1) want /= 2;
      else if (bytes < (4u << 20) && want < o_.batch_rows) want = std::min(o_.batch_rows, want * 2);
    }
    return {};
  }

  Status copyHighWater(SqlTx& stx) {
    for (const Table& t : migrate::copiedTables()) {
      if (t.identity.empty()) continue;
      TESSERA_ASSIGN(int64_t hw, src_.highWater(stx, t));
      TESSERA_TRY(dst_.write([&](SqlTx& dtx) { return dst_.setHighWater(dtx, t, hw); }));
    }
    return {};
  }

  struct Digest {
    int64_t rows = 0;
    std::string sha256;
  };

  Expected<Digest> digest(Side& side, SqlTx& tx, const Table& t) {
    std::vector<const Column*> cols;
    std::vector<std::string> src_names, dst_names;
    commonColumns(t, cols, src_names, dst_names);
    TESSERA_ASSIGN(auto scan, side.scan(tx, t, &side == &src_ ? src_names : dst_names, {}));
    Sha256 h;
    Digest d;
    std::string row;
    for (;;) {
      TESSERA_ASSIGN(auto rows, scan->next(std::max(1, o_.batch_rows)));
      if (rows.empty()) break;
      for (const SqlRow& r : rows) {
        row.clear();
        for (size_t i = 0; i < cols.size(); ++i) encode(typed(r, i, cols[i]->type), row);
        row += '\n';
        h.update(row);
        ++d.rows;
      }
    }
    d.sha256 = h.hexDigest();
    return d;
  }

  Status verify(SqlTx& stx) {
    say("verifying: counting and hashing every table on both sides");
    std::vector<Digest> source;
    std::vector<int64_t> source_hw;
    for (const Table& t : migrate::copiedTables()) {
      TESSERA_ASSIGN(Digest d, digest(src_, stx, t));
      source.push_back(std::move(d));
      if (!t.identity.empty()) {
        TESSERA_ASSIGN(int64_t hw, src_.highWater(stx, t));
        source_hw.push_back(hw);
      }
    }
    say("verifying: the source's checksums done, now the destination's");
    std::vector<Digest> dest;
    std::vector<int64_t> dest_hw;
    TESSERA_TRY(dst_.read([&](SqlTx& dtx) -> Status {
      for (const Table& t : migrate::copiedTables()) {
        TESSERA_ASSIGN(Digest d, digest(dst_, dtx, t));
        dest.push_back(std::move(d));
        if (!t.identity.empty()) {
          TESSERA_ASSIGN(int64_t hw, dst_.highWater(dtx, t));
          dest_hw.push_back(hw);
        }
      }
      return {};
    }));
    size_t i = 0, h = 0;
    std::vector<MigrateCheck> counters;
    for (const Table& t : migrate::copiedTables()) {
      report_.checks.push_back({t.name, source[i].rows, dest[i].rows, source[i].sha256, dest[i].sha256});
      ++i;
      if (!t.identity.empty()) {
        counters.push_back({t.name + "." + t.identity + " high-water", 1, 1, std::to_string(source_hw[h]),
                            std::to_string(dest_hw[h])});
        ++h;
      }
    }
    report_.checks.insert(report_.checks.end(), counters.begin(), counters.end());
    for (const MigrateCheck& c : report_.checks)
      if (!c.equal() && report_.mismatch.empty()) report_.mismatch = c.table;
    return {};
  }

  Side& src_;
  Side& dst_;
  const MigrateOptions& o_;
  MigrateReport report_;
  bool has_progress_ = false;
  std::map<std::string, Progress> progress_;
};

}  // namespace

Expected<MigrateReport> migrateStore(const MigrateOptions& o) {
  if (o.batch_rows < 1 || o.batch_rows > 100000)
    return makeError(ErrorCode::InvalidArgument, "the batch size must be in 1..100000 rows");
  TESSERA_ASSIGN(auto src, openSide(o.from, "--from", Role::Source));
  TESSERA_ASSIGN(auto dst, openSide(o.to, "--to", Role::Destination));
  // Compared before the destination's schema is touched: a store is never migrated into itself.
  if (src->identity() == dst->identity())
    return makeError(ErrorCode::InvalidArgument,
                     "--from and --to name the same store (" + src->shown() + "): give another destination");
  TESSERA_TRY(dst->prepareDestination());
  Migration m(*src, *dst, o);
  return m.run();
}

Expected<std::optional<std::string>> unfinishedMigration(const std::string& location) {
  std::optional<std::string> from;
  if (!isPostgresLocation(location)) {
    struct stat st {};
    if (::stat(location.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return from;  // serve makes or refuses it
  }
  TESSERA_ASSIGN(auto side, openSide(location, "--store", Role::Source));
  TESSERA_TRY(side->read([&](SqlTx& tx) -> Status {
    TESSERA_ASSIGN(auto layout, side->layout(tx));
    if (!layout.count(migrate::kProgressTable)) return {};
    TESSERA_ASSIGN(auto rows, tx.query("SELECT item, value FROM tessera_migration", {}));
    std::map<std::string, std::string> items;
    for (const SqlRow& r : rows) items[r.text(0)] = r.text(1);
    if (items["state"] != "done") from = items["source_shown"].empty() ? std::string("?") : items["source_shown"];
    return {};
  }));
  return from;
}

}  // namespace tessera::cache
