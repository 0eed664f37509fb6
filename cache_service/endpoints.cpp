// Owns URL lists and failover between the replicas of a service.
#include "cache_service/endpoints.h"

#include <algorithm>

namespace tessera::cache {

namespace {
// [begin, end) of the password in the user info of a URL, or nullopt.
std::optional<std::pair<size_t, size_t>> userinfoPassword(std::string_view url) {
  const size_t scheme = url.find("://");
  if (scheme == std::string_view::npos) return std::nullopt;
  const size_t start = scheme + 3;
  const size_t end = std::min(url.find_first_of("/?#", start), url.size());
  const size_t at = url.rfind('@', end == url.size() ? std::string_view::npos : end);
  if (at == std::string_view::npos || at < start || at >= end) return std::nullopt;
  const size_t colon = url.find(':', start);
  if (colon == std::string_view::npos || colon > at) return std::nullopt;
  return std::pair{colon + 1, at};
}
}  // namespace

bool urlHasPassword(std::string_view url) {
  auto pw = userinfoPassword(url);
  return (pw && pw->second > pw->first) || url.find("password=") != std::string_view::npos;
}

std::string redactUrl(std::string_view url) {
  std::string out(url);
  if (auto pw = userinfoPassword(out); pw && pw->second > pw->first) out.replace(pw->first, pw->second - pw->first, "***");
  for (size_t at = out.find("password="); at != std::string::npos; at = out.find("password=", at + 9)) {
    const size_t end = std::min(out.find('&', at), out.size());
    out.replace(at + 9, end - at - 9, "***");
  }
  return out;
}

std::vector<std::string> splitServiceUrls(std::string_view list) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : list) {
    if (c == ',' || c == ' ' || c == '\t' || c == '\n') {
      if (!cur.empty()) out.push_back(redactUrl(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) out.push_back(redactUrl(cur));
  return out;
}

ServiceEndpoints::ServiceEndpoints(EndpointOptions o) : o_(std::move(o)) { conns_.resize(o_.urls.size()); }

std::string ServiceEndpoints::current() const {
  std::lock_guard<std::mutex> g(mu_);
  return o_.urls.empty() ? "" : o_.urls[current_];
}

Expected<HttpReply> ServiceEndpoints::send(std::string_view method, const std::string& path, const std::string& body,
                                           const std::string& content_type, double timeout_s,
                                           const HeaderList& extra) {
  std::lock_guard<std::mutex> g(mu_);
  if (o_.urls.empty()) return makeError(ErrorCode::InvalidArgument, "no service URL configured");
  HeaderList headers = extra;
  if (!o_.token.empty()) headers.emplace_back("Authorization", "Bearer " + o_.token);
  headers.emplace_back("Accept", "application/json");
  Error last = makeError(ErrorCode::Unavailable, "no answer");
  std::optional<HttpReply> last_unavailable;
  for (size_t tried = 0; tried < o_.urls.size(); ++tried) {
    const size_t i = (current_ + tried) % o_.urls.size();
    if (!conns_[i]) {
      auto c = openHttpConnection(o_.urls[i], o_.connect_timeout_s, o_.ca_cert);
      if (!c.ok()) return c.takeError();  // a malformed URL is the caller's mistake, not an outage
      conns_[i] = std::move(*c);
    }
    auto reply = conns_[i]->send(method, path, headers, body, content_type, timeout_s);
    if (!reply.ok()) {
      // The connection may be half-dead (a replica killed mid-request): start afresh next time.
      conns_[i].reset();
      last = makeError(ErrorCode::Unavailable, o_.urls[i] + ": " + reply.error().message);
      continue;
    }
    if (reply->status == 502 || reply->status == 503 || reply->status == 504) {
      last_unavailable = std::move(*reply);
      last = makeError(ErrorCode::Unavailable, o_.urls[i] + ": HTTP " + std::to_string(last_unavailable->status));
      continue;
    }
    current_ = i;
    return std::move(*reply);
  }
  if (last_unavailable) return std::move(*last_unavailable);
  return last;
}

}  // namespace tessera::cache
