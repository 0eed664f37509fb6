// Owns the client end of the HTTP transport, free of cpp-httplib types: the header list both ends
// exchange and a keep-alive connection to a service (http_client.cpp; the server end is
// http_server.h).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "support/status.h"

namespace tessera::cache {

// Header fields or query parameters in order, repeats kept (lookups are case-insensitive).
using HeaderList = std::vector<std::pair<std::string, std::string>>;

struct HttpReply {
  int status = 0;
  std::string body;
  HeaderList headers;
  const std::string* header(std::string_view name) const;
};

// One keep-alive connection to a service at `base_url` (http://host:port[/prefix], or https).
// Thread-safe: concurrent calls are serialized. Every failure (refused, timed out, reset) is an
// IOError value; nothing throws.
class HttpConnection {
 public:
  virtual ~HttpConnection() = default;
  // `path` is appended to the base URL's prefix; it may carry a query string.
  virtual Expected<HttpReply> send(std::string_view method, const std::string& path,
                                   const HeaderList& headers, const std::string& body,
                                   const std::string& content_type, double timeout_s) = 0;
};
// `ca_cert`: a PEM file of the certificate authority (or the self-signed certificate) that an
// https service's certificate must chain to; empty: the system's.
Expected<std::unique_ptr<HttpConnection>> openHttpConnection(std::string_view base_url,
                                                              double connect_timeout_s,
                                                              const std::string& ca_cert = "");

// Both ends ignore SIGPIPE process-wide (once, if it is at its default): cpp-httplib writes to
// sockets without MSG_NOSIGNAL, and a peer that hangs up must cost a request, not the process.
void ignoreSigpipe();

// "%xx"-encodes a query value.
std::string urlEncode(std::string_view s);

}  // namespace tessera::cache
