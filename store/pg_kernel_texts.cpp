// Owns the PostgreSQL store's kernel table (kernel_text.h): texts filed under their workload hash.
#include "store/kernel_text.h"
#include "store/pg_store_impl.h"

namespace tessera::cache::pg {

Status PgStore::putKernelText(const std::string& workload, const std::string& text) {
  TESSERA_TRY(checkKernelText(workload, text));
  return runTx(pool_, TxKind::Single, [&](Conn& c, pqxx::transaction_base& t) -> Status {
    exec(c, t, "INSERT INTO kernel_texts(workload, ir) VALUES($1, $2) ON CONFLICT DO NOTHING", workload, text);
    return {};
  });
}

Expected<std::optional<std::string>> PgStore::kernelText(const std::string& workload) {
  std::optional<std::string> out;
  TESSERA_TRY(runTx(pool_, TxKind::Single, [&](Conn& c, pqxx::transaction_base& t) -> Status {
    auto rows = exec(c, t, "SELECT ir FROM kernel_texts WHERE workload = $1", workload);
    if (!rows.empty()) out = asText(rows[0][0]);
    return {};
  }));
  return out;
}

// A range (hex digits sort before 'g' in the C collation named here, whatever the database's),
// not LIKE: no pattern characters to escape.
Expected<std::vector<std::string>> PgStore::kernelTextWorkloads(const std::string& prefix, int limit) {
  std::vector<std::string> out;
  TESSERA_TRY(runTx(pool_, TxKind::Single, [&](Conn& c, pqxx::transaction_base& t) -> Status {
    auto rows = exec(c, t, "SELECT workload FROM kernel_texts WHERE workload COLLATE \"C\" >= $1 AND workload COLLATE \"C\" < $2 "
                     "ORDER BY workload COLLATE \"C\" LIMIT $3",
                     prefix, prefix + "g", int64_t{limit});
    for (const auto& row : rows) out.push_back(asText(row[0]));
    return {};
  }));
  return out;
}

}  // namespace tessera::cache::pg
