#include "bench_serve_load.h"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <random>
#include <thread>

#include "common/mutex.h"
#include "gyre/errors.h"

namespace gyre::app {
namespace {

using Clock = std::chrono::steady_clock;

// What the senders share: results under a lock.
struct Tally {
  Mutex mu;
  LoadResult result GYRE_GUARDED_BY(mu);

  void add(double ms, double dueS, int status, const std::string& error) GYRE_EXCLUDES(mu) {
    MutexLock lock(mu);
    if (status == 200) {
      result.latenciesMs.push_back(ms);
      result.dueS.push_back(dueS);
      return;
    }
    if (result.errors++ == 0) result.firstError = error;
  }
};

// One request on `client`: its status (0 when the connection failed) and, when not 200, why.
int send(httplib::Client& client, const LoadSpec& s, std::string& error) {
  httplib::Headers headers;
  if (!s.shapeHeader.empty()) headers.emplace("X-Gyre-Shape", s.shapeHeader);
  const httplib::Result r = client.Post(s.path, headers, s.body, s.contentType);
  if (!r) {
    error = "connection: " + httplib::to_string(r.error());
    return 0;
  }
  if (r->status != 200) error = "HTTP " + std::to_string(r->status) + ": " + r->body.substr(0, 200);
  return r->status;
}

std::unique_ptr<httplib::Client> clientFor(const LoadSpec& s) {
  auto c = std::make_unique<httplib::Client>(s.host, s.port);
  c->set_keep_alive(true);
  c->set_tcp_nodelay(true);  // a request's body follows its headers without waiting for an ACK
  c->set_connection_timeout(std::chrono::seconds(10));
  c->set_read_timeout(std::chrono::seconds(60));
  return c;
}

}  // namespace

LoadResult runLoad(const LoadSpec& s) {
  if (s.port <= 0 || s.path.empty()) throw InvalidArgument("a load needs the server's port and a path");
  const int senders = std::max(1, s.clients);
  Tally tally;
  std::vector<std::thread> threads;
  const Clock::time_point start = Clock::now() + std::chrono::milliseconds(20);
  const Clock::time_point end = start + std::chrono::microseconds(static_cast<std::int64_t>(s.seconds * 1e6));
  // Open loop: the arrivals of a Poisson process at `rate`, due times from the start (outside the
  // branch: the senders read them until they are joined below).
  std::vector<Clock::duration> due;
  std::atomic<std::size_t> next{0};
  if (s.rate > 0) {
    std::mt19937_64 random(s.seed);
    std::exponential_distribution<double> gap(s.rate);
    for (double t = gap(random); t < s.seconds; t += gap(random))
      due.push_back(std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(t)));
    for (int i = 0; i < senders; ++i)
      threads.emplace_back([&] {
        const auto client = clientFor(s);
        for (std::size_t k = next++; k < due.size(); k = next++) {
          const Clock::time_point at = start + due[k];
          std::this_thread::sleep_until(at);
          std::string error;
          const int status = send(*client, s, error);
          tally.add(std::chrono::duration<double, std::milli>(Clock::now() - at).count(),
                    std::chrono::duration<double>(due[k]).count(), status, error);
        }
      });
  } else {
    for (int i = 0; i < senders; ++i)
      threads.emplace_back([&] {
        const auto client = clientFor(s);
        std::this_thread::sleep_until(start);
        for (Clock::time_point sent = Clock::now(); sent < end; sent = Clock::now()) {
          std::string error;
          const int status = send(*client, s, error);
          tally.add(std::chrono::duration<double, std::milli>(Clock::now() - sent).count(),
                    std::chrono::duration<double>(sent - start).count(), status, error);
        }
      });
  }
  for (std::thread& t : threads) t.join();
  MutexLock lock(tally.mu);
  LoadResult result = std::move(tally.result);
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return result;
}

double percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(values.size())));
  return values[std::min(values.size() - 1, rank == 0 ? 0 : rank - 1)];
}

}  // namespace gyre::app
