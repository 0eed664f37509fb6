// Owns the measurement job queue of the SQL engines (jobs.h), written once over SqlTx (sql_tx.h):
// the engine hands it transactions and keeps its own locking (SQLite: the single writer's group
// commit; PostgreSQL: row locks with SKIP LOCKED and per-token advisory locks), the queue's rules
// are the same for both. The queue sits next to the records (a result and its record commit
// together) but behind its own interface, apart from RecordStore.
#pragma once

#include <functional>

#include "store/jobs.h"
#include "store/sql_tx.h"
#include "store/store_core.h"

namespace tessera::cache {

// The engine hands the queue its transactions through SqlTxRunner (store_core.h).
class SqlJobQueue final : public JobQueue {
 public:
  explicit SqlJobQueue(SqlTxRunner& engine) : engine_(engine) {}

  Status registerWorker(const WorkerInfo& w, const QueuePolicy& p) override;
  Expected<int64_t> heartbeat(const std::string& worker_id, const std::string& token, const QueuePolicy& p) override;
  Expected<std::vector<WorkerInfo>> workers(const WorkerFilter& f, const QueuePolicy& p) override;
  Expected<int64_t> deregisterWorker(const std::string& worker_id, const std::string& token) override;
  Expected<SubmitResult> submit(const JobSpec& job, const QueuePolicy& p) override;
  Expected<Lease> lease(const std::string& worker_id, const std::string& token, int max_items,
                        const QueuePolicy& p) override;
  Expected<ReportResult> report(const ItemReport& r, const PutOptions& put) override;
  Expected<ReportOutcome> refuse(const ItemReport& r, const QueuePolicy& p) override;
  Expected<std::vector<int64_t>> quarantineWorker(const std::string& worker_id, const std::string& why,
                                                  const std::string& submitter) override;
  Expected<std::optional<JobView>> job(const std::string& job_id, const QueuePolicy& p, int64_t since) override;
  Expected<bool> cancel(const std::string& job_id) override;
  Expected<int64_t> purge(double keep_finished_s, double max_open_s) override;
  Expected<JobList> jobList(const std::string& submitter, int limit, const QueuePolicy& p) override;

 private:
  SqlTxRunner& engine_;
};

}  // namespace tessera::cache
