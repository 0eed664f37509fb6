// Owns the dashboard's per-process state (when tokens were last used) and its response headers.
#include "service/dashboard.h"

#include <ctime>

namespace tessera::cache {

void TokenUsage::touch(const std::string& token_name) {
  const int64_t now = static_cast<int64_t>(std::time(nullptr));
  std::lock_guard<std::mutex> g(mu_);
  last_[token_name] = now;
}

std::optional<std::string> TokenUsage::lastUsed(const std::string& token_name) const {
  int64_t at = 0;
  {
    std::lock_guard<std::mutex> g(mu_);
    auto it = last_.find(token_name);
    if (it == last_.end()) return std::nullopt;
    at = it->second;
  }
  const std::time_t t = static_cast<std::time_t>(at);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return std::string(buf);
}

namespace {

class SerializedTokenStore final : public TokenStore {
 public:
  explicit SerializedTokenStore(std::unique_ptr<TokenStore> inner) : inner_(std::move(inner)) {}
  Expected<std::string> add(const std::string& name, Scope scope) override {
    std::lock_guard<std::mutex> g(mu_);
    return inner_->add(name, scope);
  }
  Expected<std::vector<TokenInfo>> list() override {
    std::lock_guard<std::mutex> g(mu_);
    return inner_->list();
  }
  Status revoke(const std::string& name) override {
    std::lock_guard<std::mutex> g(mu_);
    return inner_->revoke(name);
  }
  Expected<bool> exists(const std::string& name) override {
    std::lock_guard<std::mutex> g(mu_);
    return inner_->exists(name);
  }
  Expected<std::vector<ActiveToken>> active() override {
    std::lock_guard<std::mutex> g(mu_);
    return inner_->active();
  }

 private:
  std::mutex mu_;
  std::unique_ptr<TokenStore> inner_;
};

}  // namespace

std::shared_ptr<TokenStore> serializedTokenStore(std::unique_ptr<TokenStore> inner) {
  return std::make_shared<SerializedTokenStore>(std::move(inner));
}

const std::vector<std::pair<std::string, std::string>>& dashboardHeaders() {
  // Scripts and styles only from this origin's files (no inline script, no eval, no inline
  // style attribute), API calls only to this origin, nothing else loadable; not framable.
  static const std::vector<std::pair<std::string, std::string>> h = {
      {"Content-Security-Policy",
       "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
       "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"},
      {"X-Content-Type-Options", "nosniff"},
      {"X-Frame-Options", "DENY"},
      {"Referrer-Policy", "no-referrer"},
      {"Cross-Origin-Opener-Policy", "same-origin"},
      {"Cache-Control", "no-cache"},
  };
  return h;
}

}  // namespace tessera::cache
