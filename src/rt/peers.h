// How this process reaches the others of its runtime: a PeerLink to each, connected on first use,
// and whether each is lost (its link broke, or it could not be reached). dispatch() runs a
// request in the process it names, here on the LocalNode or over that process's link; send()
// also places it, and places and sends it again when its process is lost before it answers.
//
// Thread-safety: every method may be called from any thread, a link's reader thread included (a
// retry starts from the answer of the try before).
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>

#include "common/mutex.h"
#include "gyre/rt/runtime.h"
#include "rt/links.h"
#include "rt/local.h"
#include "rt/wire.h"

namespace gyre::rt::detail {

class Peers {
 public:
  // `options` (rank, size, store, secret, connectTimeout) and `node` are the runtime's, and
  // outlive this.
  Peers(const RuntimeOptions& options, LocalNode& node) : o_(options), node_(node) {}
  Peers(const Peers&) = delete;
  Peers& operator=(const Peers&) = delete;

  // Runs the request in process `rank`: here, or over its link. `done` gets PeerLostError when
  // that process is lost, and an Error once close() was called.
  void dispatch(int rank, wire::Message m, Done done) GYRE_EXCLUDES(mu_);
  // Dispatches `m` to the process `place()` names; when that process is lost before it answers
  // and retries are left, places and sends it again (each try's answer starts the next).
  void send(wire::Message m, std::function<int()> place, int retriesLeft, Done done) GYRE_EXCLUDES(mu_);
  // Whether this process's link to `rank` broke (the process is lost to this one).
  bool lost(int rank) GYRE_EXCLUDES(mu_);
  // From here a call, a retry included, fails at once; the links close, failing their calls in
  // flight (whose retries find no links). Called once the LocalNode stopped.
  void close() GYRE_EXCLUDES(mu_);

 private:
  // What this process knows of another: its link once connected, and whether it is lost. The
  // slot's mutex is held while connecting, so that the others (and lost()) do not wait behind one
  // connection. A link is dropped only after its slot left slots_ (close()), so lost(), which
  // reads `connected` under mu_, never sees a freed one.
  struct Slot {
    Mutex mu;
    std::shared_ptr<PeerLink> link GYRE_GUARDED_BY(mu);
    std::atomic<bool> unreachable{false};
    std::atomic<PeerLink*> connected{nullptr};  // link, for lost() (read under Peers::mu_)
    bool lost() const {
      const PeerLink* l = connected.load();
      return unreachable.load() || (l != nullptr && !l->alive());
    }
  };

  std::shared_ptr<Slot> slot(int rank) GYRE_EXCLUDES(mu_);
  // The link to process `rank`, connected on first use. PeerLostError when it cannot be reached
  // (its address not published, or no connection within connectTimeout): it is then lost.
  std::shared_ptr<PeerLink> link(int rank) GYRE_EXCLUDES(mu_);

  const RuntimeOptions& o_;
  LocalNode& node_;
  std::atomic<bool> closing_{false};
  Mutex mu_;  // guards slots_ (the map; each slot has its own mutex)
  std::map<int, std::shared_ptr<Slot>> slots_ GYRE_GUARDED_BY(mu_);
};

}  // namespace gyre::rt::detail
