#include "serve/options.h"

#include <fmt/format.h>

#include "common/check.h"

namespace gyre::serve {

void addServeFlags(CLI::App& app, ServeOptions& o) {
  app.add_option("model", o.model,
                 "A run directory of gyre train (model.pt and config.json), or a TorchScript module file")
      ->required();
  app.add_option("--name", o.name, "The model's name in the URLs (default: the built-in model's, or the file's stem)");
  app.add_option("--host", o.host, "Address to listen on")->capture_default_str();
  app.add_option("--port", o.port, "Port to listen on (0: any free port, printed at the start)")->capture_default_str();
  app.add_option("--replicas", o.replicas, "Copies of the model answering requests, one thread each")
      ->capture_default_str();
  app.add_option("--min-replicas", o.minReplicas,
                 "Autoscaling (with --max-replicas): the fewest replicas; the count follows the requests in flight")
      ->capture_default_str();
  app.add_option("--max-replicas", o.maxReplicas, "Autoscaling (with --min-replicas): the most replicas")
      ->capture_default_str();
  app.add_option("--target-ongoing-requests", o.targetOngoing,
                 "Autoscaling: requests in flight (queued or computing) per replica to aim at")
      ->capture_default_str();
  app.add_option("--upscale-delay", o.upscaleDelayS, "Autoscaling: seconds more replicas must be wanted before they start")
      ->capture_default_str();
  app.add_option("--downscale-delay", o.downscaleDelayS,
                 "Autoscaling: seconds fewer replicas must be wanted before some leave")
      ->capture_default_str();
  app.add_option("--max-batch-size", o.maxBatchSize, "Most rows one forward pass takes (1: no batching)")
      ->capture_default_str();
  app.add_option("--batch-wait-ms", o.batchWaitMs,
                 "How long a request waits for others to fill its batch, in milliseconds")
      ->capture_default_str();
  app.add_option("--threads", o.threads, "Compute threads per replica")->capture_default_str();
  app.add_flag("--replica-processes", o.replicaProcesses,
               "Each replica in a process of its own (a gyre::rt actor): a replica whose process dies is rebuilt "
               "in a live one and its batch answered there");
  app.add_option("--max-connections", o.maxConnections, "Connections served at once (each costs a descriptor, not a thread); more are answered 503")
      ->capture_default_str();
  app.add_option("--max-queue", o.maxQueue, "Requests waiting for a replica; beyond it: 503")->capture_default_str();
  app.add_option("--max-body-bytes", o.maxBodyBytes, "Largest request body; larger: 413")->capture_default_str();
  app.add_option("--read-timeout", o.readTimeoutS,
                 "Seconds a client may take to send a whole request, from its first byte; then 408 and closed")
      ->capture_default_str();
}

void validateServeOptions(const ServeOptions& o) {
  GYRE_USAGE_CHECK(!o.model.empty(), "MODEL: give a run directory or a model file");
  GYRE_USAGE_CHECK(o.port >= 0 && o.port <= 65535, "--port ", o.port, " is not a port (0 to 65535)");
  GYRE_USAGE_CHECK(o.replicas >= 1 && o.replicas <= 256, "--replicas must be between 1 and 256 (got ",
                   o.replicas, ")");
  GYRE_USAGE_CHECK((o.minReplicas == 0) == (o.maxReplicas == 0),
                   "--min-replicas and --max-replicas go together (autoscaling between them)");
  if (o.minReplicas != 0) {
    GYRE_USAGE_CHECK(o.minReplicas >= 1 && o.maxReplicas >= o.minReplicas && o.maxReplicas <= 256,
                     "autoscaling needs 1 <= --min-replicas <= --max-replicas <= 256 (got ", o.minReplicas, " and ",
                     o.maxReplicas, ")");
    GYRE_USAGE_CHECK(o.targetOngoing > 0 && o.targetOngoing <= 100000,
                     "--target-ongoing-requests must be in (0, 100000] (got ", o.targetOngoing, ")");
    GYRE_USAGE_CHECK(o.upscaleDelayS >= 0 && o.upscaleDelayS <= 3600 && o.downscaleDelayS >= 0 &&
                         o.downscaleDelayS <= 3600,
                     "--upscale-delay and --downscale-delay must be in [0, 3600] seconds");
  }
  GYRE_USAGE_CHECK(o.maxBatchSize >= 1 && o.maxBatchSize <= 65536,
                   "--max-batch-size must be between 1 and 65536 (got ", o.maxBatchSize, ")");
  GYRE_USAGE_CHECK(o.batchWaitMs >= 0 && o.batchWaitMs <= 10000,
                   "--batch-wait-ms must be between 0 and 10000 (got ", o.batchWaitMs, ")");
  GYRE_USAGE_CHECK(o.threads >= 1 && o.threads <= 1024, "--threads must be between 1 and 1024 (got ", o.threads,
                   ")");
  GYRE_USAGE_CHECK(o.maxConnections >= 1 && o.maxConnections <= 65536,
                   "--max-connections must be between 1 and 65536 (got ", o.maxConnections, ")");
  GYRE_USAGE_CHECK(o.maxQueue >= 1 && o.maxQueue <= 1000000, "--max-queue must be between 1 and 1000000 (got ",
                   o.maxQueue, ")");
  GYRE_USAGE_CHECK(o.maxBodyBytes >= 1024 && o.maxBodyBytes <= (4ll << 30),
                   "--max-body-bytes must be between 1024 and 4 GiB (got ", o.maxBodyBytes, ")");
  GYRE_USAGE_CHECK(o.readTimeoutS > 0 && o.readTimeoutS <= 3600, "--read-timeout must be in (0, 3600] (got ",
                   o.readTimeoutS, ")");
}

std::vector<std::string> serveWorkerArguments(const ServeOptions& o) {
  std::vector<std::string> args = {o.model};
  if (!o.name.empty()) args.insert(args.end(), {"--name", o.name});
  args.insert(args.end(), {"--host", o.host, "--port", std::to_string(o.port), "--replicas",
                           std::to_string(o.replicas), "--max-batch-size", std::to_string(o.maxBatchSize),
                           "--batch-wait-ms", fmt::format("{}", o.batchWaitMs), "--threads",
                           std::to_string(o.threads), "--max-connections", std::to_string(o.maxConnections),
                           "--max-queue", std::to_string(o.maxQueue), "--max-body-bytes",
                           std::to_string(o.maxBodyBytes), "--read-timeout", fmt::format("{}", o.readTimeoutS)});
  if (o.minReplicas != 0)
    args.insert(args.end(), {"--min-replicas", std::to_string(o.minReplicas), "--max-replicas",
                             std::to_string(o.maxReplicas), "--target-ongoing-requests", fmt::format("{}", o.targetOngoing),
                             "--upscale-delay", fmt::format("{}", o.upscaleDelayS), "--downscale-delay",
                             fmt::format("{}", o.downscaleDelayS)});
  if (o.replicaProcesses) args.emplace_back("--replica-processes");
  return args;
}

int replicaProcessCount(const ServeOptions& o) {
  return o.maxReplicas > 0 ? o.maxReplicas : o.replicas;
}

}  // namespace gyre::serve
