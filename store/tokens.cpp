// Owns scopes, token names and secrets, and the constant-time token check.
#include "store/tokens.h"

#include <sys/random.h>

#include <cctype>

#include "store/record.h"
#include "support/hash.h"

namespace tessera::cache {

std::string_view scopeName(Scope s) {
  switch (s) {
    case Scope::Read: return "read";
    case Scope::Write: return "write";
    case Scope::Admin: return "admin";
    case Scope::Worker: return "worker";
  }
  return "read";
}

std::optional<Scope> parseScope(std::string_view s) {
  if (s == "read") return Scope::Read;
  if (s == "write") return Scope::Write;
  if (s == "admin") return Scope::Admin;
  if (s == "worker") return Scope::Worker;
  return std::nullopt;
}

bool scopeAllows(Scope have, Scope need) {
  if (have == Scope::Worker || need == Scope::Worker) return have == need;
  return static_cast<int>(have) >= static_cast<int>(need);
}

Status checkTokenName(const std::string& name) {
  if (name.empty() || name.size() > 64)
    return makeError(ErrorCode::InvalidArgument, "token name must have 1-64 characters");
  for (unsigned char c : name)
    if (!(std::isalnum(c) || c == '_' || c == '-' || c == '.' || c == '@'))
      return makeError(ErrorCode::InvalidArgument, "token name may use [A-Za-z0-9_.@-] only");
  return {};
}

Error nameTaken(const std::string& name) {
  return makeError(ErrorCode::InvalidArgument, "a token named '" + name +
                                                   "' exists or existed (names are never reused: what a token wrote "
                                                   "stays its holder's); choose another name");
}

bool constantTimeEqual(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;  // lengths are public (hashes are all 64 hex digits)
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i)
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

Expected<std::string> randomHex(size_t bytes) {
  std::vector<uint8_t> buf(bytes);
  size_t got = 0;
  while (got < buf.size()) {
    ssize_t n = ::getrandom(buf.data() + got, buf.size() - got, 0);
    if (n <= 0) return makeError(ErrorCode::IOError, "getrandom failed");
    got += static_cast<size_t>(n);
  }
  return toHex(buf.data(), buf.size());
}

Expected<std::string> generateTokenSecret() {
  TESSERA_ASSIGN(std::string hex, randomHex(32));
  return "tsk_" + hex;
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


}  // namespace tessera::cache
