// Owns a request's CPU budget (issue 47: a search that runs on past it is cut, not left to take
// the cores from winner lookups and health probes): the API opens one for a search or list on
// the thread that answers it, and the store engines cut the statements it runs once it is spent
// (SQLite between VM steps, PostgreSQL by statement_timeout), failing them with ErrorCode::Timeout.
#pragma once

#include <cstdint>

#include "support/status.h"

namespace tessera::cache {

class CpuBudget {
 public:
  // `seconds` of this thread's CPU time from now; <= 0: no budget (nothing is cut).
  explicit CpuBudget(double seconds);
  ~CpuBudget();
  CpuBudget(const CpuBudget&) = delete;
  CpuBudget& operator=(const CpuBudget&) = delete;

  // Whether this thread runs under a budget, and whether it is spent (cheap without one).
  static bool active();
  static bool spent();
  // Milliseconds of the budget left (at least 1) for a database that times statements itself; 0
  // without a budget.
  static int64_t remainingMs();
  // The error a cut statement fails with.
  static Error error();

 private:
  double previous_deadline_;
  double previous_seconds_;
};

}  // namespace tessera::cache
