// Owns what the web dashboard (issue 28: /ui/ and the read routes it calls) needs from the process
// that serves it: the token administration, the comparison across targets (which needs the
// compiler, so the `tessera` binary supplies it and the cache library stays free of LLVM/MLIR),
// and when each token was last used. Also the response headers every dashboard page carries.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "store/record.h"
#include "store/store.h"
#include "store/tokens.h"
#include "support/status.h"

namespace tessera::cache {

// One kernel on several targets (`tessera compare`): the kernel is named by a stored key (rebuilt
// from it where the key says everything about the kernel) or given as its IR text.
struct CompareRequest {
  std::optional<HardKey> key;
  std::string kernel_text;
  std::vector<std::string> targets;
};
// Answers the JSON `tessera compare --json` prints, from this store. InvalidArgument: a kernel or
// target it cannot take (422); Unsupported: a key it cannot rebuild the kernel from (422 naming
// the way out).
using CompareFn = std::function<Expected<std::string>(RecordStore&, const CompareRequest&)>;

// When each token was last presented, since this process started (a write to the database per
// request would cost more than the lookups it serves).
class TokenUsage {
 public:
  void touch(const std::string& token_name);
  std::optional<std::string> lastUsed(const std::string& token_name) const;  // UTC, created_at format

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::string, int64_t> last_;  // seconds since the epoch
};

struct DashboardOptions {
  bool serve_ui = true;  // the pages under /ui/
  // Token administration for admins (list, revoke): a TokenStore of its own, not the one the
  // server's refresh loop reads. nullptr: those routes answer 503.
  std::shared_ptr<TokenStore> tokens;
  // Makes a revocation effective at once rather than at the next refresh.
  std::function<Status()> reload_tokens;
  CompareFn compare;  // empty: POST /v1/compare answers 501 (a build without the compiler)
  // Set by the Api: where it records token use.
  std::shared_ptr<TokenUsage> usage;
};

// A TokenStore whose calls take turns (a SQLite connection serves one thread at a time), for the
// admin routes that several request threads may call at once.
std::shared_ptr<TokenStore> serializedTokenStore(std::unique_ptr<TokenStore> inner);

// Ends the kernel pages' long polls under way (GET /v1/kernels/{key_id}?after=&wait=): each answers
// "unchanged" at once. A stopping server calls it so that no poll holds it for its whole wait.
void endDashboardWaits();

// Headers of every page and asset under /ui/: a Content-Security-Policy without inline script or
// style and with no other origin, no framing, no sniffing, no referrer.
const std::vector<std::pair<std::string, std::string>>& dashboardHeaders();

}  // namespace tessera::cache
