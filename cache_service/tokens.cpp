// Owns token storage (hashes only) and the constant-time token check.
#include "cache_service/tokens.h"

#include <sys/random.h>

#include <cctype>

#include "cache_service/record.h"
#include "cache_service/schema.h"
#include "support/hash.h"

namespace tessera::cache {

std::string_view scopeName(Scope s) {
  switch (s) {
    case Scope::Read: return "read";
    case Scope::Write: return "write";
    case Scope::Admin: return "admin";
  }
  return "read";
}

std::optional<Scope> parseScope(std::string_view s) {
  if (s == "read") return Scope::Read;
  if (s == "write") return Scope::Write;
  if (s == "admin") return Scope::Admin;
  return std::nullopt;
}

bool constantTimeEqual(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;  // lengths are public (hashes are all 64 hex digits)
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i)
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

Expected<std::string> generateTokenSecret() {
  uint8_t buf[32];
  size_t got = 0;
  while (got < sizeof buf) {
    ssize_t n = ::getrandom(buf + got, sizeof buf - got, 0);
    if (n <= 0) return makeError(ErrorCode::IOError, "getrandom failed");
    got += static_cast<size_t>(n);
  }
  return "tsk_" + toHex(buf, sizeof buf);
}

Expected<std::unique_ptr<TokenStore>> TokenStore::open(const std::string& db_path) {
  TESSERA_ASSIGN(auto db, sql::Db::open(db_path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE));
  TESSERA_TRY(openSchema(*db, /*synchronous_full=*/true));
  return std::unique_ptr<TokenStore>(new TokenStore(std::move(db)));
}

Expected<std::string> TokenStore::add(const std::string& name, Scope scope) {
  if (name.empty() || name.size() > 64)
    return makeError(ErrorCode::InvalidArgument, "token name must have 1-64 characters");
  for (unsigned char c : name)
    if (!(std::isalnum(c) || c == '_' || c == '-' || c == '.' || c == '@'))
      return makeError(ErrorCode::InvalidArgument, "token name may use [A-Za-z0-9_.@-] only");
  TESSERA_ASSIGN(std::string secret, generateTokenSecret());
  TESSERA_ASSIGN(sql::Stmt st, db_->prepare(
      "INSERT INTO tokens(name, hash, scope, created_at) VALUES(?,?,?,?)"
      " ON CONFLICT(name) DO UPDATE SET hash = excluded.hash, scope = excluded.scope,"
      " created_at = excluded.created_at, revoked_at = NULL WHERE tokens.revoked_at IS NOT NULL"));
  st.bind(1, name).bind(2, sha256Hex(secret)).bind(3, scopeName(scope)).bind(4, utcNow());
  TESSERA_TRY(st.run());
  // A name of an active token is refused rather than silently rotated.
  if (sqlite3_changes(db_->handle()) == 0)
    return makeError(ErrorCode::InvalidArgument,
                     "an active token named '" + name + "' exists; revoke it first");
  return secret;
}

Expected<std::vector<TokenInfo>> TokenStore::list() {
  TESSERA_ASSIGN(sql::Stmt st, db_->prepare(
      "SELECT name, scope, created_at, coalesce(revoked_at, ''), substr(hash, 1, 12)"
      " FROM tokens ORDER BY name"));
  std::vector<TokenInfo> out;
  for (;;) {
    TESSERA_ASSIGN(bool row, st.step());
    if (!row) break;
    TokenInfo t;
    t.name = st.text(0);
    t.scope = parseScope(st.text(1)).value_or(Scope::Read);
    t.created_at = st.text(2);
    t.revoked_at = st.text(3);
    t.hash_prefix = st.text(4);
    out.push_back(std::move(t));
  }
  return out;
}

Status TokenStore::revoke(const std::string& name) {
  TESSERA_ASSIGN(sql::Stmt st, db_->prepare(
      "UPDATE tokens SET revoked_at = ? WHERE name = ? AND revoked_at IS NULL"));
  st.bind(1, utcNow()).bind(2, name);
  TESSERA_TRY(st.run());
  if (sqlite3_changes(db_->handle()) == 0)
    return makeError(ErrorCode::NotFound, "no active token named '" + name + "'");
  return {};
}

Expected<std::vector<ActiveToken>> TokenStore::active() {
  TESSERA_ASSIGN(sql::Stmt st,
                 db_->prepare("SELECT hash, scope, name FROM tokens WHERE revoked_at IS NULL"));
  std::vector<ActiveToken> out;
  for (;;) {
    TESSERA_ASSIGN(bool row, st.step());
    if (!row) break;
    auto scope = parseScope(st.text(1));
    if (!scope) continue;
    out.push_back({st.text(0), *scope, st.text(2)});
  }
  return out;
}

void TokenAuthenticator::reset(std::vector<ActiveToken> active) {
  auto fresh = std::make_shared<const std::vector<ActiveToken>>(std::move(active));
  std::lock_guard<std::mutex> g(mu_);
  tokens_ = std::move(fresh);
}

size_t TokenAuthenticator::size() const {
  std::lock_guard<std::mutex> g(mu_);
  return tokens_->size();
}

std::optional<Scope> TokenAuthenticator::check(std::string_view secret) const {
  auto id = identify(secret);
  if (!id) return std::nullopt;
  return id->scope;
}

std::optional<TokenAuthenticator::Identity> TokenAuthenticator::identify(std::string_view secret) const {
  if (secret.empty() || secret.size() > 256) return std::nullopt;
  std::shared_ptr<const std::vector<ActiveToken>> tokens;
  {
    std::lock_guard<std::mutex> g(mu_);
    tokens = tokens_;
  }
  const std::string hash = sha256Hex(secret);
  const ActiveToken* found = nullptr;
  for (const ActiveToken& t : *tokens)
    if (constantTimeEqual(hash, t.hash)) found = &t;
  if (!found) return std::nullopt;
  return Identity{found->scope, found->name};
}

Expected<bool> TokenStore::exists(const std::string& name) {
  TESSERA_ASSIGN(sql::Stmt st, db_->prepare("SELECT 1 FROM tokens WHERE name = ?"));
  st.bind(1, name);
  return st.step();
}

}  // namespace tessera::cache
