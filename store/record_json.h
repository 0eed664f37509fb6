// Owns the nlohmann-level record codec shared inside the cache libraries (HTTP routes decode records
// out of already-parsed bodies); users outside the library use decodeRecord/encodeRecord.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "store/record.h"

namespace tessera::cache {

inline constexpr int64_t kMaxDim = int64_t{1} << 40;
inline constexpr size_t kMaxRank = 8;
inline constexpr int64_t kMaxUnits = 1 << 20;

// Parses JSON text with the nesting limit and without exceptions; ParseError on failure.
Expected<nlohmann::json> parseJson(std::string_view text, int max_depth = kMaxJsonDepth);

// dump() that never throws (invalid UTF-8 is replaced rather than raising).
std::string dumpJson(const nlohmann::json& j);

nlohmann::json hardKeyToJson(const HardKey& k);
nlohmann::json recordToJson(const Record& r);

// `path` prefixes error messages ("records[3]" gives "records[3].key.units: ...").
Expected<HardKey> hardKeyFromJson(const nlohmann::json& j, const std::string& path);
Expected<Record> recordFromJson(const nlohmann::json& j, const std::string& path);

// The field rules of the wire form, for other documents of the API (workers, jobs): a name of
// [A-Za-z0-9_.:+-], printable text without control or invisible format characters.
bool isNameText(const std::string& s, size_t max_len);
bool isPrintableText(const std::string& s, size_t max_len);

// Value checks on a built record (ranges, formats, consistency of the measurement summary).
Status validateHardKey(const HardKey& k, const std::string& path);
Status validateRecord(const Record& r, const std::string& path = "");

}  // namespace tessera::cache
