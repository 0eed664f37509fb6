// Owns the hashes Tessera uses for keys: SHA-256 (cache key ids, token hashes) and FNV-1a (cheap
// in-memory hashing).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace tessera {

std::array<uint8_t, 32> sha256(std::string_view data);
std::string sha256Hex(std::string_view data);
uint64_t fnv1a64(std::string_view data);
std::string toHex(const uint8_t* p, size_t n);

}  // namespace tessera
