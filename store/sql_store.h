// Owns what the record stores of the SQL engines (SQLite, PostgreSQL) do alike: the store core's
// best-wins put and admin actions over the engine's transactions (store_core.h), the client-side
// outbox, the job queue on those same transactions (sql_job_queue.h), and how a record read is
// served and nearby winners are answered. An engine adds its transactions, its reads and the rest
// of RecordStore.
#pragma once

#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "store/outbox.h"
#include "store/record_json.h"
#include "store/sql_job_queue.h"
#include "store/store.h"
#include "store/store_core.h"

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

 protected:
  // A record as both engines serve it (best, bestMatching, the winners index): its JSON made once.
  static ServedRecordPtr serve(Record r) {
    auto served = std::make_shared<ServedRecord>();
    served->json = encodeRecord(r);
    served->record = std::move(r);
    return served;
  }
  // nearest() from the winners of the key's family, dtype, target, arch and rank that the engine
  // read: those whose shape has a distance to the key's, ranked (rankNearest).
  static std::vector<NearestMatch> nearestOf(const HardKey& key, std::vector<Record> winners, int limit) {
    std::vector<NearestMatch> out;
    for (Record& r : winners)
      if (auto d = shapeDistance(key.shape, r.key.shape)) out.push_back({std::move(r), *d});
    rankNearest(key, out, limit);
    return out;
  }

 private:
  SqlJobQueue job_queue_{*this};
};

}  // namespace tessera::cache
