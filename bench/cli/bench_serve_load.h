// The load of `gyre bench serve`: one request (the same body each time) sent to a server over
// keep-alive HTTP connections, either open loop (Poisson arrivals at a given rate: each request's
// latency counts from when it was due, so a server that falls behind shows it) or closed loop
// (N clients, each sending its next request when its last is answered). One thread drives every
// connection through epoll, as wrk does, so the load takes little of the cores it shares with the
// server (a thread per connection spent them on switching between threads).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gyre::app {

struct LoadSpec {
  std::string host = "127.0.0.1";
  int port = 0;
  std::string path;
  std::string body;
  std::string contentType = "application/json";
  std::string shapeHeader;  // X-Gyre-Shape, for raw bodies
  double rate = 0;          // requests/s, open loop; 0: closed loop with `clients`
  int clients = 32;         // closed loop: clients; open loop: connections sending at once
  double seconds = 3;
  std::uint64_t seed = 1;
};

struct LoadResult {
  std::vector<double> latenciesMs;  // of the answered requests (200)
  std::vector<double> dueS;         // when each of them was due (sent, closed loop), seconds from the start
  int errors = 0;                   // anything but a 200
  std::string firstError;
  double seconds = 0;  // from the first request due to the last answer
};

// Throws InvalidArgument for a spec without a port or path.
LoadResult runLoad(const LoadSpec& spec);

// The q-quantile (0..1) of `values` by nearest rank; 0 for none.
double percentile(std::vector<double> values, double q);

}  // namespace gyre::app
