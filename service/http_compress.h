// Owns how the service compresses what it answers (issue 51): which encoding a request's
// Accept-Encoding allows, and the encoders. Chosen for latency, not for the smallest body: an
// answer computed per request is compressed at a low brotli quality (or gzip), a static file once
// per process at a high one (ui_assets.h keeps those bodies).
#pragma once

#include <string>
#include <string_view>

#include "service/api.h"

namespace tessera::cache {

enum class Encoding { Identity, Gzip, Brotli };
std::string_view encodingName(Encoding e);  // "", "gzip", "br"

// The best encoding an Accept-Encoding header allows: br, then gzip, else identity. A coding
// with q=0 is refused, as RFC 9110 says; "*" allows both.
Encoding acceptedEncoding(std::string_view accept_encoding);

// Media types worth compressing (text, JSON, JavaScript, SVG).
bool compressibleType(std::string_view content_type);

// quality: brotli 0-11, gzip 1-9. The body is returned as is when the encoder fails.
std::string brotliCompress(std::string_view body, int quality);
std::string gzipCompress(std::string_view body, int level);

// Per-request answers: brotli quality 4 or gzip level 5 take ~5-10 ms per MB here, where the
// library default (brotli 11) took ~1 s for a 938 KB page of records.
inline constexpr int kDynamicBrotliQuality = 4;
inline constexpr int kDynamicGzipLevel = 5;
// Answers smaller than this go as they are: the header bytes would eat the saving.
inline constexpr size_t kMinCompressBytes = 1024;

// Compresses a response for the request's Accept-Encoding unless it is small, not text, already
// encoded or encoded by its route (which then set Vary); sets Content-Encoding and Vary. Run once per response, before it is written.
void compressResponse(ApiResponse& resp, std::string_view accept_encoding);

}  // namespace tessera::cache
