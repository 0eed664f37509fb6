// Owns what the record stores of the SQL engines (SQLite, PostgreSQL) do alike: the store core's
// best-wins put and admin actions over the engine's transactions (store_core.h), the client-side
// outbox, and the job queue on those same transactions (sql_job_queue.h). An engine adds its
// transactions, its reads and the rest of RecordStore.
#pragma once

#include <span>
#include <vector>

#include "cache_service/outbox.h"
#include "cache_service/sql_job_queue.h"
#include "cache_service/store.h"
#include "cache_service/store_core.h"

namespace tessera::cache {

class SqlRecordStore : public RecordStore, public Outbox, protected SqlTxRunner {
 public:
  Expected<std::vector<PutResult>> put(std::span<const Record> records, const PutOptions& opts) final {
    return core::putRecords(*this, records, opts);
  }
  Expected<int64_t> administer(const RecordSelector& sel, AdminAction action, double agree_factor) final {
    return core::administerRecords(*this, sel, action, agree_factor);
  }
  Outbox* outbox() final { return this; }
  JobQueue* jobs() override { return &job_queue_; }

 private:
  SqlJobQueue job_queue_{*this};
};

}  // namespace tessera::cache
