// Owns the one framing authority of the HTTP server (issue 25): what request heads the connection
// gate accepts, so that the gate and the HTTP parser behind it (cpp-httplib) read every request the
// same way and no bytes of one request can be answered as another.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace tessera::cache {

// Why a request head (request line, fields, the empty line) is not one the gate and the parser
// behind it read the same way, or nullopt. Refused: a bare LF or CR, a folded line, a field
// without a name or whose name is not a token, a request line that is not "METHOD SP target SP
// HTTP/1.x", a Content-Length that is not 1-19 digits, two Content-Length fields (even equal
// ones), Content-Length with Transfer-Encoding.
std::optional<std::string> framingError(std::string_view head);

}  // namespace tessera::cache
