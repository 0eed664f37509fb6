// Owns the connection gate in front of the HTTP server: one event-loop thread holds every open
// connection while its request head (and body) arrives, enforcing the limits cpp-httplib 0.11
// cannot (an overall deadline for the head and for the body, a cap on header fields and bytes, a
// bounded number of open connections, in total and per client, answered 503 at once), and hands
// only complete requests to a small pool of workers. A slow or idle client therefore costs a file
// descriptor and a buffer, never a worker thread. Free of cpp-httplib: the transport supplies
// `serve`, which runs one request on a worker (http_transport.cpp).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "service/api.h"
#include "service/metrics.h"

namespace tessera::cache {

struct GateLimits {
  int workers = 16;                     // threads that run complete requests
  int max_connections = 512;            // open connections; one more is answered 503 and closed
  int max_connections_per_client = 128;  // per peer address (0: no per-client cap; set 0 behind a proxy)
  size_t max_head_bytes = 16 * 1024;    // request line + header fields; more is 431
  int max_header_fields = 100;          // more is 431
  double head_timeout_s = 10;           // the whole head, from accept or from its first byte; then 408
  double body_timeout_s = 30;           // the whole body (pre-read by the gate); then 408
  double idle_timeout_s = 5;            // keep-alive wait for the next request; then a silent close
  double write_timeout_s = 5;           // per blocked write of a response
  // After a refusal the gate keeps reading (and discarding) what the client still sends, up to
  // this long and this much, so that the client reads the answer instead of a reset.
  double linger_s = 1;
  size_t linger_bytes = 1u << 20;
  int max_requests_per_connection = 10000;
  size_t max_body_bytes = 16u << 20;    // bodies up to this are read by the gate before dispatch
  // Memory of request bodies in flight, all connections together: a body costs kBodyCost times its
  // length while it is held and parsed (the bytes, the request's copy, the JSON tree); one that
  // would take the total past this is answered 503 (Retry-After) before it is read, unless nothing
  // else is in flight. 0: no limit.
  size_t body_budget_bytes = size_t{1} << 30;
  // At max_connections, the connection that has waited longest for the first byte of a request
  // (an idle one: it costs its client a reconnect) is closed to admit a new one, so idle
  // connections cannot lock out a liveness probe. When none is idle (all are mid-request),
  // connections past max_connections (or a client's cap) may still ask /healthz or /readyz: their
  // head must arrive within probe_timeout_s and be one of those; anything else is 503.
  int probe_reserve = 16;
  double probe_timeout_s = 1;
  // Memory after large bodies: a connection's buffer that grew past keep_buffer_bytes is shrunk
  // once its request is answered, and once no body is in flight after one of at least
  // trim_after_bytes the freed heap is handed back to the system (malloc_trim): the allocator
  // otherwise keeps it (issue 47: 1.25 GB held idle after sixteen 15 MiB bodies). 0: never trim.
  size_t keep_buffer_bytes = 64u << 10;
  size_t trim_after_bytes = 1u << 20;
};
// What a request body costs the server in memory, per byte of its Content-Length (measured: 16
// concurrent 15 MiB bodies took RSS from 96 MB to 1.5 GB, about 6x; 8 leaves room).
inline constexpr size_t kBodyCost = 8;

// One client connection. The gate owns it; a worker borrows it for one request.
struct GateConn {
  int fd = -1;
  std::string peer;      // peer address (the per-client key)
  std::string buf;       // bytes received and not yet consumed by a request
  size_t pos = 0;        // how far the worker's request has consumed buf
  int requests = 0;      // requests answered on this connection
  bool last = false;     // this request is the connection's last (tell the client)
  std::chrono::steady_clock::time_point read_deadline;  // for reads a worker still has to do
  // Gate state (event-loop thread only).
  enum class State { Head, Body, Busy, Linger } state = State::Head;
  bool head_started = false;
  size_t need = 0;       // bytes of buf that make up the current request (Linger: bytes left to discard)
  size_t reserved = 0;   // bytes of the body budget this request holds (returned when it is answered)
  bool probe_only = false;  // admitted past the connection caps for one health probe
  // Since when it waits for the first byte of a request (fresh or kept alive): the longest-idle
  // connection is closed to make room when the cap is reached.
  std::chrono::steady_clock::time_point idle_since;
  std::chrono::steady_clock::time_point deadline;
};

class ConnectionGate {
 public:
  // Runs one complete request (head, and body when the gate read it, at conn.buf[pos..]) on a
  // worker; returns true to keep the connection for another request.
  using Serve = std::function<bool(GateConn&)>;
  // Decides, from the head alone, whether a request that carries a body is refused before the
  // body is read (auth, route, media type, length); nullopt: read the body.
  using Precheck = std::function<std::optional<ApiResponse>(const ApiRequest& head)>;

  // `metrics` (counts of accepted, refused and timed-out connections) must outlive the gate.
  ConnectionGate(const GateLimits& limits, Serve serve, Precheck precheck, Metrics& metrics);
  ~ConnectionGate();
  ConnectionGate(const ConnectionGate&) = delete;
  ConnectionGate& operator=(const ConnectionGate&) = delete;

  // Takes ownership of an accepted socket (called on the acceptor thread; returns at once).
  void adopt(int fd);
  // Stops taking connections and closes every one not in a worker's hands (returns at once);
  // join() then waits for the running requests and the threads.
  void stop();
  void join();
  const GateLimits& limits() const { return limits_; }

 private:
  using Clock = std::chrono::steady_clock;
  void loop();
  void work();
  void onReadable(GateConn* c);
  void advance(GateConn* c);  // parse what buf holds; dispatch, refuse or keep waiting
  void dispatch(GateConn* c);
  void refuse(GateConn* c, const ApiResponse& r);
  void close(GateConn* c);
  void arm(GateConn* c, bool add);
  void sweep(Clock::time_point now);
  void wake();
  void finished(GateConn* c, bool keep);  // from a worker
  // On a worker that just answered `c`: whether a complete bodiless GET follows (waiting for its
  // first bytes only while no other connection is queued), to be served on the same worker.
  bool nextRequestIsHere(GateConn* c);

  GateLimits limits_;
  Serve serve_;
  Precheck precheck_;
  Metrics& metrics_;
  int epoll_ = -1, wake_fd_ = -1;

  // Event-loop thread only.
  std::unordered_map<int, std::unique_ptr<GateConn>> conns_;
  std::unordered_map<std::string, int> per_client_;
  size_t body_in_flight_ = 0;  // sum of the reservations of requests being read or served
  // A large body was answered since the heap was last handed back (GateLimits::trim_after_bytes).
  bool trim_pending_ = false;
  int probes_ = 0;             // probe-only connections open
  Clock::time_point last_sweep_{};

  // Handed between threads.
  std::mutex mu_;
  std::vector<int> adopted_;
  std::vector<std::pair<GateConn*, bool>> returned_;
  bool stopping_ = false;

  std::mutex work_mu_;
  std::condition_variable work_cv_;
  std::deque<GateConn*> ready_;
  std::atomic<int> waiting_{0};  // ready_.size(), readable without the lock
  bool work_stop_ = false;

  std::thread loop_thread_;
  std::vector<std::thread> workers_;
};

// The answer the gate writes itself (503, 408, 431, or a precheck refusal), as HTTP/1.1 text.
std::string cannedResponse(const ApiResponse& r, bool close);

}  // namespace tessera::cache
