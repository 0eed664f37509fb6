// Owns the service's Prometheus metrics: request counts by route and status code, a latency
// histogram per route, lookup hits/misses and writes by outcome. Lock-free counters, so
// recording costs a few atomic adds on the lookup path.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tessera::cache {

class Metrics {
 public:
  enum class Lookup { Hit, Nearest, Miss };
  enum class Write { Inserted, Improved, Kept, Duplicate };
  // What the connection gate (http_gate.h) did with connections.
  enum class Conn { Accepted, RefusedBusy, RefusedHead, TimedOut, RefusedBeforeBody, Evicted };

  explicit Metrics(std::vector<std::string> route_names);

  void request(size_t route, int status, double seconds);
  void lookup(Lookup l, uint64_t n = 1);
  void write(Write w, uint64_t n = 1);
  void connection(Conn c) { conns_[static_cast<size_t>(c)].fetch_add(1, std::memory_order_relaxed); }
  void openConnections(int delta) { open_.fetch_add(delta, std::memory_order_relaxed); }
  uint64_t connectionCount(Conn c) const { return conns_[static_cast<size_t>(c)].load(std::memory_order_relaxed); }

  struct Gauge {
    std::string name, help;
    double value;
  };
  // Prometheus text exposition format 0.0.4; gauges are sampled by the caller at scrape time.
  std::string render(const std::vector<Gauge>& gauges) const;

  uint64_t requestCount(size_t route, int status) const;  // for tests and /status

 private:
  static constexpr std::array<int, 17> kCodes = {200, 201, 304, 400, 401, 403, 404, 405, 409,
                                                 411, 413, 414, 415, 422, 429, 500, 503};
  static constexpr size_t kOtherCode = kCodes.size();
  static constexpr std::array<double, 14> kBuckets = {0.0001, 0.00025, 0.0005, 0.001, 0.0025,
                                                      0.005,  0.01,    0.025,  0.05,  0.1,
                                                      0.25,   0.5,     1,      2.5};
  struct RouteStats {
    std::array<std::atomic<uint64_t>, kCodes.size() + 1> codes{};
    std::array<std::atomic<uint64_t>, kBuckets.size() + 1> buckets{};  // last: +Inf
    std::atomic<uint64_t> sum_ns{0}, count{0};
  };
  static size_t codeSlot(int status);

  std::vector<std::string> names_;
  std::unique_ptr<RouteStats[]> routes_;
  std::array<std::atomic<uint64_t>, 3> lookups_{};
  std::array<std::atomic<uint64_t>, 4> writes_{};
  std::array<std::atomic<uint64_t>, 6> conns_{};
  std::atomic<int64_t> open_{0};
};

}  // namespace tessera::cache
