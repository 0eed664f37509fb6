// Owns the PostgreSQL store's overview page (RecordStore::kernels, kernel_list.h): the page of
// keys, its total, and each listed key's shown record and record count in one read-only snapshot.
#include <algorithm>

#include "store/pg_store_impl.h"

namespace tessera::cache::pg {

Expected<KernelPage> PgStore::kernels(const KernelQuery& q) {
  const KernelSql dialect{.numbered = true};
  std::vector<std::string> params;
  const std::string where = dialect.where(q, params);
  std::vector<std::string> page_params = params;
  page_params.push_back(std::to_string(std::clamp(q.limit, 1, kMaxKernelPage)));
  page_params.push_back(std::to_string(std::max<int64_t>(q.offset, 0)));
  const std::string page_sql = std::string("SELECT ") + KernelSql::kKeyColumns + " FROM keys k" + where +
                               KernelSql::orderBy(q.order) + " LIMIT $" + std::to_string(page_params.size() - 1) +
                               "::bigint OFFSET $" + std::to_string(page_params.size()) + "::bigint";
  const std::string count_sql = "SELECT count(*) FROM keys k" + where;
  static const std::string record_sql = std::string("SELECT ") + kRecordColumns +
                                        " FROM records r JOIN keys k ON k.key_id = r.key_id WHERE r.id = $1::bigint";
  static const std::string estimate_sql =
      std::string("SELECT ") + kRecordColumns +
      " FROM records r JOIN keys k ON k.key_id = r.key_id"
      " WHERE r.key_id = $1 AND r.status = 'estimated' AND r.quarantined = 0 ORDER BY r.median_us, r.id LIMIT 1";
  const std::string records_sql = dialect.countRecords();

  KernelPage page;
  Status st = runTx(pool_, TxKind::ReadOnly, [&](Conn& c, pqxx::transaction_base& t) -> Status {
    page = {};
    page.total = asInt(exec(c, t, count_sql, pqxx::prepare::make_dynamic_params(params))[0][0]);
    std::vector<int64_t> winners;
    for (const auto& row : exec(c, t, page_sql, pqxx::prepare::make_dynamic_params(page_params))) {
      KernelRow r;
      r.key_id = asText(row[0]);
      r.key.family = asText(row[1]);
      r.key.workload = asText(row[2]);
      auto shape = parseShape(asText(row[3]));
      if (!shape.ok()) return makeError(ErrorCode::IOError, "corrupt row in keys (" + r.key_id + ")");
      r.key.shape = std::move(*shape);
      r.key.dtype = asText(row[4]);
      r.key.layout = asText(row[5]);
      r.key.target = asText(row[6]);
      r.key.arch = asText(row[7]);
      r.key.units = asInt(row[8]);
      winners.push_back(row[9].is_null() ? 0 : asInt(row[9]));
      page.rows.push_back(std::move(r));
    }
    for (size_t n = 0; n < page.rows.size(); ++n) {
      KernelRow& row = page.rows[n];
      pqxx::result shown = winners[n] ? exec(c, t, record_sql, std::to_string(winners[n]))
                                      : exec(c, t, estimate_sql, row.key_id);
      if (!shown.empty()) {
        TESSERA_ASSIGN(Record rec, readRow(shown[0]));
        row.shown = std::move(rec);
        row.label = winners[n] ? KernelLabel::Measured : KernelLabel::Estimated;
      }
      pqxx::result counted = exec(c, t, records_sql, row.key_id);
      row.records = asInt(counted[0][0]);
      row.newest_id = asInt(counted[0][1]);
      row.newest_measured = asText(counted[0][2]);
      if (!row.shown && row.records == 0) row.label = KernelLabel::Quarantined;
    }
    return {};
  });
  if (!st.ok()) return st.takeError();
  return page;
}

}  // namespace tessera::cache::pg
