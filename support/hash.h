// Owns the hashes Tessera uses for keys: SHA-256 (cache key ids, token hashes) and FNV-1a (cheap
// in-memory hashing).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace tessera {

std::array<uint8_t, 32> sha256(std::string_view data);

// SHA-256 over data given in pieces (a table streamed row by row): the same digest as sha256() of
// the concatenation.
class Sha256 {
 public:
  Sha256();
  void update(std::string_view data);
  std::string hexDigest();  // ends the hash; call once

 private:
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t buffered_ = 0;
  uint64_t total_ = 0;
};
std::string sha256Hex(std::string_view data);
uint64_t fnv1a64(std::string_view data);
std::string toHex(const uint8_t* p, size_t n);

}  // namespace tessera
