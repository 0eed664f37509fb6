// Owns the libFuzzer entry point for the record JSON decoder: any input must be rejected cleanly
// or decode to a record that survives an encode/decode round trip unchanged.
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "store/record.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera::cache;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto rec = decodeRecord(text);
  if (!rec.ok()) {
    // Refusals must say where the problem is.
    if (rec.error().message.empty()) std::abort();
    return 0;
  }
  // Accepted records are canonical: re-encoding and decoding gives the same identity and key.
  const std::string once = encodeRecord(*rec);
  auto again = decodeRecord(once);
  if (!again.ok()) {
    std::fprintf(stderr, "re-decode failed: %s\n%s\n", again.error().message.c_str(), once.c_str());
    std::abort();
  }
  if (fingerprint(*again) != fingerprint(*rec) || again->key_id != rec->key_id ||
      again->key_id != keyIdOf(again->key) || encodeRecord(*again) != once) {
    std::fprintf(stderr, "round trip changed the record:\n%s\n", once.c_str());
    std::abort();
  }
  return 0;
}
