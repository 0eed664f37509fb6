// Owns listAll: every record a ListQuery matches, read page by page (RecordStore::list returns at
// most kMaxListLimit a call), for callers that want the whole answer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "store/record.h"
#include "store/store.h"
#include "support/status.h"

namespace tessera::cache {

// Every record matching `q` (paging managed here), up to `max` of them.
Expected<std::vector<Record>> listAll(RecordStore& store, ListQuery q, size_t max = SIZE_MAX);

}  // namespace tessera::cache
