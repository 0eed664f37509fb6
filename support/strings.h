// Owns small string helpers shared by parsers and printers (split, trim, number formatting).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tessera {

std::vector<std::string> split(std::string_view s, char sep);
std::string_view trim(std::string_view s);
std::optional<int64_t> parseInt(std::string_view s);
std::optional<double> parseDouble(std::string_view s);
// Shortest decimal text that parses back to exactly the same double ("1", "0.125", "1e-30").
std::string formatDouble(double v);
std::string join(const std::vector<std::string>& parts, std::string_view sep);
// ASCII case-insensitive equality (HTTP header names and media types).
bool iequals(std::string_view a, std::string_view b);

}  // namespace tessera
