// Owns the framing rules of request heads (http_framing.h).
#include "service/http_framing.h"

#include <algorithm>
#include <cctype>
#include <cstring>

#include "support/strings.h"

namespace tessera::cache {

namespace {

bool isTokenChar(unsigned char c) { return std::isalnum(c) || std::strchr("!#$%&'*+-.^_`|~", c) != nullptr; }

}  // namespace

std::optional<std::string> framingError(std::string_view head) {
  // Every line ends with CRLF: a bare LF is a line end to some parsers and not to others.
  for (size_t i = 0; i < head.size(); ++i) {
    if (head[i] == '\n' && (i == 0 || head[i - 1] != '\r')) return std::string("a line ends with a bare LF");
    if (head[i] == '\r' && (i + 1 >= head.size() || head[i + 1] != '\n')) return std::string("a bare CR");
  }
  size_t eol = head.find("\r\n");
  const std::string_view line = head.substr(0, eol);
  const size_t sp1 = line.find(' '), sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp1 == 0 || sp1 == std::string_view::npos || sp2 == std::string_view::npos || sp2 == sp1 + 1 ||
      line.find(' ', sp2 + 1) != std::string_view::npos)
    return std::string("the request line is not METHOD SP target SP version");
  for (char c : line.substr(0, sp1))
    if (!isTokenChar(static_cast<unsigned char>(c))) return std::string("the method is not a token");
  const std::string_view version = line.substr(sp2 + 1);
  if (version != "HTTP/1.1" && version != "HTTP/1.0") return std::string("the version is not HTTP/1.0 or HTTP/1.1");
  int lengths = 0;
  bool chunked = false;
  for (size_t at = eol + 2; at < head.size();) {
    const size_t end = head.find("\r\n", at);
    if (end == std::string_view::npos || end == at) break;  // the empty line ends the head
    const std::string_view field = head.substr(at, end - at);
    at = end + 2;
    if (field[0] == ' ' || field[0] == '\t') return std::string("a folded header line");
    const size_t colon = field.find(':');
    if (colon == 0 || colon == std::string_view::npos) return std::string("a header line without a name");
    for (char c : field.substr(0, colon))
      if (!isTokenChar(static_cast<unsigned char>(c))) return std::string("a header name that is not a token");
    const std::string_view name = field.substr(0, colon), value = trim(field.substr(colon + 1));
    if (iequals(name, "transfer-encoding")) chunked = true;
    if (!iequals(name, "content-length")) continue;
    if (++lengths > 1) return std::string("two Content-Length fields");
    if (value.empty() || value.size() > 19 ||
        !std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return std::string("a Content-Length that is not 1-19 digits");
  }
  if (chunked && lengths) return std::string("both Transfer-Encoding and Content-Length");
  return std::nullopt;
}

}  // namespace tessera::cache
