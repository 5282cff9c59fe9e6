#include "serve/process_replicas.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <optional>
#include <utility>

#include "common/mutex.h"
#include "gyre/errors.h"
#include "gyre/rt.h"
#include "gyre/rt/tensor.h"
#include "gyre/serve.h"

namespace gyre::serve {

// One replica, in whichever process rt placed (or rebuilt) it.
class ServeReplica {
 public:
  ServeReplica(std::string model, std::string name) : forward_(loadServedModel(model, name).makeReplica()) {}
  ::torch::Tensor forward(const ::torch::Tensor& rows) {
    at::init_num_threads();  // on whichever of rt's threads it runs: --threads, as a replica thread
    ::torch::NoGradGuard noGrad;
    return forward_(rows);
  }
  int pid() { return static_cast<int>(::getpid()); }

 private:
  Batcher::Forward forward_;
};

namespace {

int serveProcessId() { return static_cast<int>(::getpid()); }

}  // namespace

}  // namespace gyre::serve

GYRE_RT_ACTOR(gyre::serve::ServeReplica, std::string, std::string);
GYRE_RT_METHOD(gyre::serve::ServeReplica, forward);
GYRE_RT_METHOD(gyre::serve::ServeReplica, pid);
GYRE_RT_FUNCTION(gyre::serve::serveProcessId);

namespace gyre::serve {

using Clock = std::chrono::steady_clock;

struct ProcessReplicas::Shared {
  rt::Runtime& rt;
  const std::string model, name;
  Mutex mu;
  std::vector<int> onRank GYRE_GUARDED_BY(mu);  // replicas placed on each rank; -1: rank lost

  Shared(rt::Runtime& r, std::string m, std::string n)
      : rt(r), model(std::move(m)), name(std::move(n)), onRank(static_cast<std::size_t>(r.size()), 0) {}

  int place() GYRE_EXCLUDES(mu) {
    MutexLock lock(mu);
    int best = -1;
    for (int r = 1; r < static_cast<int>(onRank.size()); ++r)
      if (onRank[r] >= 0 && (best < 0 || onRank[r] < onRank[best])) best = r;
    if (best < 0) best = 0;  // every replica process is lost: the server's own process hosts it
    ++onRank[best];
    return best;
  }
  void leave(int rank) GYRE_EXCLUDES(mu) {
    MutexLock lock(mu);
    if (onRank[rank] > 0) --onRank[rank];
  }
  void lost(int rank) GYRE_EXCLUDES(mu) {
    MutexLock lock(mu);
    if (rank != 0) onRank[rank] = -1;
  }
};

namespace {

// A replica's actor and the process it lives in; killed with the last Forward that holds it.
// Used by one batcher thread at a time.
class Replica {
 public:
  explicit Replica(std::shared_ptr<ProcessReplicas::Shared> shared) : shared_(std::move(shared)) { build(); }
  Replica(const Replica&) = delete;  // one owner kills the actor
  Replica& operator=(const Replica&) = delete;
  ~Replica() {
    try {
      actor_->kill();
    } catch (const std::exception&) {  // its process is gone already: nothing to end
    }
    shared_->leave(rank_);
  }

  ::torch::Tensor forward(const ::torch::Tensor& rows) {
    try {
      return actor_->call(&ServeReplica::forward, rows).get();
    } catch (const rt::ActorDiedError& e) {
      // Its process is gone: a new actor in the live process with the fewest replicas (the
      // server's own when none is left) loads the model, and the batch runs there.
      const Clock::time_point lost = Clock::now();
      const int lostRank = rank_;
      shared_->lost(lostRank);
      build();
      ::torch::Tensor out = actor_->call(&ServeReplica::forward, rows).get();
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - lost).count();
      std::printf(
          "gyre serve: a replica's process (rank %d) was lost (%s); the replica was rebuilt in process %d (rank %d) "
          "and its batch of %lld rows answered there %.0f ms later\n",
          lostRank, e.what(), pid_, rank_, static_cast<long long>(rows.size(0)), ms);
      std::fflush(stdout);
      return out;
    }
  }

 private:
  // A new actor; its first call waits for the model to load there, so a model that does not load
  // in the replica's process fails here, naming why.
  void build() {
    rank_ = shared_->place();
    rt::ActorOptions where;
    where.rank = rank_;
    actor_.emplace(shared_->rt.actorWith<ServeReplica>(where, shared_->model, shared_->name));
    pid_ = actor_->call(&ServeReplica::pid).get();
  }

  std::shared_ptr<ProcessReplicas::Shared> shared_;
  std::optional<rt::ActorHandle<ServeReplica>> actor_;
  int rank_ = 0;
  int pid_ = 0;
};

}  // namespace

ProcessReplicas::ProcessReplicas(rt::Runtime& rt, std::string model, std::string name)
    : shared_(std::make_shared<Shared>(rt, std::move(model), std::move(name))) {
  if (rt.size() < 2) throw Error("--replica-processes: the runtime has no process but the server's");
}

ProcessReplicas::~ProcessReplicas() = default;

Batcher::Forward ProcessReplicas::make() {
  auto replica = std::make_shared<Replica>(shared_);
  return [replica](const ::torch::Tensor& rows) { return replica->forward(rows); };
}

std::vector<int> ProcessReplicas::processIds() {
  std::vector<int> pids;
  for (int r = 1; r < shared_->rt.size(); ++r) {
    try {
      rt::CallOptions on;
      on.rank = r;
      on.timeout = std::chrono::seconds(30);
      pids.push_back(shared_->rt.task(serveProcessId).options(on).remote().get());
    } catch (const Error&) {
      pids.push_back(-1);
    }
  }
  return pids;
}

}  // namespace gyre::serve
