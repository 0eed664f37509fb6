// Owns the dashboard's static files as the binary carries them (cache_service/ui/ and Chart.js
// from Debian's libjs-chart.js, embedded at build time): lookup by name with a media type and an
// ETag, and the kernel page turned into one self-contained HTML file (`tessera report`).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace tessera::cache {

struct UiAsset {
  std::string_view name, content, content_type;
  std::string etag;  // quoted, from the content's SHA-256
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
