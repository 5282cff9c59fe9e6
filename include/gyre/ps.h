// The parameter server: server processes hold a model's parameters, partitioned across them,
// and apply the optimizer to them; workers push gradients and pull parameters. See docs/ps.md.
//
//   gyre::ps::TableSpec spec;                     // one float32 tensor per key
//   spec.sizes = {784 * 128, 128, 128 * 10, 10};
//   spec.mode = gyre::ps::Mode::parse("ssp:2");
//   spec.optimizer.momentum = 0.9;
//   auto worker = gyre::ps::Worker::fromEnvironment(spec);   // under gyre run --servers S
//   if (worker->workerId() == 0) for (key...) worker->init(key, values[key])->wait();
//   for (step...) {
//     for (key...) worker->pull(key, params[key]);  // async; wait() them before computing
//     ... compute gradients ...
//     for (key...) worker->push(key, grads[key], lr);
//     worker->clock();  // ends the step; SSP blocks here when this worker is s clocks ahead
//   }
//
// Partitioning: the keys are laid end to end in one flat range of floats, which is cut into
// numServers equal parts, so large tensors are split across servers and every server holds the
// same number of parameters. A piece of a key on one server is a slice; each slice has a
// primary server and, with two or more servers, a backup (the next server). An update is
// acknowledged after the backup applied it; when a server dies, workers send its slices'
// requests to the backups, and no acknowledged update is lost.
//
// Consistency (Mode):
//   bsp    a step's update applies once every worker pushed its gradient for the step (their
//          average); pull() in step c returns the parameters after the updates of steps < c.
//   asp    each push applies at once (the gradient times 1/numWorkers); pull() returns the
//          latest parameters.
//   ssp:s  as asp, but clock() blocks a worker that has completed c steps until the slowest
//          worker has completed at least c - s.
// Staleness of an update: how many updates the slice received between the pull the gradient
// was computed from and this update (always 0 under bsp).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gyre/work.h"

namespace gyre::ps {

enum class Consistency : std::uint8_t { kBsp = 1, kAsp = 2, kSsp = 3 };

struct Mode {
  Consistency consistency = Consistency::kBsp;
  int staleness = 0;  // ssp only: s >= 0

  // "bsp", "asp" or "ssp:S"; throws InvalidArgument otherwise.
  static Mode parse(const std::string& text);
  std::string toString() const;
  bool operator==(const Mode&) const = default;
};

// The optimizer each server applies to its slices, with PyTorch's semantics
// (torch::optim::SGD with dampening 0 and no Nesterov; torch::optim::Adam without amsgrad).
// The learning rate travels with each push, so schedules work.
struct OptimizerOptions {
  enum class Kind : std::uint8_t { kSgd = 1, kAdam = 2 };
  Kind kind = Kind::kSgd;
  float momentum = 0;  // sgd
  float weightDecay = 0;
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;  // adam
  bool operator==(const OptimizerOptions&) const = default;
};

// What every worker declares on connecting; the servers refuse a worker whose spec differs
// from the first one's.
struct TableSpec {
  std::vector<std::size_t> sizes;  // float32 elements per key; keys are 0..sizes.size()-1
  Mode mode;
  OptimizerOptions optimizer;
  // With two or more servers, keep a backup of every slice on the next server (see above). Off:
  // no replication traffic or work, and a server's death loses its slices.
  bool replicate = true;
  // The keys' tensor shapes, when known (PSOptimizer::tableFor sets them): a worker that
  // declares other shapes for the same sizes (a [2, 3] against a [3, 2]) is refused. Empty: not
  // compared; else one per key, whose product is its size.
  std::vector<std::vector<std::int64_t>> shapes;
  bool operator==(const TableSpec&) const = default;
};

struct WorkerOptions {
  int workerId = 0;
  int numWorkers = 1;
  std::vector<std::string> servers;  // "host:port" of server 0, 1, ...
  std::string secret;
  // Bounds every blocking wait: connecting, a pull or push waiting for other workers (bsp), a
  // clock() waiting for the slowest (ssp). Past it, the call throws TimeoutError naming what it
  // waited for.
  std::chrono::milliseconds timeout{std::chrono::seconds(120)};
};

// What a worker saw. staleness[k]: how many of this worker's acknowledged updates had
// staleness k (the last entry counts kMaxStaleness and above).
struct WorkerStats {
  static constexpr int kMaxStaleness = 64;
  std::vector<std::uint64_t> staleness = std::vector<std::uint64_t>(kMaxStaleness + 1, 0);
  std::uint64_t pushes = 0, pulls = 0;
  std::uint64_t bytesPushed = 0, bytesPulled = 0;
  std::uint64_t failovers = 0;  // servers this worker stopped using because they died
  double clockWaitSeconds = 0;  // blocked in clock()
};

// A staleness histogram (WorkerStats::staleness, ServerStats::staleness, or their sums; trailing
// zeros may be left out) summarized. Percentiles by nearest rank: the smallest k whose cumulative
// count reaches that fraction of the updates.
struct StalenessSummary {
  std::uint64_t updates = 0;
  double mean = 0;
  int p50 = 0;
  int p99 = 0;
  int max = 0;
  bool saturated = false;  // max is the last bucket (kMaxStaleness), which also holds larger values
};
StalenessSummary summarizeStaleness(const std::vector<std::uint64_t>& histogram);

class Worker {
 public:
  // Connects to every server (options.servers) and declares the table. Throws InvalidArgument
  // for a bad spec, ProtocolError when a server refuses it, TimeoutError/PeerLostError when a
  // server cannot be reached.
  static std::unique_ptr<Worker> connect(const WorkerOptions& options, const TableSpec& spec);
  // Under `gyre run --servers S`: the worker id and count are GYRE_RANK and GYRE_SIZE; the
  // servers' addresses come from the job's store (keys "ps/server/<i>"); the timeout from
  // GYRE_TIMEOUT_MS.
  static std::unique_ptr<Worker> fromEnvironment(const TableSpec& spec);

  virtual ~Worker() = default;

  virtual int workerId() const = 0;
  virtual int numWorkers() const = 0;
  virtual int numServers() const = 0;
  virtual const TableSpec& spec() const = 0;
  // Steps completed: the number of clock() calls so far.
  virtual std::int64_t steps() const = 0;

  // Every call below is asynchronous: it returns at once and the Work completes when the
  // servers answered. `values`, `grad` and `out` must hold spec().sizes[key] floats and stay
  // alive and untouched until the Work completed. Requests to one server go out in call order.

  // Sets the initial value of a key. Exactly one worker (by convention 0) initializes each key;
  // pulls and pushes of a key wait until it was initialized.
  virtual std::shared_ptr<Work> init(int key, const float* values) = 0;
  // Sends a gradient; the server applies optimizer(lr) to its slices (see Mode). Under bsp, at
  // most one push per key per step, and the Work completes when the step's update applied.
  virtual std::shared_ptr<Work> push(int key, const float* grad, float lr) = 0;
  // Fetches the parameters (see Mode for which version).
  virtual std::shared_ptr<Work> pull(int key, float* out) = 0;
  // Ends this worker's step: waits for every push still in flight, then, under ssp, blocks
  // until the slowest worker has completed at least clock() - s steps.
  virtual void clock() = 0;

  virtual WorkerStats stats() const = 0;
};

struct ServerOptions {
  int index = 0;       // this server's place in the servers list
  int numServers = 1;
  std::string bindAddress = "127.0.0.1";
  std::uint16_t port = 0;  // 0: any free port
  std::string secret;
  std::chrono::milliseconds timeout{std::chrono::seconds(120)};
};

struct ServerStats {
  std::uint64_t updates = 0;  // optimizer applications on slices this server leads
  std::uint64_t replicated = 0;  // updates applied as a backup
  std::uint64_t bytesIn = 0, bytesOut = 0;
  std::uint64_t refusedConnections = 0;  // failed the handshake or sent a malformed message
  std::vector<std::uint64_t> staleness = std::vector<std::uint64_t>(WorkerStats::kMaxStaleness + 1, 0);
};

// A server: listens, serves requests on its own threads, until destroyed.
class Server {
 public:
  static std::unique_ptr<Server> start(const ServerOptions& options);
  // A server of `gyre run --servers S` (`gyre ps-server`): reads GYRE_PS_SERVER_INDEX,
  // GYRE_PS_SERVERS, the store's address and the secret from the environment, starts on the
  // job's interface and publishes its address in the job's store as "ps/server/<index>", where
  // Worker::fromEnvironment finds it. Throws InvalidArgument for a missing or bad variable.
  static std::unique_ptr<Server> fromEnvironment();
  virtual ~Server() = default;
  virtual int index() const = 0;
  // "host:port" for workers.
  virtual std::string address() const = 0;
  virtual ServerStats stats() const = 0;
};


}  // namespace gyre::ps
