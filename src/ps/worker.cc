// The parameter-server client: one Link per server; each call is split into one request per
// slice, sent to the slice's primary, or to its backup once the primary is gone.
//
// Failover keeps each slice's requests in order (a server refuses a push whose sequence number
// skips one): a request that fails because its server's connection broke is only queued, with
// its issue number; recovery, which runs on the caller's thread under routeMu_ like every send,
// first closes the dead server's link (so every request in flight there has failed and been
// queued), then sends the queue in issue order to the backups. Recovery runs at the next call or
// while a caller waits.
#include <algorithm>
#include <cstring>
#include <utility>

#include "common/check.h"
#include "common/logging.h"
#include "common/mutex.h"
#include "gyre/errors.h"
#include "gyre/ps.h"
#include "ps/link.h"
#include "ps/plan.h"
#include "ps/protocol.h"

namespace gyre::ps {
namespace {

constexpr std::chrono::seconds kWaitSlack{5};

bool isPeerLost(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const PeerLostError&) {
    return true;
  } catch (...) {
    return false;
  }
}

class Core;

class PsWork final : public Work {
 public:
  PsWork(std::shared_ptr<Core> core, int parts, std::string what)
      : core_(std::move(core)), remaining_(parts), what_(std::move(what)) {}

  bool isCompleted() const override;
  bool wait(std::chrono::milliseconds timeout) override;
  std::exception_ptr exception() const override;

 private:
  friend class Core;
  std::shared_ptr<Core> core_;
  // Under core_->mu_. Not annotated: Core is incomplete here, and where Core touches them (under
  // its own mu_) the analysis could not tell that work.core_ is that Core.
  int remaining_;
  std::exception_ptr error_;
  const std::string what_;
};

// One request for one slice (or, for kClock, one server).
struct Call {
  std::uint64_t order = 0;
  Header header;
  const void* data = nullptr;  // push/init payload
  void* out = nullptr;         // pull destination
  std::size_t bytes = 0;
  std::shared_ptr<PsWork> work;
  int server = -1;
};

class Core : public std::enable_shared_from_this<Core> {
 public:
  Core(WorkerOptions options, TableSpec spec)
      : options_(std::move(options)),
        spec_(std::move(spec)),
        plan_(Plan::make(spec_.sizes, static_cast<int>(options_.servers.size()), spec_.replicate)),
        seq_(plan_.slices.size(), 0),
        baseVersion_(plan_.slices.size(), 0),
        dead_(options_.servers.size(), false),
        needRecover_(options_.servers.size(), false) {}

  void connect() GYRE_EXCLUDES(routeMu_) {
    const Deadline deadline = Deadline::after(options_.timeout);
    MutexLock route(routeMu_);  // uncontended (nobody else has the Core yet); it guards links_
    Declaration declaration{spec_, static_cast<std::uint32_t>(options_.numWorkers), options_.servers};
    const std::vector<std::uint8_t> bytes = encodeDeclaration(declaration);
    for (std::size_t s = 0; s < options_.servers.size(); ++s) {
      Header hello;
      hello.worker = static_cast<std::uint32_t>(options_.workerId);
      links_.push_back(Link::connect(options_.servers[s], options_.secret, hello, serverName(static_cast<int>(s)), deadline));
      Header declare;
      declare.type = Type::kDeclare;
      declare.worker = hello.worker;
      const iovec part{const_cast<std::uint8_t*>(bytes.data()), bytes.size()};
      links_.back()->call(declare, std::span<const iovec>(&part, 1), deadline);
    }
  }

  void shutdown() GYRE_EXCLUDES(routeMu_, mu_) {
    MutexLock route(routeMu_);
    {
      MutexLock lock(mu_);
      shuttingDown_ = true;
    }
    for (auto& link : links_) link->close();
    // Calls queued for a failover that will not come: fail them (this also breaks the cycle
    // call -> work -> core).
    std::vector<std::shared_ptr<Call>> calls;
    {
      MutexLock lock(mu_);
      calls.swap(toResend_);
    }
    for (const auto& call : calls)
      finish(*call, std::make_exception_ptr(Error("the parameter-server worker was closed")));
  }

  const TableSpec& spec() const { return spec_; }
  const WorkerOptions& options() const { return options_; }
  std::int64_t clock() const GYRE_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return clock_;
  }
  WorkerStats stats() const GYRE_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return stats_;
  }

  std::shared_ptr<Work> sliceCalls(Type type, int key, const float* in, float* out, float lr)
      GYRE_EXCLUDES(routeMu_, mu_) {
    GYRE_ARG_CHECK(key >= 0 && static_cast<std::size_t>(key) < spec_.sizes.size(), "parameter-server key ", key,
                   " out of range (the table has ", spec_.sizes.size(), " keys)");
    GYRE_ARG_CHECK(in != nullptr || out != nullptr || spec_.sizes[static_cast<std::size_t>(key)] == 0,
                   "null buffer for key ", key);
    const std::vector<int>& slices = plan_.slicesOfKey[static_cast<std::size_t>(key)];
    auto work = std::make_shared<PsWork>(shared_from_this(), static_cast<int>(slices.size()),
                                         std::string(toString(type)) + " of key " + std::to_string(key));
    MutexLock route(routeMu_);
    recoverLocked();
    for (int id : slices) {
      const Slice& slice = plan_.slices[static_cast<std::size_t>(id)];
      Call call;
      call.header.type = type;
      call.header.slice = static_cast<std::uint32_t>(id);
      call.header.worker = static_cast<std::uint32_t>(options_.workerId);
      call.header.lr = lr;
      call.bytes = slice.length * sizeof(float);
      call.work = work;
      if (type == Type::kPull) {
        call.out = out + slice.offset;
        call.header.a = spec_.mode.consistency == Consistency::kBsp ? clock() : 0;
      } else {
        call.data = in + slice.offset;
      }
      if (type == Type::kPush) {
        call.header.a = seq_[static_cast<std::size_t>(id)]++;
        MutexLock lock(mu_);
        call.header.b = baseVersion_[static_cast<std::size_t>(id)];
        ++pushesInFlight_;
      }
      issue(std::make_shared<Call>(std::move(call)));
    }
    recoverLocked();
    return work;
  }

  void endStep() GYRE_EXCLUDES(routeMu_, mu_) {
    const auto start = Clock::now();
    {
      // Every push of the step answered (under bsp: the step's update applied).
      const Deadline deadline = Deadline::after(options_.timeout + kWaitSlack);
      waitUntil([this]() GYRE_REQUIRES(mu_) { return pushesInFlight_ == 0; }, deadline,
                "its pushes to be acknowledged");
      MutexLock lock(mu_);
      if (pushError_) std::rethrow_exception(std::exchange(pushError_, nullptr));
      ++clock_;
    }
    if (spec_.mode.consistency == Consistency::kSsp) {
      std::shared_ptr<PsWork> work;
      {
        MutexLock route(routeMu_);
        recoverLocked();
        std::vector<int> live;
        for (std::size_t s = 0; s < dead_.size(); ++s)
          if (!dead_[s]) live.push_back(static_cast<int>(s));
        if (live.empty()) GYRE_THROW_PEER_LOST(-1, "ps worker ", options_.workerId, ": every parameter server is gone");
        work = std::make_shared<PsWork>(shared_from_this(), static_cast<int>(live.size()), "clock");
        for (int s : live) {
          auto call = std::make_shared<Call>();
          call->header.type = Type::kClock;
          call->header.worker = static_cast<std::uint32_t>(options_.workerId);
          call->header.a = clock();
          call->work = work;
          call->server = s;
          issue(call);
        }
        recoverLocked();
      }
      work->wait(std::chrono::milliseconds(-1));
    }
    MutexLock lock(mu_);
    stats_.clockWaitSeconds += secondsSince(start);
  }

  // PsWork::wait.
  bool waitFor(PsWork& work, std::chrono::milliseconds timeout) GYRE_EXCLUDES(routeMu_, mu_) {
    const bool bounded = timeout.count() >= 0;
    const Deadline deadline = Deadline::after(bounded ? timeout : options_.timeout + kWaitSlack);
    if (!waitUntil([&]() GYRE_REQUIRES(mu_) { return work.remaining_ == 0; }, deadline,
                   work.what_ + " to be answered", bounded))
      return false;
    MutexLock lock(mu_);
    if (work.error_) std::rethrow_exception(work.error_);
    return true;
  }

  // Guards the members marked GYRE_GUARDED_BY(mu_) below, and each PsWork's remaining_ and error_.
  mutable Mutex mu_;

 private:
  std::string serverName(int s) const {
    return "ps server " + std::to_string(s) + " (" + options_.servers[static_cast<std::size_t>(s)] + ")";
  }

  // Waits on mu_ until done() holds, running recovery when a server was lost. Past the deadline:
  // false when `quiet`, else TimeoutError.
  template <typename Done>
  bool waitUntil(Done done, Deadline deadline, const std::string& what, bool quiet = false)
      GYRE_EXCLUDES(routeMu_, mu_) {
    for (;;) {
      bool recover = false;
      {
        MutexLock lock(mu_);
        for (;;) {
          if (done()) return true;
          recover = std::find(needRecover_.begin(), needRecover_.end(), true) != needRecover_.end();
          if (recover) break;
          if (deadline.expired()) {
            if (quiet) return false;
            GYRE_THROW(TimeoutError, "ps worker ", options_.workerId, ": timed out waiting for ", what, " (",
                       options_.timeout.count(), " ms)");
          }
          cv_.waitUntil(mu_, std::min(deadline.at(), Clock::now() + std::chrono::milliseconds(500)));
        }
      }
      MutexLock route(routeMu_);
      recoverLocked();
    }
  }

  // The server a slice's requests go to now. Under routeMu_.
  int route(int sliceId) const GYRE_REQUIRES(routeMu_) {
    const Slice& slice = plan_.slices[static_cast<std::size_t>(sliceId)];
    if (!dead_[static_cast<std::size_t>(slice.primary)]) return slice.primary;
    if (slice.backup >= 0 && !dead_[static_cast<std::size_t>(slice.backup)]) return slice.backup;
    GYRE_THROW_PEER_LOST(slice.primary, "ps worker ", options_.workerId, ": key ", slice.key, " [", slice.offset, ", ",
                         slice.offset + slice.length, ") is lost: its server ", slice.primary,
                         slice.backup >= 0 ? " and its backup server " + std::to_string(slice.backup) + " are both gone"
                                           : " is gone and it has no backup (run two or more servers)");
  }

  // Sends one call. Under routeMu_.
  void issue(const std::shared_ptr<Call>& call) GYRE_REQUIRES(routeMu_) GYRE_EXCLUDES(mu_) {
    if (call->header.type != Type::kClock) {
      try {
        call->server = route(static_cast<int>(call->header.slice));
      } catch (const PeerLostError&) {
        finish(*call, std::current_exception());
        return;
      }
    }
    call->order = nextOrder_++;
    iovec part{const_cast<void*>(call->data), call->data ? call->bytes : 0};
    const std::size_t parts = call->data ? 1 : 0;
    links_[static_cast<std::size_t>(call->server)]->send(
        call->header, std::span<const iovec>(&part, parts), call->out, call->out ? call->bytes : 0,
        [this, call](Link::Outcome&& outcome) { answered(call, std::move(outcome)); });
  }

  // A Link callback (a reader thread, or the sender's when the link already broke).
  void answered(const std::shared_ptr<Call>& call, Link::Outcome&& outcome) GYRE_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    if (outcome.error && isPeerLost(outcome.error) && !shuttingDown_) {
      toResend_.push_back(call);
      needRecover_[static_cast<std::size_t>(call->server)] = true;
      cv_.notifyAll();
      return;
    }
    if (!outcome.error) {
      const Header& h = outcome.header;
      const std::size_t slice = call->header.slice;
      switch (call->header.type) {
        case Type::kPush:
          ++stats_.pushes;
          stats_.bytesPushed += call->bytes;
          ++stats_.staleness[static_cast<std::size_t>(std::clamp<std::int64_t>(h.b, 0, WorkerStats::kMaxStaleness))];
          break;
        case Type::kPull:
          ++stats_.pulls;
          stats_.bytesPulled += call->bytes;
          baseVersion_[slice] = std::max(baseVersion_[slice], h.a);
          break;
        default:
          break;
      }
    }
    finishLocked(*call, outcome.error);
  }

  void finish(Call& call, std::exception_ptr error) GYRE_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    finishLocked(call, std::move(error));
  }

  void finishLocked(Call& call, std::exception_ptr error) GYRE_REQUIRES(mu_) {
    if (error) {
      try {
        std::rethrow_exception(error);
      } catch (const std::exception& e) {
        const std::string text = "ps worker " + std::to_string(options_.workerId) + ": " + call.work->what_ + " failed: " + e.what();
        if (isPeerLost(error))
          error = std::make_exception_ptr(PeerLostError(text, call.server));
        else if (dynamic_cast<const TimeoutError*>(&e))
          error = std::make_exception_ptr(TimeoutError(text));
        else
          error = std::make_exception_ptr(Error(text));
      }
      if (!call.work->error_) call.work->error_ = error;
      if (call.header.type == Type::kPush && !pushError_) pushError_ = error;
    }
    if (call.header.type == Type::kPush) --pushesInFlight_;
    --call.work->remaining_;
    cv_.notifyAll();
  }

  // Fails over from every server whose link broke: closes its link (every request in flight
  // there is then queued), then resends the queue in issue order. Under routeMu_.
  void recoverLocked() GYRE_REQUIRES(routeMu_) GYRE_EXCLUDES(mu_) {
    for (;;) {
      int server = -1;
      {
        MutexLock lock(mu_);
        for (std::size_t s = 0; s < needRecover_.size() && server < 0; ++s)
          if (needRecover_[s]) server = static_cast<int>(s), needRecover_[s] = false;
      }
      if (server < 0) return;
      const auto s = static_cast<std::size_t>(server);
      if (!dead_[s]) {
        links_[s]->close();
        dead_[s] = true;
        MutexLock lock(mu_);
        needRecover_[s] = false;
        ++stats_.failovers;
        log::warn("ps worker ", options_.workerId, ": lost ", serverName(server),
                  "; its slices go to their backups");
      }
      std::vector<std::shared_ptr<Call>> calls;
      {
        MutexLock lock(mu_);
        auto mine = std::stable_partition(toResend_.begin(), toResend_.end(),
                                          [&](const auto& c) { return c->server != server; });
        calls.assign(mine, toResend_.end());
        toResend_.erase(mine, toResend_.end());
      }
      std::sort(calls.begin(), calls.end(), [](const auto& a, const auto& b) { return a->order < b->order; });
      for (const auto& call : calls) {
        if (call->header.type == Type::kClock) {
          finish(*call, nullptr);  // the other servers enforce the bound
          continue;
        }
        issue(call);
      }
    }
  }

  const WorkerOptions options_;
  const TableSpec spec_;
  const Plan plan_;
  Mutex routeMu_;  // sending and recovery
  std::vector<std::unique_ptr<Link>> links_ GYRE_GUARDED_BY(routeMu_);
  std::vector<std::int64_t> seq_ GYRE_GUARDED_BY(routeMu_);
  std::uint64_t nextOrder_ GYRE_GUARDED_BY(routeMu_) = 0;
  CondVar cv_;  // with mu_: a call answered, a server to recover
  std::vector<std::int64_t> baseVersion_ GYRE_GUARDED_BY(mu_);
  std::vector<bool> dead_ GYRE_GUARDED_BY(routeMu_);
  std::vector<bool> needRecover_ GYRE_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<Call>> toResend_ GYRE_GUARDED_BY(mu_);
  std::int64_t pushesInFlight_ GYRE_GUARDED_BY(mu_) = 0;
  std::exception_ptr pushError_ GYRE_GUARDED_BY(mu_);
  std::int64_t clock_ GYRE_GUARDED_BY(mu_) = 0;
  bool shuttingDown_ GYRE_GUARDED_BY(mu_) = false;
  WorkerStats stats_ GYRE_GUARDED_BY(mu_);
};

bool PsWork::isCompleted() const {
  MutexLock lock(core_->mu_);
  return remaining_ == 0;
}

bool PsWork::wait(std::chrono::milliseconds timeout) { return core_->waitFor(*this, timeout); }

std::exception_ptr PsWork::exception() const {
  MutexLock lock(core_->mu_);
  return error_;
}

class WorkerImpl final : public Worker {
 public:
  explicit WorkerImpl(std::shared_ptr<Core> core) : core_(std::move(core)) {}
  ~WorkerImpl() override { core_->shutdown(); }

  int workerId() const override { return core_->options().workerId; }
  int numWorkers() const override { return core_->options().numWorkers; }
  int numServers() const override { return static_cast<int>(core_->options().servers.size()); }
  const TableSpec& spec() const override { return core_->spec(); }
  std::int64_t steps() const override { return core_->clock(); }

  std::shared_ptr<Work> init(int key, const float* values) override {
    return core_->sliceCalls(Type::kInit, key, values, nullptr, 0);
  }
  std::shared_ptr<Work> push(int key, const float* grad, float lr) override {
    return core_->sliceCalls(Type::kPush, key, grad, nullptr, lr);
  }
  std::shared_ptr<Work> pull(int key, float* out) override {
    return core_->sliceCalls(Type::kPull, key, nullptr, out, 0);
  }
  void clock() override { core_->endStep(); }
  WorkerStats stats() const override { return core_->stats(); }

 private:
  std::shared_ptr<Core> core_;
};

void validate(const WorkerOptions& options, const TableSpec& spec) {
  GYRE_ARG_CHECK(!options.servers.empty(), "a parameter-server worker needs at least one server address");
  GYRE_ARG_CHECK(options.servers.size() <= kMaxServers, options.servers.size(), " servers (at most ", kMaxServers, ")");
  GYRE_ARG_CHECK(options.numWorkers >= 1 && static_cast<std::size_t>(options.numWorkers) <= kMaxWorkers,
                 "numWorkers must be in [1, ", kMaxWorkers, "], not ", options.numWorkers);
  GYRE_ARG_CHECK(options.workerId >= 0 && options.workerId < options.numWorkers, "worker id ", options.workerId,
                 " out of range for ", options.numWorkers, " workers");
  GYRE_ARG_CHECK(!spec.sizes.empty() && spec.sizes.size() <= kMaxKeys, "a parameter-server table needs 1 to ",
                 kMaxKeys, " keys, not ", spec.sizes.size());
  GYRE_ARG_CHECK(spec.mode.staleness >= 0, "the ssp staleness bound must be >= 0, not ", spec.mode.staleness);
  GYRE_ARG_CHECK(options.timeout.count() > 0, "the parameter-server time-out must be positive");
}

}  // namespace

std::unique_ptr<Worker> Worker::connect(const WorkerOptions& options, const TableSpec& spec) {
  validate(options, spec);
  auto core = std::make_shared<Core>(options, spec);
  core->connect();
  return std::make_unique<WorkerImpl>(std::move(core));
}

}  // namespace gyre::ps
