// The connections between the processes of a runtime. A Server listens (behind the AuthGate)
// and runs the requests of the other processes on this one's LocalNode, answering each when it
// finishes; a PeerLink is this process's connection to one other, with any number of calls in
// flight, each answered by id on the link's reader thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>  // std::once_flag
#include <string>
#include <thread>
#include <vector>

#include "common/auth_gate.h"
#include "common/mutex.h"
#include "common/socket.h"
#include "rt/local.h"
#include "rt/wire.h"

namespace gyre::rt::detail {

class Server {
 public:
  // Listens on `host` (a free port) and serves until destroyed. `name` is for the log ("rt rank 1").
  Server(LocalNode& node, const std::string& secret, const std::string& host, std::string name);
  // Stops accepting, closes every connection (answers still to come are dropped) and joins.
  ~Server();
  std::string address() const { return address_; }

 private:
  struct Session;
  void start(net::Fd fd, const std::string& peer) GYRE_EXCLUDES(mu_);
  void serve(const std::shared_ptr<Session>& session);
  void handle(const std::shared_ptr<Session>& session, wire::Message request);

  LocalNode& node_;
  const std::string name_;
  net::Fd listen_;
  std::string address_;
  Mutex mu_;
  std::list<std::pair<std::shared_ptr<Session>, std::thread>> sessions_ GYRE_GUARDED_BY(mu_);
  bool stopping_ GYRE_GUARDED_BY(mu_) = false;
  std::unique_ptr<auth::AuthGate> gate_;  // last: it hands connections to the rest
};

// Sends are written at once, except in a burst: a thread's send that follows its previous one
// within kBurstGap (20 µs) without a wait in between joins a queue that goes out in one gathered
// write when it holds 64, when the thread next waits for an answer (flushThisThread(), called by
// every wait of a Future), or else from a flusher thread within ~200 µs. A sync call (send, then
// wait) is never queued; a loop of async calls costs a system call per 64 of them, not per call.
class PeerLink : public std::enable_shared_from_this<PeerLink> {
 public:
  // Connects to process `rank` at `address` and authenticates. Throws TimeoutError,
  // ProtocolError (a wrong secret) or PeerLostError.
  PeerLink(int rank, const std::string& address, const std::string& secret, Deadline deadline);
  // Closes the connection; calls still in flight fail with PeerLostError.
  ~PeerLink();
  PeerLink(const PeerLink&) = delete;
  PeerLink& operator=(const PeerLink&) = delete;

  // Sends a request (its id is set here); `done` runs once with the answer, on the reader thread,
  // or with PeerLostError when the link broke (at once when it already had).
  void send(wire::Message request, Done done) GYRE_EXCLUDES(mu_, writeMu_);
  bool alive() const { return !dead_.load(); }
  // Writes what is queued.
  void flush() GYRE_EXCLUDES(writeMu_);
  // Writes what is queued if no other thread is writing; false when one is (it is then tried again).
  bool tryFlush() GYRE_EXCLUDES(writeMu_);
  // Writes what is queued, closes the connection and fails the calls in flight, on this thread,
  // now (the destructor does the same when it has not). Idempotent.
  void close() GYRE_EXCLUDES(mu_, writeMu_);

 private:
  void readLoop() GYRE_EXCLUDES(mu_);
  void fail(const std::string& why) GYRE_EXCLUDES(mu_);
  void writeQueuedLocked() GYRE_REQUIRES(writeMu_);

  const int rank_;
  const std::string name_;  // "process 1 (127.0.0.1:40123)"
  net::Fd fd_;
  Mutex writeMu_;
  std::vector<wire::Message> queued_ GYRE_GUARDED_BY(writeMu_);
  Mutex mu_;
  std::map<std::uint64_t, Done> pending_ GYRE_GUARDED_BY(mu_);
  std::uint64_t nextId_ GYRE_GUARDED_BY(mu_) = 1;
  std::string lostWhy_ GYRE_GUARDED_BY(mu_);
  std::atomic<bool> dead_{false};
  std::once_flag closed_;
  std::thread reader_;
};

// Writes the sends this thread queued in its burst (see PeerLink), and ends the burst: called
// before a thread waits for an answer.
void flushThisThread();

}  // namespace gyre::rt::detail
