// Owns the list of what a store migration copies: every table of the schema (SQLite version 8,
// PostgreSQL version 4) with its key, its identity column and each column's type and name per
// engine. A table or column added to either schema must be added here: migrate refuses a database
// that holds one it does not know, and the tests compare this list with fresh databases.
#include <stdexcept>

#include "store/migrate_side.h"

namespace tessera::cache::migrate {

namespace {

// "name:t" (i integer, r real, t text); "name:t/pgname" where PostgreSQL spells it otherwise,
// "name:t/-" where PostgreSQL has no such column.
std::vector<Column> columns(const std::string& spec) {
  std::vector<Column> out;
  size_t pos = 0;
  while (pos < spec.size()) {
    while (pos < spec.size() && spec[pos] == ' ') ++pos;
    if (pos >= spec.size()) break;
    size_t end = spec.find(' ', pos);
    if (end == std::string::npos) end = spec.size();
    const std::string item = spec.substr(pos, end - pos);
    pos = end;
    const size_t colon = item.find(':');
    Column c;
    c.name = item.substr(0, colon);
    const char t = item.at(colon + 1);
    c.type = t == 'i' ? ColType::Int : t == 'r' ? ColType::Real : ColType::Text;
    c.sqlite = c.name;
    c.postgres = c.name;
    if (const size_t slash = item.find('/'); slash != std::string::npos) {
      const std::string pg = item.substr(slash + 1);
      c.postgres = pg == "-" ? "" : pg;
    }
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<Table> makeTables() {
  return {
      {"tokens", {"name"}, "", columns("name:t hash:t scope:t created_at:t revoked_at:t")},
      {"workers",
       {"id"},
       "",
       columns("id:t token:t target:t arch:t units:i model:t device:t host:t tessera_version:t llvm_version:t "
               "toolkit_version:t driver_version:t slots:i registered_at:r last_seen:r quarantined:t stopped_at:r "
               "runtime_version:t probe_signature:t")},
      {"kernel_texts", {"workload"}, "", columns("workload:t ir:t")},
      {"keys",
       {"key_id"},
       "",
       columns("key_id:t family:t workload:t shape:t rank:i dtype:t layout:t target:t arch:t units:i winner_id:i "
               "winner_median_us:r winner_changes:i newest_created_at:t/- newest_toolchain:t/- winner_remeasured:i "
               "winner_rank:i")},
      {"records",
       {"id"},
       "id",
       columns("id:i key_id:t fingerprint:t status:t config:t n:i median_us:r p20_us:r p80_us:r gflops:r gbps:r "
               "peak_fraction:r max_abs_err:r max_rel_err:r trials:i tuning_seconds:r tessera_version:t "
               "llvm_version:t cuda_version:t cpu_model:t host:t user:t/user_name created_at:t stale:i/- pushed:i "
               "remeasured:i estimator:t bound:t writer:t received_at:t quarantined:i trust:i driver_version:t "
               "runtime_version:t measured_for:t")},
      {"jobs",
       {"seq"},
       "seq",
       columns("seq:i id:t submitter:t kind:t key_id:t key_json:t target:t arch:t units:i model:t kernel:t settings:t "
               "rounds:i first_trial:i elapsed_s:r state:t items:i done_items:i created_at:r finished_at:r "
               "changes:i")},
      {"job_items",
       {"job_id", "item"},
       "",
       columns("job_id:t item:i payload:t state:t worker_id:t lease_expires:r attempts:i lost_workers:t result:t "
               "record_id:i leased_at:r lost_tokens:t refused_by:t changed:i stolen_by:t")},
  };
}

}  // namespace

const Column& Table::column(const std::string& n) const {
  for (const Column& c : columns)
    if (c.name == n) return c;
  throw std::logic_error("migrate: table " + name + " has no column " + n);
}

namespace {
std::string keyColumn(const Table& t, size_t i, SqlDialect::Engine e) {
  const Column& c = t.column(t.key[i]);
  std::string name = c.in(e);
  if (c.type == ColType::Text && e == SqlDialect::Engine::Postgres) name += " COLLATE \"C\"";
  return name;
}
}  // namespace

std::string keyOrder(const Table& t, SqlDialect::Engine e) {
  std::string out;
  for (size_t i = 0; i < t.key.size(); ++i) out += (i ? ", " : "") + keyColumn(t, i, e);
  return out;
}

std::string keyAfter(const Table& t, SqlDialect::Engine e, const std::vector<std::string>& values) {
  // (a > ?1) OR (a = ?1 AND b > ?2) OR ...: a row-value comparison without relying on either
  // engine's support for it.
  std::string out;
  for (size_t i = 0; i < t.key.size(); ++i) {
    out += i ? " OR (" : "(";
    for (size_t j = 0; j < i; ++j) out += keyColumn(t, j, e) + " = " + values.at(j) + " AND ";
    out += keyColumn(t, i, e) + " > " + values.at(i) + ")";
  }
  return "(" + out + ")";
}

const std::vector<Table>& copiedTables() {
  static const std::vector<Table> tables = makeTables();
  return tables;
}

const std::map<std::string, std::string>& uncopiedTables() {
  static const std::map<std::string, std::string> tables = {
      {"sqlite_sequence", "SQLite's identity counters: carried as each identity's high-water mark"},
      {"tessera_meta", "PostgreSQL's schema bookkeeping: the destination keeps its own"},
      {kProgressTable, "a migration's progress: the destination's own"},
  };
  return tables;
}

}  // namespace tessera::cache::migrate
