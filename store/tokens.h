// Owns bearer-token access control for the cache service: scopes (read < write < admin, and the
// separate worker scope), the TokenStore interface over the `tokens` table of the store engine
// (SQLite: sqlite_tokens.cpp; hashes only), and the constant-time
// check a server runs on every request against an in-memory snapshot of the active tokens.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "support/status.h"

namespace tessera::cache {

// Read < Write < Admin are ordered: a token of a higher scope may do everything a lower one may.
// Worker stands apart: a measurement worker's token may register, lease jobs, heartbeat and
// report results, nothing else (no lookups, no record writes); no other scope may do those.
enum class Scope { Read = 1, Write = 2, Admin = 3, Worker = 4 };
std::string_view scopeName(Scope s);
std::optional<Scope> parseScope(std::string_view s);
// Whether a token of scope `have` may call a route that needs `need`.
bool scopeAllows(Scope have, Scope need);
// Token names: 1-64 of [A-Za-z0-9_.@-].
Status checkTokenName(const std::string& name);

struct TokenInfo {
  std::string name;
  Scope scope = Scope::Read;
  std::string created_at, revoked_at;  // revoked_at empty while active
  std::string hash_prefix;             // first 12 hex digits of the hash, to tell tokens apart
};

struct ActiveToken {
  std::string hash;  // sha256 hex of the secret
  Scope scope;
  std::string name;
};

// Token administration on a store engine (`tessera serve token add|list|revoke`). The secret is
// returned once by add() and never stored. A name is an identity for good: records, jobs and
// workers name the token that made them, so add() refuses a name that was ever used, revoked or not
// (a new holder under an old name would read, cancel and release what the old one made).
class TokenStore {
 public:
  virtual ~TokenStore() = default;
  // `location`: a SQLite database file or a PostgreSQL URL (engine.h; defined with the engines in
  // tessera_store_engines, which the service and the CLI link).
  static Expected<std::unique_ptr<TokenStore>> open(const std::string& location);
  virtual Expected<std::string> add(const std::string& name, Scope scope) = 0;
  virtual Expected<std::vector<TokenInfo>> list() = 0;
  virtual Status revoke(const std::string& name) = 0;  // NotFound if no active token has that name
  // Whether a token of that name exists (active or revoked).
  virtual Expected<bool> exists(const std::string& name) = 0;
  virtual Expected<std::vector<ActiveToken>> active() = 0;
};
Expected<std::unique_ptr<TokenStore>> openSqliteTokenStore(const std::string& db_path);

// Checks a presented secret against the current snapshot; safe to call from many threads while
// another thread replaces the snapshot.
class TokenAuthenticator {
 public:
  void reset(std::vector<ActiveToken> active);
  // The scope of the matching active token, or nullopt. Every stored hash is compared, in
  // constant time, so the answer's timing does not depend on which token (if any) matched.
  std::optional<Scope> check(std::string_view secret) const;
  // The same check, also naming the matching token (what the service records as a writer).
  struct Identity {
    Scope scope;
    std::string name;
  };
  std::optional<Identity> identify(std::string_view secret) const;
  size_t size() const;

 private:
  mutable std::mutex mu_;
  std::shared_ptr<const std::vector<ActiveToken>> tokens_ =
      std::make_shared<const std::vector<ActiveToken>>();
};

// The refusal of add() for a name that exists or existed.
Error nameTaken(const std::string& name);

bool constantTimeEqual(std::string_view a, std::string_view b);
// "tsk_" followed by 64 hex digits from the OS random source.
Expected<std::string> generateTokenSecret();
// `bytes` bytes from the kernel's CSPRNG (getrandom), as lowercase hex.
Expected<std::string> randomHex(size_t bytes);

}  // namespace tessera::cache
