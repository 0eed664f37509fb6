// Owns the table of embedded dashboard files and the self-contained report built from them.
#include "service/ui_assets.h"

#include <array>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "store/record_json.h"
#include "service/ui_embed.h"
#include "support/hash.h"

namespace tessera::cache {

struct UiAsset::Cache {
  std::once_flag br_once, gz_once;
  std::string br, gz;
};

namespace {

std::string_view mediaTypeOf(std::string_view name) {
  auto ends = [&](std::string_view ext) { return name.size() >= ext.size() && name.substr(name.size() - ext.size()) == ext; };
  if (ends(".html")) return "text/html; charset=utf-8";
  if (ends(".js")) return "text/javascript; charset=utf-8";
  if (ends(".css")) return "text/css; charset=utf-8";
  if (ends(".svg")) return "image/svg+xml";
  return "application/octet-stream";
}

bool isPage(std::string_view name) { return name.size() > 5 && name.substr(name.size() - 5) == ".html"; }

// A page's src="x.js" / href="style.css" of an embedded file become "x.js?v=<version>".
std::string versionReferences(std::string_view page, const std::vector<UiAsset>& all) {
  std::string out(page);
  for (const UiAsset& a : all) {
    if (isPage(a.name)) continue;
    for (const std::string attr : {"src=\"", "href=\""}) {
      const std::string from = attr + std::string(a.name) + "\"";
      const std::string to = attr + std::string(a.name) + "?v=" + a.version + "\"";
      for (size_t at = out.find(from); at != std::string::npos; at = out.find(from, at + to.size())) out.replace(at, from.size(), to);
    }
  }
  return out;
}

const std::vector<UiAsset>& assets() {
  static const std::vector<UiAsset> all = [] {
    std::vector<UiAsset> v;
    for (const EmbeddedFile& f : kEmbeddedUiFiles) {
      UiAsset a;
      a.name = f.name;
      a.content = f.content;
      a.content_type = mediaTypeOf(f.name);
      a.version = sha256Hex(f.content).substr(0, 12);
      a.cache = std::make_shared<UiAsset::Cache>();
      v.push_back(std::move(a));
    }
    for (UiAsset& a : v) {
      a.served = isPage(a.name) ? versionReferences(a.content, v) : std::string(a.content);
      a.etag = "\"" + sha256Hex(a.served).substr(0, 32) + "\"";
    }
    return v;
  }();
  return all;
}

std::string base64(const std::array<uint8_t, 32>& d) {
  static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < d.size(); i += 3) {
    const uint32_t v = (uint32_t(d[i]) << 16) | (uint32_t(d[i + 1]) << 8) | d[i + 2];
    out += {k[v >> 18], k[(v >> 12) & 63], k[(v >> 6) & 63], k[v & 63]};
  }
  const uint32_t v = (uint32_t(d[i]) << 16) | (i + 1 < d.size() ? uint32_t(d[i + 1]) << 8 : 0);
  out += {k[v >> 18], k[(v >> 12) & 63]};
  out += i + 1 < d.size() ? k[(v >> 6) & 63] : '=';
  out += '=';
  return out;
}

std::string hashSource(std::string_view text) { return "'sha256-" + base64(sha256(text)) + "'"; }

std::string_view must(std::string_view name) {
  const UiAsset* a = findUiAsset(name);
  if (!a) throw std::logic_error("dashboard file missing from the build: " + std::string(name));
  return a->content;
}

void replaceOnce(std::string& s, std::string_view what, std::string_view with) {
  const size_t at = s.find(what);
  if (at == std::string::npos) throw std::logic_error("kernel.html lacks " + std::string(what));
  s.replace(at, what.size(), with);
}

}  // namespace

const std::string& UiAsset::encoded(Encoding e) const {
  if (e == Encoding::Brotli) {
    std::call_once(cache->br_once, [&] { cache->br = brotliCompress(served, 11); });
    return cache->br;
  }
  if (e == Encoding::Gzip) {
    std::call_once(cache->gz_once, [&] { cache->gz = gzipCompress(served, 9); });
    return cache->gz;
  }
  return served;
}

std::string UiAsset::etagFor(Encoding e) const {
  if (e == Encoding::Identity) return etag;
  return etag.substr(0, etag.size() - 1) + (e == Encoding::Brotli ? "-br\"" : "-gz\"");
}

const UiAsset* findUiAsset(std::string_view name) {
  if (name.empty()) name = "index.html";
  for (const UiAsset& a : assets())
    if (a.name == name) return &a;
  return nullptr;
}

std::string jsonForHtml(const nlohmann::json& j) {
  const std::string text = dumpJson(j);
  std::string out;
  out.reserve(text.size() + text.size() / 16);
  for (char c : text) {
    if (c == '<') out += "\\u003c";
    else if (c == '>') out += "\\u003e";
    else if (c == '&') out += "\\u0026";
    else out += c;
  }
  return out;
}

std::string renderReport(const nlohmann::json& data, std::string_view title) {
  std::string page(must("kernel.html"));
  // The page's own <script src=... defer> tags become inline scripts at the end of the body, after
  // the data block they read; the stylesheet link becomes an inline <style>.
  std::vector<std::string> scripts;
  for (;;) {
    const size_t at = page.find("<script src=\"");
    if (at == std::string::npos) break;
    const size_t name_end = page.find('"', at + 13);
    const size_t tag_end = page.find("</script>", at);
    if (name_end == std::string::npos || tag_end == std::string::npos) throw std::logic_error("kernel.html: bad <script>");
    scripts.push_back(page.substr(at + 13, name_end - at - 13));
    size_t erase_end = tag_end + 9;
    if (erase_end < page.size() && page[erase_end] == '\n') ++erase_end;
    page.erase(at, erase_end - at);
  }
  const std::string_view css = must("style.css");
  std::string csp = "default-src 'none'; style-src " + hashSource(css) + "; script-src";
  std::string tail = "<script type=\"application/json\" id=\"tessera-report\">" + jsonForHtml(data) + "</script>\n";
  for (const std::string& name : scripts) {
    const std::string_view js = must(name);
    csp += " " + hashSource(js);
    tail += "<script>" + std::string(js) + "</script>\n";
  }
  csp += "; base-uri 'none'; form-action 'none'";
  replaceOnce(page, "<link rel=\"stylesheet\" href=\"style.css\">", "<style>" + std::string(css) + "</style>");
  replaceOnce(page, "<link rel=\"icon\" href=\"favicon.svg\" type=\"image/svg+xml\">\n", "");
  replaceOnce(page, "<meta charset=\"utf-8\">",
              "<meta charset=\"utf-8\">\n<meta http-equiv=\"Content-Security-Policy\" content=\"" + csp + "\">");
  replaceOnce(page, "<body data-page=\"kernel\">", "<body data-page=\"kernel\" data-mode=\"report\">");
  std::string safe_title;
  for (char c : title) {
    if (c == '<') safe_title += "&lt;";
    else if (c == '>') safe_title += "&gt;";
    else if (c == '&') safe_title += "&amp;";
    else safe_title += c;
  }
  const size_t t0 = page.find("<title>"), t1 = page.find("</title>");
  if (t0 != std::string::npos && t1 != std::string::npos) page.replace(t0 + 7, t1 - t0 - 7, safe_title);
  replaceOnce(page, "</body>", tail + "</body>");
  return page;
}

}  // namespace tessera::cache
