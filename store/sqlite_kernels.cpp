// Owns the SQLite store's overview page (RecordStore::kernels, kernel_list.h): the page of keys
// and its total in one read transaction, then each listed key's shown record and record count.
#include <algorithm>

#include "store/sqlite_store_impl.h"

namespace tessera::cache {

Expected<KernelPage> SqliteStore::kernels(const KernelQuery& q) {
  const KernelSql dialect{.numbered = false};
  std::vector<std::string> params;
  const std::string where = dialect.where(q, params);
  const std::string page_sql = std::string("SELECT ") + KernelSql::kKeyColumns + " FROM keys k" + where +
                               KernelSql::orderBy(q.order) + " LIMIT ? OFFSET ?";
  const std::string count_sql = "SELECT count(*) FROM keys k" + where;
  static const std::string record_sql =
      std::string("SELECT ") + kRecordColumns + " FROM records r JOIN keys k ON k.key_id = r.key_id WHERE r.id = ?";
  static const std::string estimate_sql =
      std::string("SELECT ") + kRecordColumns +
      " FROM records r JOIN keys k ON k.key_id = r.key_id"
      " WHERE r.key_id = ? AND r.status = 'estimated' AND r.quarantined = 0 ORDER BY r.median_us, r.id LIMIT 1";
  const std::string records_sql = dialect.countRecords();

  TESSERA_ASSIGN(Reader rd, reader());
  // One snapshot: the total, the page and its rows agree with each other.
  TESSERA_TRY(rd->exec("BEGIN"));
  auto body = [&]() -> Expected<KernelPage> {
    KernelPage page;
    {
      TESSERA_ASSIGN(sql::Stmt * st, rd->cached(count_sql));
      sql::Use use(*st);
      int i = 1;
      for (const auto& p : params) st->bind(i++, p);
      TESSERA_ASSIGN(bool row, st->step());
      page.total = row ? st->i64(0) : 0;
    }
    std::vector<int64_t> winners;
    {
      TESSERA_ASSIGN(sql::Stmt * st, rd->cached(page_sql));
      sql::Use use(*st);
      int i = 1;
      for (const auto& p : params) st->bind(i++, p);
      st->bind(i, std::clamp(q.limit, 1, kMaxKernelPage));
      st->bind(i + 1, std::max<int64_t>(q.offset, 0));
      for (;;) {
        TESSERA_ASSIGN(bool row, st->step());
        if (!row) break;
        KernelRow r;
        r.key_id = st->text(0);
        r.key.family = st->text(1);
        r.key.workload = st->text(2);
        auto shape = parseShape(st->text(3));
        if (!shape.ok()) return makeError(ErrorCode::IOError, "corrupt row in keys (" + r.key_id + ")");
        r.key.shape = std::move(*shape);
        r.key.dtype = st->text(4);
        r.key.layout = st->text(5);
        r.key.target = st->text(6);
        r.key.arch = st->text(7);
        r.key.units = st->i64(8);
        winners.push_back(st->isNull(9) ? 0 : st->i64(9));
        page.rows.push_back(std::move(r));
      }
    }
    for (size_t n = 0; n < page.rows.size(); ++n) {
      KernelRow& row = page.rows[n];
      TESSERA_ASSIGN(sql::Stmt * st, rd->cached(winners[n] ? record_sql : estimate_sql));
      {
        sql::Use use(*st);
        if (winners[n]) st->bind(1, winners[n]);
        else st->bind(1, row.key_id);
        TESSERA_ASSIGN(bool found, st->step());
        if (found) {
          TESSERA_ASSIGN(Record rec, readRow(*st));
          row.shown = std::move(rec);
          row.label = winners[n] ? KernelLabel::Measured : KernelLabel::Estimated;
        }
      }
      TESSERA_ASSIGN(sql::Stmt * cnt, rd->cached(records_sql));
      sql::Use use(*cnt);
      cnt->bind(1, row.key_id);
      TESSERA_ASSIGN(bool counted, cnt->step());
      row.records = counted ? cnt->i64(0) : 0;
      if (counted) {
        row.newest_id = cnt->i64(1);
        row.newest_measured = cnt->text(2);
      }
      if (!row.shown && row.records == 0) row.label = KernelLabel::Quarantined;
    }
    return page;
  };
  auto out = body();
  (void)rd->exec("COMMIT");
  return out;
}

}  // namespace tessera::cache
