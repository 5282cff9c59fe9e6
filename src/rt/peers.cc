#include "rt/peers.h"

#include <string>
#include <utility>

#include "common/clock.h"
#include "gyre/errors.h"
#include "rt/store_keys.h"

namespace gyre::rt::detail {
namespace {

// Whether `error` says the process that was to answer is lost.
bool isLostProcess(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const PeerLostError&) {
    return true;
  } catch (...) {
    return false;
  }
}

}  // namespace

std::shared_ptr<Peers::Slot> Peers::slot(int rank) {
  MutexLock lock(mu_);
  std::shared_ptr<Slot>& s = slots_[rank];
  if (!s) s = std::make_shared<Slot>();
  return s;
}

std::shared_ptr<PeerLink> Peers::link(int rank) {
  const std::shared_ptr<Slot> s = slot(rank);
  MutexLock lock(s->mu);
  if (s->link) return s->link;
  if (s->unreachable.load())
    throw PeerLostError("gyre::rt: process " + std::to_string(rank) + " cannot be reached", rank);
  try {
    const std::string address = o_.store->getString(addressKey(rank), o_.connectTimeout);
    s->link = std::make_shared<PeerLink>(rank, address, o_.secret, Deadline::after(o_.connectTimeout));
    s->connected.store(s->link.get());
  } catch (const PeerLostError&) {
    s->unreachable.store(true);
    throw;
  } catch (const std::exception& e) {
    s->unreachable.store(true);
    throw PeerLostError("gyre::rt: process " + std::to_string(rank) + " cannot be reached: " + e.what(),
                        rank);
  }
  return s->link;
}

void Peers::dispatch(int rank, wire::Message m, Done done) {
  if (closing_.load())
    return done({}, std::make_exception_ptr(Error("gyre::rt: this process's runtime has stopped")));
  if (m.name.size() > wire::kMaxNameBytes || m.payload.size() > wire::kMaxPayloadBytes)
    return done({}, std::make_exception_ptr(InvalidArgument(
                        "gyre::rt: a call of " + std::to_string(m.payload.size()) +
                        " bytes of arguments (at most " + std::to_string(wire::kMaxPayloadBytes) + ")")));
  if (rank == o_.rank) {
    switch (static_cast<wire::Type>(m.type)) {
      case wire::Type::kTask:
        return node_.runTask(m.name, std::move(m.payload), std::move(done));
      case wire::Type::kCall:
        return node_.callActor(m.actor, m.name, std::move(m.payload), std::move(done));
      case wire::Type::kCreateActor:
      case wire::Type::kGetObject:
      case wire::Type::kKillActor:
        break;
    }
    throw Error("gyre::rt: dispatch of an actor's creation or an object here");
  }
  std::shared_ptr<PeerLink> l;
  try {
    l = link(rank);
  } catch (...) {
    return done({}, std::current_exception());
  }
  l->send(std::move(m), std::move(done));
}

void Peers::send(wire::Message m, std::function<int()> place, int retriesLeft, Done done) {
  wire::Message again = retriesLeft > 0 ? m : wire::Message{};  // kept for another try
  const int rank = place();
  dispatch(rank, std::move(m),
           [this, again = std::move(again), place = std::move(place), retriesLeft, done = std::move(done)](
               Bytes value, std::exception_ptr error) mutable {
             if (error && retriesLeft > 0 && isLostProcess(error))
               return send(std::move(again), std::move(place), retriesLeft - 1, std::move(done));
             done(std::move(value), std::move(error));
           });
}

bool Peers::lost(int rank) {
  MutexLock lock(mu_);
  const auto it = slots_.find(rank);
  return it != slots_.end() && it->second->lost();
}

void Peers::close() {
  closing_.store(true);
  std::map<int, std::shared_ptr<Slot>> slots;
  {
    MutexLock lock(mu_);
    slots.swap(slots_);
  }
  for (auto& [rank, slot] : slots) {
    MutexLock lock(slot->mu);
    // Closed here, its calls failed now: a flusher that still holds the link for a moment
    // destroys an empty shell after the runtime is gone.
    if (slot->link) slot->link->close();
    slot->link.reset();
  }
}

}  // namespace gyre::rt::detail
