// Owns the service's response compression (http_compress.h): the Accept-Encoding rule and the
// zlib and brotli encoders.
#include "service/http_compress.h"

#include <brotli/encode.h>
#include <zlib.h>

#include <cctype>
#include <cstdlib>

namespace tessera::cache {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool equalsLower(std::string_view a, std::string_view lower) {
  if (a.size() != lower.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != lower[i]) return false;
  return true;
}

const std::string* findHeader(const HeaderList& h, std::string_view lower) {
  for (const auto& [k, v] : h)
    if (equalsLower(k, lower)) return &v;
  return nullptr;
}

}  // namespace

std::string_view encodingName(Encoding e) {
  switch (e) {
    case Encoding::Gzip: return "gzip";
    case Encoding::Brotli: return "br";
    case Encoding::Identity: break;
  }
  return "";
}

Encoding acceptedEncoding(std::string_view header) {
  bool br = false, gzip = false, star = false;
  while (!header.empty()) {
    const size_t comma = header.find(',');
    std::string_view item = header.substr(0, comma);
    header = comma == std::string_view::npos ? std::string_view() : header.substr(comma + 1);
    const size_t semi = item.find(';');
    const std::string_view coding = trim(item.substr(0, semi));
    bool allowed = true;
    if (semi != std::string_view::npos) {
      std::string_view param = trim(item.substr(semi + 1));
      if (param.size() >= 2 && (param[0] == 'q' || param[0] == 'Q') && param[1] == '=') {
        const std::string q(trim(param.substr(2)));
        allowed = std::strtod(q.c_str(), nullptr) > 0;
      }
    }
    if (!allowed) continue;
    if (equalsLower(coding, "br")) br = true;
    else if (equalsLower(coding, "gzip") || equalsLower(coding, "x-gzip")) gzip = true;
    else if (coding == "*") star = true;
  }
  if (br || star) return Encoding::Brotli;
  if (gzip) return Encoding::Gzip;
  return Encoding::Identity;
}

bool compressibleType(std::string_view t) {
  const std::string_view base = trim(t.substr(0, t.find(';')));
  return base.starts_with("text/") || base == "application/json" || base == "application/problem+json" ||
         base == "application/x-ndjson" || base == "application/yaml" || base == "image/svg+xml";
}

std::string brotliCompress(std::string_view body, int quality) {
  size_t size = BrotliEncoderMaxCompressedSize(body.size());
  if (size == 0) return std::string(body);
  std::string out(size, '\0');
  if (!BrotliEncoderCompress(quality, BROTLI_DEFAULT_WINDOW, BROTLI_MODE_TEXT, body.size(),
                             reinterpret_cast<const uint8_t*>(body.data()), &size, reinterpret_cast<uint8_t*>(out.data())))
    return std::string(body);
  out.resize(size);
  return out;
}

std::string gzipCompress(std::string_view body, int level) {
  z_stream z{};
  // 15 + 16: a gzip wrapper (RFC 1952), not a bare zlib stream.
  if (deflateInit2(&z, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) return std::string(body);
  std::string out(deflateBound(&z, body.size()) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(body.data()));
  z.avail_in = static_cast<uInt>(body.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, Z_FINISH);
  const size_t n = z.total_out;
  deflateEnd(&z);
  if (rc != Z_STREAM_END) return std::string(body);
  out.resize(n);
  return out;
}

void compressResponse(ApiResponse& resp, std::string_view accept_encoding) {
  if (resp.body.size() < kMinCompressBytes || !compressibleType(resp.content_type)) return;
  // A route that chose its own encoding (a static file compressed once) says so with Vary.
  if (findHeader(resp.headers, "content-encoding") || findHeader(resp.headers, "vary")) return;
  resp.headers.emplace_back("Vary", "Accept-Encoding");
  const Encoding e = acceptedEncoding(accept_encoding);
  if (e == Encoding::Identity) return;
  std::string z = e == Encoding::Brotli ? brotliCompress(resp.body, kDynamicBrotliQuality)
                                        : gzipCompress(resp.body, kDynamicGzipLevel);
  if (z.size() >= resp.body.size()) return;
  resp.body = std::move(z);
  resp.headers.emplace_back("Content-Encoding", std::string(encodingName(e)));
}

}  // namespace tessera::cache
