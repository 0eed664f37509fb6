// Owns the dashboard's static files as the binary carries them (service/ui/ and Chart.js
// from Debian's libjs-chart.js, embedded at build time): lookup by name with a media type, an
// ETag, a version the pages name them by (so a browser may keep them for a year) and their bodies
// compressed once per process; and the kernel page turned into one self-contained HTML file
// (`tessera report`).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "service/http_compress.h"

namespace tessera::cache {

struct UiAsset {
  std::string_view name, content, content_type;
  std::string etag;     // quoted, from the served body's SHA-256
  std::string version;  // 12 hex digits of the content's SHA-256: pages ask for "common.js?v=<version>"
  // What /ui/ serves: the file, where a page's references to the other files (scripts, styles,
  // icon) carry their versions, so that a new build's pages never run an old script from a cache.
  std::string served;
  // The served body in an encoding (brotli quality 11, gzip level 9), compressed on first use and
  // kept for the life of the process; the identity encoding is `served` itself.
  const std::string& encoded(Encoding e) const;
  std::string etagFor(Encoding e) const;  // the ETag of that body ("...-br", "...-gz")
  struct Cache;
  std::shared_ptr<Cache> cache;
};
// nullptr when there is no such file. Names are plain file names ("kernel.js"); "" is index.html.
const UiAsset* findUiAsset(std::string_view name);

// The kernel page with its styles, scripts and `data` inline (a <script type="application/json">
// block the page reads instead of calling the service) and a Content-Security-Policy that allows
// exactly those inline blocks by their hashes: no server, no network, nothing else runs.
// `data` is {"kernels": [{"summary": <GET /v1/kernels/{key_id}>, "records": [<record>...],
// "records_total": N}, ...], "generated_at": "...", "source": "..."}.
std::string renderReport(const nlohmann::json& data, std::string_view title);

// JSON text that is safe inside an HTML <script> element: '<', '>' and '&' are written as
// \u003c, \u003e and \u0026 (only JSON strings can hold them, where the escapes mean the same).
std::string jsonForHtml(const nlohmann::json& j);

}  // namespace tessera::cache
