// Owns listAll (list_all.h): the paging loop over RecordStore::list.
#include "store/list_all.h"

namespace tessera::cache {

Expected<std::vector<Record>> listAll(RecordStore& store, ListQuery q, size_t max) {
  std::vector<Record> out;
  q.limit = kMaxListLimit;
  while (out.size() < max) {
    TESSERA_ASSIGN(ListPage page, store.list(q));
    out.insert(out.end(), page.records.begin(), page.records.end());
    if (!page.next_after) break;
    q.after_id = page.next_after;
  }
  return out;
}

}  // namespace tessera::cache
