// `gyre bench serve`'s plan and report: the server configurations it compares (the baseline, one
// request per forward pass, and dynamic batching, on the same model and HTTP server), the loads
// (open loop at doubling rates until a configuration falls behind, or closed loop with N clients),
// and what each run's figures become: rows, the best rate each configuration sustains with a p99
// within the bound, and the target (batched >= 4x the baseline's). Pure.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench_serve_load.h"

namespace gyre::app {

struct ServeBenchSettings {
  std::string model;  // a run directory of gyre train; empty: a cnn made for the run
  std::string format = "json";  // json (v1 instances) or raw (float32)
  std::vector<double> rates = {100, 200, 400, 800, 1600, 3200, 6400};  // open loop, requests/s
  int clients = 0;                                                     // > 0: closed loop instead
  double seconds = 3;                                                  // per load
  int maxBatchSize = 32;
  double batchWaitMs = 5;
  int replicas = 1;
  int baselineReplicas = 1;  // the baseline's replicas, one request per forward pass each
  double p99BoundMs = 50;
  int senders = 64;  // open loop: connections sending at once
  bool json = false;
};

// Throws InvalidArgument naming the flag.
void validate(const ServeBenchSettings& s);

struct ServeConfig {
  std::string name;                // "baseline" or "batched"
  std::vector<std::string> flags;  // gyre serve's, beside MODEL and --port
};
// The baseline (--max-batch-size 1, one replica) and the batched configuration of `s`.
std::vector<ServeConfig> planServeConfigs(const ServeBenchSettings& s);

struct ServeRow {
  std::string config;
  double rate = 0;  // offered, open loop; 0: closed loop
  int clients = 0;
  std::size_t requests = 0;  // answered
  double requestsPerS = 0;
  double p50Ms = 0, p90Ms = 0, p99Ms = 0;
  int errors = 0;
  std::string firstError;
};
ServeRow serveRow(const std::string& config, const LoadSpec& load, const LoadResult& result);
// Whether an open-loop row kept up: no error, p99 within the bound, and at least 90% of the
// offered rate answered. The sweep of a configuration stops at its first row that did not.
bool keptUp(const ServeRow& row, double p99BoundMs);

// The most requests/s a configuration answered with every figure kept up (0: none).
double bestWithinBound(const std::vector<ServeRow>& rows, const std::string& config, double p99BoundMs);

// What a configuration's forward passes cost, read from its server's /metrics after its loads:
// the time in forward passes per row says whether batching saves compute on this machine.
struct ServeCompute {
  std::string config;
  double forwardSeconds = 0;
  double rows = 0;
  double batches = 0;
  double msPerRow() const { return rows > 0 ? forwardSeconds * 1000 / rows : 0; }
  double rowsPerBatch() const { return batches > 0 ? rows / batches : 0; }
};
ServeCompute serveCompute(const std::string& config, const std::string& metricsText);
std::string serveComputeText(const std::vector<ServeCompute>& computes);
nlohmann::json serveComputeJson(const std::vector<ServeCompute>& computes);

std::string serveHeader(const ServeBenchSettings& s);
std::string serveRowText(const ServeRow& r);
nlohmann::json serveRowJson(const ServeRow& r);
// The targets' lines (or JSON summary): batched / baseline requests/s within the p99 bound, >= 4.
std::string serveSummaryText(const std::vector<ServeRow>& rows, const ServeBenchSettings& s);
nlohmann::json serveSummaryJson(const std::vector<ServeRow>& rows, const ServeBenchSettings& s);

}  // namespace gyre::app
