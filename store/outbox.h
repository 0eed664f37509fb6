// Owns the client side of a local store: the outbox of records tuned here that no shared service
// has acknowledged yet. A tuner puts its records with PutOptions::outbox (store.h), in the same
// transaction as the records themselves; pushOutbox (client.h) reads them from here and marks what
// the service took. A service never uses it: RecordStore (store.h) is what it serves from.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "store/record.h"
#include "support/status.h"

namespace tessera::cache {

class Outbox {
 public:
  virtual ~Outbox() = default;
  // Up to `limit` records put with PutOptions::outbox and not marked pushed yet, oldest first.
  virtual Expected<std::vector<Record>> pending(int limit) = 0;
  // The service acknowledged (or refused for good) these records: they leave the outbox.
  virtual Status markPushed(std::span<const int64_t> ids) = 0;
};

}  // namespace tessera::cache
