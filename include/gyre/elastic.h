// Elastic training: a job that survives lost workers and admits new ones without restarting the
// survivors (Horovod Elastic's model). Started by `gyre run --elastic --min-np A --max-np B`.
//
//   MyState state(...);                        // a gyre::elastic::State (TorchState for libtorch)
//   state.onReset([&](gyre::Communicator& c) { /* adapt the LR, the sampler, to c.size() */ });
//   gyre::elastic::run(state, [&](const std::shared_ptr<gyre::Communicator>& comm) {
//     // build what depends on the world (a DistributedOptimizer on comm), then train from the
//     // state's position, calling state.commit() every few steps
//   });
//
// What happens. run() joins the newest membership the launcher published (a rendezvous in the
// job's store), builds its communicator, makes every rank's state equal to the most advanced
// commit among them (sync), calls the reset callbacks and then the training function. When a
// peer dies, the training function's next collective throws PeerLostError on the survivors:
// run() rolls their state back to its last commit, joins the launcher's next membership (new
// ranks, new world size), syncs and calls the function again. New workers (replacements, hosts
// a discovery script added) wait in the rendezvous until the launcher admits them; the members
// notice the new membership at their next commit() (which then throws MembershipChanged, after
// committing, so nothing is rolled back) and everyone meets in the larger world. Work lost per
// failure is at most what was done since the last commit. See docs/elastic.md.
//
// Outside an elastic job (no GYRE_ELASTIC in the environment) run() calls the function once with
// gyre::init()'s world and lets its errors through.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gyre/communicator.h"
#include "gyre/errors.h"
#include "gyre/store.h"

namespace gyre::elastic {

// Thrown by State::commit() on every rank of a membership when the launcher has published a newer
// one (workers joined or left). The state has just been committed; run() catches it.
class MembershipChanged : public Error {
 public:
  using Error::Error;
};

struct Options {
  std::shared_ptr<Store> store;  // the job's store
  int workerId = 0;              // GYRE_ELASTIC_ID
  std::string host;              // this worker's host, for the launcher's messages; default: its name
  // How long to wait for a membership to train in (a newcomer not yet admitted, a job below
  // --min-np) before failing with TimeoutError (GYRE_ELASTIC_TIMEOUT_MS).
  Timeout timeout{std::chrono::minutes(10)};
  // Options of every membership's communicator (the name is set per membership).
  CommunicatorOptions communicator;

  // From the environment `gyre run --elastic` sets (connecting to its store), with the GYRE_*
  // knobs applied over `communicator`; nullopt when GYRE_ELASTIC is not set. Throws
  // InvalidArgument naming a malformed variable.
  static std::optional<Options> fromEnvironment(CommunicatorOptions communicator = {});
};

// One worker's side of the membership protocol (src/elastic/membership.h).
// Thread-safety: one thread.
class Rendezvous {
 public:
  explicit Rendezvous(Options options);

  // Announces this worker as ready, then waits for the newest published membership that holds it
  // and whose members all arrive, and returns that membership's communicator (rank = position in
  // the membership). A membership that a newer one overtakes before all its members arrived is
  // abandoned by everyone (decided once, in the store). Throws TimeoutError after
  // options.timeout, and Error with the launcher's reason when the launcher gave up.
  std::shared_ptr<Communicator> join();
  // Collective over the communicator join() returned: true on every rank when the launcher has
  // published a newer membership (rank 0 reads the store, then broadcasts).
  bool membershipChanged(Communicator& comm);
  // Why this worker left its membership (a lost peer, a time-out), told to the launcher at the
  // next join(): a member the others left because of it and that never says so itself is stopped
  // as unresponsive. run() calls it.
  void left(std::string why);

  std::int64_t epoch() const { return epoch_; }  // of the last join(); 0 before
  int workerId() const { return options_.workerId; }
  const Options& options() const { return options_; }

 private:
  Options options_;
  std::int64_t epoch_ = 0;
  std::int64_t abandoned_ = 0;  // memberships at or below this one are not joined again
  std::string leftBecause_;
};

// What travels, is committed and is restored. The base holds small user values; subclasses add
// their own (TorchState: a model, an optimizer, a sampler) through the three hooks.
class State {
 public:
  State() = default;
  virtual ~State() = default;
  State(const State&) = delete;
  State& operator=(const State&) = delete;

  // User values that travel with the state (epoch, step, ...). Every rank must use the same keys.
  std::map<std::string, std::int64_t> values;
  std::map<std::string, double> reals;

  // Snapshots the state in memory. Inside run(), then checks (collectively) whether the launcher
  // published a new membership and throws MembershipChanged if so. Call it on every rank at the
  // same points, every few steps.
  void commit();
  // Back to the last commit (or to the state at the first sync when there was none).
  void restore();
  // Collective: every rank takes the state of the rank with the most commits (the lowest such
  // rank), then commits it. run() calls it for each new membership.
  void sync(Communicator& comm);
  // Called by run() after each sync (the first membership's too), with the new communicator:
  // the place to adapt the learning rate and the sampler to the world size.
  void onReset(std::function<void(Communicator&)> callback);

  // Inside run(): the number of the membership being trained in (1, 2, ...); 0 outside.
  std::int64_t membership() const { return rendezvous_ != nullptr ? rendezvous_->epoch() : 0; }
  // Commits made in the whole job: sync() takes the most advanced rank's count.
  std::int64_t commits() const { return commits_; }

 protected:
  // Write what the subclass keeps in `values`/`reals` (a sampler's position) before they are
  // snapshotted or sent.
  virtual void captureValues() {}
  // Copy the subclass's state into its snapshot / back from it (`values` already restored) /
  // broadcast it from `root` (`values` already received).
  virtual void saveState() {}
  virtual void restoreState() {}
  virtual void broadcastState(Communicator& comm, int root) { (void)comm, (void)root; }

 private:
  friend void run(State&, const std::function<void(const std::shared_ptr<Communicator>&)>&, Options);
  friend void run(State&, const std::function<void(const std::shared_ptr<Communicator>&)>&);
  void snapshot();
  // sync(), then the reset callbacks: the start of every membership.
  void meet(Communicator& comm);

  std::map<std::string, std::int64_t> committedValues_;
  std::map<std::string, double> committedReals_;
  std::int64_t commits_ = 0;
  bool saved_ = false;  // a snapshot exists (a commit or a sync)
  std::vector<std::function<void(Communicator&)>> resetCallbacks_;
  // Inside run(): the rendezvous and communicator commit() checks for a new membership.
  Rendezvous* rendezvous_ = nullptr;
  Communicator* comm_ = nullptr;
};

using TrainFunction = std::function<void(const std::shared_ptr<Communicator>&)>;

// Runs `train` until it returns on a membership, as the header comment says. Errors other than
// PeerLostError, TimeoutError and MembershipChanged (a bug, bad data) end it on this worker.
void run(State& state, const TrainFunction& train, Options options);
// With Options::fromEnvironment(), or, outside an elastic job, once with gyre::init()'s world.
void run(State& state, const TrainFunction& train);

}  // namespace gyre::elastic
