// Owns talking to a replicated service: a list of base URLs (several `tessera serve` replicas, or
// nginx fronts), tried in turn from the one that answered last. A request that gets no answer
// (refused, reset, timed out) or a 502/503/504 (a proxy whose upstream is gone, a replica that
// lost its database) goes to the next URL at once; every other answer is the answer. Safe because
// every write of the API is idempotent (records by fingerprint, jobs by their client-chosen id,
// reports by job and item), so a request that did reach a dying replica may be sent again.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "client/http.h"
#include "store/url_redact.h"
#include "support/status.h"

namespace tessera::cache {

// "http://a:8787,http://b:8787" (commas and/or spaces) -> the URLs, in order, empty ones dropped.
// A password in a URL's user info is replaced by "***" here, so that no message, log or error of a
// client ever shows it (such a URL is then refused by openHttpConnection: the service takes
// bearer tokens, never URL credentials).
std::vector<std::string> splitServiceUrls(std::string_view list);

struct EndpointOptions {
  std::vector<std::string> urls;
  std::string token;    // bearer token; empty = anonymous
  std::string ca_cert;  // https: PEM file the certificates must chain to
  double connect_timeout_s = 1.0;
};

class ServiceEndpoints {
 public:
  explicit ServiceEndpoints(EndpointOptions o);
  bool enabled() const { return !o_.urls.empty(); }
  const EndpointOptions& options() const { return o_; }
  // The URL that answered last (or will be tried first).
  std::string current() const;
  // Thread-safe: requests are serialized (one keep-alive connection per URL). An Error means no
  // URL answered (the last transport error), or the last 502/503/504 when all gave one.
  Expected<HttpReply> send(std::string_view method, const std::string& path, const std::string& body,
                           const std::string& content_type, double timeout_s, const HeaderList& extra = {});

 private:
  EndpointOptions o_;
  mutable std::mutex mu_;
  size_t current_ = 0;
  std::vector<std::unique_ptr<HttpConnection>> conns_;
};

}  // namespace tessera::cache
