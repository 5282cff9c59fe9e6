// The parameter server's semantics, apart from its I/O (server.cc): the declared table, the state
// of each slice this server leads or backs, bsp/asp/ssp, replication to the backup, and the
// requests parked until they can be answered (or time out).
//
// A slice is led by its primary, or by its backup once a worker sent the backup a request for it
// (the worker lost the primary: the backup takes over, and stops accepting replicated updates).
// Every update on a slice this server leads is sent to the backup, in version order, and the
// workers are answered once the backup acknowledged it (at once when there is none, or it is gone).
//
// Thread-safety: every method may be called from any thread. One mutex per slice, one for the
// clocks, one for the declaration. Answers are written after the slice mutex is released, except
// when the backup link breaks inside BackupLink::send (they are then written under it).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/mutex.h"
#include "gyre/ps.h"
#include "ps/optimizer.h"
#include "ps/plan.h"
#include "ps/protocol.h"
#include "ps/server_backup.h"

namespace gyre::ps {

// The connection a request came from, where its answer goes.
class Peer {
 public:
  virtual ~Peer() = default;
  // Writes one response (response bit and payloadBytes are set here). Never throws: a failed
  // write marks the peer dead.
  virtual void respond(Header header, std::span<const std::uint8_t> payload) = 0;
  virtual bool dead() const = 0;
  // The worker id its hello named, or kServerPeer.
  virtual std::uint32_t worker() const = 0;
};

// One request whose payload passed the size checks.
struct Request {
  Header header;
  std::vector<float> floats;        // init, push, replicate-init; replicate: gradient, then contributors
  std::vector<std::uint8_t> bytes;  // declare
  std::shared_ptr<Peer> from;
  Clock::time_point deadline{};  // a parked request times out then
};

class ServerCore {
 public:
  explicit ServerCore(const ServerOptions& options);
  // Closes the backup link (its pending acknowledgements run here).
  ~ServerCore();
  ServerCore(const ServerCore&) = delete;
  ServerCore& operator=(const ServerCore&) = delete;

  // The elements of `slice` once the table is declared; nullopt before, or for an unknown id.
  std::optional<std::size_t> sliceLength(std::uint32_t slice) const;
  // The job's worker count; 0 before the declaration.
  std::uint32_t numWorkers() const;

  // Serves a request (not a hello): answers it now, or parks it. Throws ProtocolError when its
  // content is malformed (the caller closes the connection); nothing was changed then.
  void handle(Request request);

  // Answers the parked requests whose deadline passed with kTimeout, and drops those of dead peers.
  void expire(Clock::time_point now);

  ServerStats stats() const;
  void countIn(std::uint64_t bytes) { bytesIn_.fetch_add(bytes, std::memory_order_relaxed); }
  void countOut(std::uint64_t bytes) { bytesOut_.fetch_add(bytes, std::memory_order_relaxed); }
  void countRefused() { refused_.fetch_add(1); }

  const std::string& name() const { return name_; }

 private:
  // Where one request's answer goes.
  struct Waiter {
    std::shared_ptr<Peer> to;
    Header header;
  };
  // An answer to write once the lock that produced it is released.
  struct Reply {
    Waiter to;
    Status status = Status::kOk;
    std::int64_t a = 0, b = 0;
    std::vector<std::uint8_t> bytes;
    std::vector<float> floats;
  };
  using Outbox = std::vector<Reply>;

  struct SliceState {
    SliceState(const Slice& s, std::uint32_t numWorkers);
    Mutex mutex;
    const Slice slice;
    bool promoted GYRE_GUARDED_BY(mutex) = false;  // a backup that took the slice over
    bool initialized GYRE_GUARDED_BY(mutex) = false;
    std::int64_t version GYRE_GUARDED_BY(mutex) = 0;
    std::vector<float> params GYRE_GUARDED_BY(mutex);
    SliceOptimizerState optimizer GYRE_GUARDED_BY(mutex);
    std::vector<std::int64_t> nextSeq GYRE_GUARDED_BY(mutex);  // per worker
    // bsp: the gradients of the step being gathered, by worker (seq -1: none yet).
    std::vector<std::vector<float>> contribution GYRE_GUARDED_BY(mutex);
    std::vector<std::int64_t> contributedSeq GYRE_GUARDED_BY(mutex);
    std::uint32_t contributors GYRE_GUARDED_BY(mutex) = 0;
    float lastLr GYRE_GUARDED_BY(mutex) = 0;
    // Pushes whose step has not applied yet.
    std::vector<Request> bspWaiting GYRE_GUARDED_BY(mutex);
    // Pushes waiting for init; pulls for init or a version.
    std::vector<Request> parked GYRE_GUARDED_BY(mutex);
  };

  struct Table {
    Declaration declaration;
    Plan plan;
    std::vector<std::unique_ptr<SliceState>> slices;  // by id; null for slices on other servers
  };

  // server_core.cc
  void declare(Request& request, Outbox& out) GYRE_EXCLUDES(declareMutex_, clockMutex_);
  void clock(Request request, Outbox& out) GYRE_EXCLUDES(clockMutex_);
  bool clockDue(std::int64_t clock) const GYRE_REQUIRES(clockMutex_);
  std::int64_t minClock() const GYRE_REQUIRES(clockMutex_);
  void wakeClocks(Outbox& out) GYRE_REQUIRES(clockMutex_);
  std::string describe(const Header& h, const Table& table) const;
  void expireSlice(SliceState& s, const Table& table, Clock::time_point now, Outbox& out)
      GYRE_REQUIRES(s.mutex);
  static Reply okReply(const Request& r, std::int64_t a = 0, std::int64_t b = 0);
  Reply errorReply(const Request& r, Status status, const std::string& text) const;
  static void answer(const Waiter& w, Status status, std::int64_t a, std::int64_t b,
                     std::span<const std::uint8_t> payload = {});
  void flush(Outbox& out) const;

  // server_slice.cc
  void sliceRequest(Request request, Outbox& out);
  void initLocked(SliceState& s, Request request, Outbox& out) GYRE_REQUIRES(s.mutex);
  void pushLocked(SliceState& s, Request request, Outbox& out) GYRE_REQUIRES(s.mutex);
  void bspPushLocked(SliceState& s, Request request, Outbox& out) GYRE_REQUIRES(s.mutex);
  void pullLocked(SliceState& s, Request request, Outbox& out) GYRE_REQUIRES(s.mutex);
  void replicateLocked(SliceState& s, Request request, Outbox& out) GYRE_REQUIRES(s.mutex);
  void replicateInitLocked(SliceState& s, Request request, Outbox& out) GYRE_REQUIRES(s.mutex);
  void wakeLocked(SliceState& s, Outbox& out) GYRE_REQUIRES(s.mutex);
  bool replicates(const SliceState& s) const;
  // After an update of s (version already advanced): sends it to the backup when `update` is
  // set and answers `waiters` (a = version, b = staleness) once acknowledged, or at once.
  void finishUpdate(SliceState& s, float lr, std::shared_ptr<std::vector<float>> update,
                    std::span<const Contributor> contributors, std::vector<Waiter> waiters,
                    std::int64_t staleness, Outbox& out) GYRE_REQUIRES(s.mutex);
  void countUpdate(std::int64_t staleness);

  const ServerOptions options_;
  const std::string name_;  // "ps server I", the prefix of every message

  Mutex declareMutex_;
  std::unique_ptr<Table> tableOwner_ GYRE_GUARDED_BY(declareMutex_);  // set once
  std::atomic<const Table*> table_{nullptr};  // published after it is complete

  mutable Mutex clockMutex_;
  std::vector<std::int64_t> clocks_ GYRE_GUARDED_BY(clockMutex_);  // per worker
  std::vector<Request> clockWaiting_ GYRE_GUARDED_BY(clockMutex_);

  std::atomic<std::uint64_t> updates_{0}, replicated_{0}, bytesIn_{0}, bytesOut_{0}, refused_{0};
  std::array<std::atomic<std::uint64_t>, WorkerStats::kMaxStaleness + 1> staleness_{};

  std::unique_ptr<BackupLink> backup_;  // null with a single server
};

}  // namespace gyre::ps
