// Owns what of a URL may be shown: whether it carries a password, and the URL with it replaced.
#include "store/url_redact.h"

#include <algorithm>
#include <optional>
#include <utility>

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

}  // namespace tessera::cache
