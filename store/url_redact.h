// Owns what of a service or database URL may be shown, for the client's service URLs and the
// PostgreSQL engine's locations alike.
#pragma once

#include <string>
#include <string_view>

namespace tessera::cache {

// Whether a URL (any scheme) carries a password: "scheme://user:secret@host..." or a "password="
// query parameter (libpq's form).
bool urlHasPassword(std::string_view url);
// The URL with such a password replaced by "***": what may be printed or logged.
std::string redactUrl(std::string_view url);

}  // namespace tessera::cache
