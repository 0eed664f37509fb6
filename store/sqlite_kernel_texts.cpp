// Owns the SQLite store's kernel table (kernel_text.h): texts filed under their workload hash.
#include "store/kernel_text.h"
#include "store/sqlite_store_impl.h"

namespace tessera::cache {

Status SqliteStore::putKernelText(const std::string& workload, const std::string& text) {
  TESSERA_TRY(checkKernelText(workload, text));
  return write([&](sql::Db& db, Touched&) -> Status {
    TESSERA_ASSIGN(sql::Stmt st, db.prepare("INSERT INTO kernel_texts(workload, ir) VALUES(?1, ?2) ON CONFLICT DO NOTHING"));
    st.bind(1, workload).bind(2, text);
    return st.run();
  });
}

Expected<std::optional<std::string>> SqliteStore::kernelText(const std::string& workload) {
  TESSERA_ASSIGN(Reader rd, reader());
  TESSERA_ASSIGN(sql::Stmt st, rd->prepare("SELECT ir FROM kernel_texts WHERE workload = ?1"));
  st.bind(1, workload);
  TESSERA_ASSIGN(bool row, st.step());
  if (!row) return std::optional<std::string>();
  return std::optional<std::string>(st.text(0));
}

// A range on the primary key (hex digits sort before 'g'), not LIKE: no pattern characters to escape.
Expected<std::vector<std::string>> SqliteStore::kernelTextWorkloads(const std::string& prefix, int limit) {
  TESSERA_ASSIGN(Reader rd, reader());
  TESSERA_ASSIGN(sql::Stmt st,
                 rd->prepare("SELECT workload FROM kernel_texts WHERE workload >= ?1 AND workload < ?2 ORDER BY workload LIMIT ?3"));
  st.bind(1, prefix).bind(2, prefix + "g").bind(3, int64_t{limit});
  std::vector<std::string> out;
  for (;;) {
    TESSERA_ASSIGN(bool row, st.step());
    if (!row) break;
    out.push_back(st.text(0));
  }
  return out;
}

}  // namespace tessera::cache
