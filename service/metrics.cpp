// Owns recording and rendering of the service metrics in the Prometheus text format.
#include "service/metrics.h"

#include <cstdio>

#include "support/strings.h"

namespace tessera::cache {

Metrics::Metrics(std::vector<std::string> route_names)
    : names_(std::move(route_names)), routes_(new RouteStats[names_.size()]) {}

size_t Metrics::codeSlot(int status) {
  for (size_t i = 0; i < kCodes.size(); ++i)
    if (kCodes[i] == status) return i;
  return kOtherCode;
}

void Metrics::request(size_t route, int status, double seconds) {
  if (route >= names_.size()) return;
  RouteStats& r = routes_[route];
  r.codes[codeSlot(status)].fetch_add(1, std::memory_order_relaxed);
  size_t b = 0;
  while (b < kBuckets.size() && seconds > kBuckets[b]) ++b;
  r.buckets[b].fetch_add(1, std::memory_order_relaxed);
  r.sum_ns.fetch_add(static_cast<uint64_t>(seconds * 1e9), std::memory_order_relaxed);
  r.count.fetch_add(1, std::memory_order_relaxed);
}

void Metrics::lookup(Lookup l, uint64_t n) {
  lookups_[static_cast<size_t>(l)].fetch_add(n, std::memory_order_relaxed);
}

void Metrics::write(Write w, uint64_t n) {
  writes_[static_cast<size_t>(w)].fetch_add(n, std::memory_order_relaxed);
}

uint64_t Metrics::requestCount(size_t route, int status) const {
  if (route >= names_.size()) return 0;
  return routes_[route].codes[codeSlot(status)].load(std::memory_order_relaxed);
}

std::string Metrics::render(const std::vector<Gauge>& gauges) const {
  std::string out;
  auto line = [&](const std::string& s) {
    out += s;
    out += '\n';
  };
  line("# HELP tessera_http_requests_total HTTP requests by route and status code.");
  line("# TYPE tessera_http_requests_total counter");
  for (size_t r = 0; r < names_.size(); ++r) {
    for (size_t c = 0; c <= kCodes.size(); ++c) {
      uint64_t v = routes_[r].codes[c].load(std::memory_order_relaxed);
      if (v == 0) continue;
      std::string code = c == kOtherCode ? "other" : std::to_string(kCodes[c]);
      line("tessera_http_requests_total{route=\"" + names_[r] + "\",code=\"" + code + "\"} " +
           std::to_string(v));
    }
  }
  line("# HELP tessera_http_request_duration_seconds Time spent handling a request (excludes I/O).");
  line("# TYPE tessera_http_request_duration_seconds histogram");
  for (size_t r = 0; r < names_.size(); ++r) {
    const RouteStats& rs = routes_[r];
    uint64_t count = rs.count.load(std::memory_order_relaxed);
    if (count == 0) continue;
    const std::string label = "route=\"" + names_[r] + "\"";
    uint64_t cumulative = 0;
    for (size_t b = 0; b <= kBuckets.size(); ++b) {
      cumulative += rs.buckets[b].load(std::memory_order_relaxed);
      std::string le = b == kBuckets.size() ? "+Inf" : formatDouble(kBuckets[b]);
      line("tessera_http_request_duration_seconds_bucket{" + label + ",le=\"" + le + "\"} " +
           std::to_string(cumulative));
    }
    line("tessera_http_request_duration_seconds_sum{" + label + "} " +
         formatDouble(static_cast<double>(rs.sum_ns.load(std::memory_order_relaxed)) / 1e9));
    line("tessera_http_request_duration_seconds_count{" + label + "} " + std::to_string(cumulative));
  }
  line("# HELP tessera_lookups_total Best-config lookups by result.");
  line("# TYPE tessera_lookups_total counter");
  const char* lookup_names[] = {"hit", "nearest", "miss"};
  for (size_t i = 0; i < lookups_.size(); ++i)
    line(std::string("tessera_lookups_total{result=\"") + lookup_names[i] + "\"} " +
         std::to_string(lookups_[i].load(std::memory_order_relaxed)));
  line("# HELP tessera_record_writes_total Submitted records by merge outcome.");
  line("# TYPE tessera_record_writes_total counter");
  const char* write_names[] = {"inserted", "improved", "kept", "duplicate"};
  for (size_t i = 0; i < writes_.size(); ++i)
    line(std::string("tessera_record_writes_total{outcome=\"") + write_names[i] + "\"} " +
         std::to_string(writes_[i].load(std::memory_order_relaxed)));
  line("# HELP tessera_http_connections_total Connections by what the gate did with them (accepted; refused: "
       "503 over the connection caps, 431 head too large, refused before the body was read; timed_out: 408).");
  line("# TYPE tessera_http_connections_total counter");
  const char* conn_names[] = {"accepted", "refused_busy", "refused_head", "timed_out", "refused_before_body", "evicted"};
  for (size_t i = 0; i < conns_.size(); ++i)
    line(std::string("tessera_http_connections_total{event=\"") + conn_names[i] + "\"} " +
         std::to_string(conns_[i].load(std::memory_order_relaxed)));
  line("# HELP tessera_http_connections_open Open client connections.");
  line("# TYPE tessera_http_connections_open gauge");
  line("tessera_http_connections_open " + std::to_string(open_.load(std::memory_order_relaxed)));
  for (const Gauge& g : gauges) {
    line("# HELP " + g.name + " " + g.help);
    line("# TYPE " + g.name + " gauge");
    line(g.name + " " + formatDouble(g.value));
  }
  return out;
}

}  // namespace tessera::cache
