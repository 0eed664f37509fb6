// Owns URL lists and failover between the replicas of a service.
#include "client/endpoints.h"

#include <algorithm>

namespace tessera::cache {

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
