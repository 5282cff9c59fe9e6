#include "bench_serve_plan.h"

#include <cstdlib>

#include <fmt/format.h>

#include <algorithm>

#include "common/check.h"

namespace gyre::app {

void validate(const ServeBenchSettings& s) {
  GYRE_USAGE_CHECK(s.format == "json" || s.format == "raw", "--format '", s.format, "': json or raw");
  GYRE_USAGE_CHECK(s.clients > 0 || !s.rates.empty(), "--rates: nothing to run");
  for (const double r : s.rates) GYRE_USAGE_CHECK(r > 0 && r <= 1e6, "--rates: ", r, " is not in (0, 1e6]");
  GYRE_USAGE_CHECK(s.clients >= 0 && s.clients <= 4096, "--clients must be between 0 and 4096 (got ", s.clients, ")");
  GYRE_USAGE_CHECK(s.seconds > 0 && s.seconds <= 3600, "--seconds must be in (0, 3600] (got ", s.seconds, ")");
  GYRE_USAGE_CHECK(s.maxBatchSize >= 2 && s.maxBatchSize <= 65536,
                   "--max-batch-size must be between 2 and 65536 (the baseline is 1; got ", s.maxBatchSize, ")");
  GYRE_USAGE_CHECK(s.batchWaitMs >= 0 && s.batchWaitMs <= 10000, "--batch-wait-ms must be in [0, 10000]");
  GYRE_USAGE_CHECK(s.replicas >= 1 && s.replicas <= 256, "--replicas must be between 1 and 256");
  GYRE_USAGE_CHECK(s.baselineReplicas >= 1 && s.baselineReplicas <= 256,
                   "--baseline-replicas must be between 1 and 256");
  GYRE_USAGE_CHECK(s.p99BoundMs > 0, "--p99-bound-ms must be positive");
  GYRE_USAGE_CHECK(s.senders >= 1 && s.senders <= 4096, "--senders must be between 1 and 4096");
}

std::vector<ServeConfig> planServeConfigs(const ServeBenchSettings& s) {
  // Room for every sender's connection and the warm-up's (beyond --max-connections: 503).
  const std::string connections = std::to_string(std::max(s.senders, s.clients) + 8);
  return {{"baseline",
           {"--max-batch-size", "1", "--replicas", std::to_string(s.baselineReplicas), "--max-connections", connections}},
          {"batched",
           {"--max-batch-size", std::to_string(s.maxBatchSize), "--batch-wait-ms", fmt::format("{}", s.batchWaitMs),
            "--replicas", std::to_string(s.replicas), "--max-connections", connections}}};
}

ServeRow serveRow(const std::string& config, const LoadSpec& load, const LoadResult& result) {
  ServeRow r;
  r.config = config;
  r.rate = load.rate;
  r.clients = load.rate > 0 ? 0 : load.clients;
  r.requests = result.latenciesMs.size();
  r.requestsPerS = result.seconds > 0 ? static_cast<double>(r.requests) / result.seconds : 0;
  r.p50Ms = percentile(result.latenciesMs, 0.50);
  r.p90Ms = percentile(result.latenciesMs, 0.90);
  r.p99Ms = percentile(result.latenciesMs, 0.99);
  r.errors = result.errors;
  r.firstError = result.firstError;
  return r;
}

bool keptUp(const ServeRow& row, double p99BoundMs) {
  return row.errors == 0 && row.requests > 0 && row.p99Ms <= p99BoundMs &&
         (row.rate <= 0 || row.requestsPerS >= 0.9 * row.rate);
}

double bestWithinBound(const std::vector<ServeRow>& rows, const std::string& config, double p99BoundMs) {
  double best = 0;
  for (const ServeRow& r : rows)
    if (r.config == config && keptUp(r, p99BoundMs)) best = std::max(best, r.requestsPerS);
  return best;
}

std::string serveHeader(const ServeBenchSettings& s) {
  return fmt::format(
      "gyre bench serve: {} requests of one row, {} s per load, batched: up to {} rows waiting up to {} ms, {} "
      "replica(s); baseline: one row per forward pass, {} replica(s)\n{:<10} {:>8} {:>8} {:>12} {:>9} {:>9} {:>9} {:>7}\n",
      s.format, s.seconds, s.maxBatchSize, s.batchWaitMs, s.replicas, s.baselineReplicas, "config", s.clients > 0 ? "clients" : "rate",
      "answered", "requests/s", "p50 ms", "p90 ms", "p99 ms", "errors");
}

std::string serveRowText(const ServeRow& r) {
  std::string line = fmt::format("{:<10} {:>8} {:>8} {:>12.0f} {:>9.2f} {:>9.2f} {:>9.2f} {:>7}\n", r.config,
                                 r.rate > 0 ? fmt::format("{:.0f}", r.rate) : std::to_string(r.clients), r.requests,
                                 r.requestsPerS, r.p50Ms, r.p90Ms, r.p99Ms, r.errors);
  if (!r.firstError.empty()) line += "           first error: " + r.firstError + "\n";
  return line;
}

nlohmann::json serveRowJson(const ServeRow& r) {
  nlohmann::json j = {{"bench", "serve"},        {"config", r.config}, {"requests", r.requests},
                      {"requests_per_s", r.requestsPerS}, {"p50_ms", r.p50Ms},   {"p90_ms", r.p90Ms},
                      {"p99_ms", r.p99Ms},        {"errors", r.errors}};
  if (r.rate > 0)
    j["rate"] = r.rate;
  else
    j["clients"] = r.clients;
  if (!r.firstError.empty()) j["first_error"] = r.firstError;
  return j;
}

namespace {

struct Summary {
  double baseline = 0, batched = 0;
  double ratio() const { return baseline > 0 ? batched / baseline : 0; }
};

Summary summarize(const std::vector<ServeRow>& rows, const ServeBenchSettings& s) {
  return {bestWithinBound(rows, "baseline", s.p99BoundMs), bestWithinBound(rows, "batched", s.p99BoundMs)};
}

}  // namespace

ServeCompute serveCompute(const std::string& config, const std::string& metricsText) {
  ServeCompute c;
  c.config = config;
  const auto value = [&](const std::string& name) {
    const std::size_t at = metricsText.find("\n" + name + " ");
    return at == std::string::npos ? 0.0 : std::strtod(metricsText.c_str() + at + name.size() + 2, nullptr);
  };
  c.forwardSeconds = value("gyre_serve_forward_seconds_total");
  c.rows = value("gyre_serve_batch_rows_total");
  c.batches = value("gyre_serve_batches_total");
  return c;
}

std::string serveComputeText(const std::vector<ServeCompute>& computes) {
  std::string s = "forward passes (the servers' /metrics):";
  for (const ServeCompute& c : computes)
    s += fmt::format(" {} {:.3f} ms per row in batches of {:.1f} rows;", c.config, c.msPerRow(), c.rowsPerBatch());
  s.back() = '\n';
  return s;
}

nlohmann::json serveComputeJson(const std::vector<ServeCompute>& computes) {
  nlohmann::json rows = nlohmann::json::array();
  for (const ServeCompute& c : computes)
    rows.push_back({{"config", c.config}, {"forward_ms_per_row", c.msPerRow()}, {"rows_per_batch", c.rowsPerBatch()}});
  return {{"bench", "serve"}, {"compute", rows}};
}

std::string serveSummaryText(const std::vector<ServeRow>& rows, const ServeBenchSettings& s) {
  const Summary m = summarize(rows, s);
  return fmt::format(
      "most requests/s with p99 <= {} ms and no error: baseline {:.0f}, batched {:.0f}\n"
      "{} batched / baseline = {:.2f} (target >= 4)\n",
      s.p99BoundMs, m.baseline, m.batched, m.ratio() >= 4 ? "PASS" : "MISS", m.ratio());
}

nlohmann::json serveSummaryJson(const std::vector<ServeRow>& rows, const ServeBenchSettings& s) {
  const Summary m = summarize(rows, s);
  return {{"bench", "serve"},
          {"summary", true},
          {"p99_bound_ms", s.p99BoundMs},
          {"baseline_requests_per_s", m.baseline},
          {"batched_requests_per_s", m.batched},
          {"ratio", m.ratio()},
          {"target", 4},
          {"pass", m.ratio() >= 4}};
}

}  // namespace gyre::app
