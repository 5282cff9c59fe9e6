// The ActorTable, and Runtime's actor calls: create, call and kill.
#include "rt/actors.h"

#include <utility>

#include "common/logging.h"
#include "gyre/errors.h"
#include "rt/runtime_impl.h"

namespace gyre::rt {
namespace detail {

void ActorTable::sendCreate(std::uint64_t id, const Entry& e) {
  if (e.rank == o_.rank)
    return node_.createActor(id, e.name, e.className, e.args, e.restarts, e.maxConcurrency);
  // Its calls go down the same link after the creation, so they find it; a failed creation
  // (the process lost) shows in them.
  wire::Message m;
  m.type = static_cast<std::uint8_t>(wire::Type::kCreateActor);
  m.actor = id;
  m.name = e.className + std::string(1, '\0') + e.name + std::string(1, '\0') + std::to_string(e.restarts) +
           std::string(1, '\0') + std::to_string(e.maxConcurrency);
  m.payload = e.args;
  peers_.dispatch(e.rank, std::move(m), [](Bytes, std::exception_ptr) {});
}

void ActorTable::create(std::uint64_t id, Entry e, bool keep) {
  sendCreate(id, e);
  if (!keep) return;
  MutexLock lock(mu_);
  actors_.emplace(id, std::move(e));
}

int ActorTable::rankOf(const ActorRef& ref) {
  MutexLock lock(mu_);
  const auto it = actors_.find(ref.id);
  if (it == actors_.end()) return ref.rank;
  Entry& e = it->second;
  if (e.rank != o_.rank && e.restartsLeft > 0 && peers_.lost(e.rank)) {
    // On a live process that holds what it declared (reserved there), the next in turn first.
    ActorOptions needs;
    needs.cpus = e.cpus;
    needs.memoryBytes = e.memoryBytes;
    try {
      e.rank = placement_.placeActor(needs);
    } catch (const std::exception& error) {  // its calls fail as the actor's death
      log::warn("gyre::rt: actor ", e.name, " cannot be rebuilt: ", error.what());
      return e.rank;
    }
    --e.restartsLeft;
    ++e.restarts;
    sendCreate(ref.id, e);
  }
  return e.rank;
}

std::optional<ActorTable::Killed> ActorTable::kill(const ActorRef& ref) {
  MutexLock lock(mu_);
  if (!killed_.insert(ref.id).second) return std::nullopt;  // killed before
  Killed k{ref.rank, 0, 0};
  if (const auto it = actors_.find(ref.id); it != actors_.end()) {
    k = {it->second.rank, it->second.cpus, it->second.memoryBytes};
    actors_.erase(it);  // never rebuilt
  }
  return k;
}

}  // namespace detail

ActorRef Runtime::createActor(const std::string& className, Bytes args, const ActorOptions& options) {
  detail::actorFactory(className);  // unregistered: thrown here
  if (options.maxRestarts < 0 || options.maxTaskRetries < 0)
    throw InvalidArgument("gyre::rt: ActorOptions::maxRestarts and ::maxTaskRetries must not be negative");
  if (options.maxConcurrency < 1 || options.maxConcurrency > 1024)
    throw InvalidArgument("gyre::rt: ActorOptions::maxConcurrency must be 1 to 1024, not " +
                          std::to_string(options.maxConcurrency));
  const ActorRef ref{(static_cast<std::uint64_t>(rank()) << 32) | (impl_->actorCount_.fetch_add(1) + 1),
                     impl_->placement_.placeActor(options), options.callTimeout, options.maxTaskRetries};
  detail::ActorTable::Entry entry{className,
                                  ActorHandle<void>::actorName(className, ref.id),
                                  std::move(args),
                                  ref.rank,
                                  options.maxRestarts,
                                  0,
                                  options.cpus,
                                  options.memoryBytes,
                                  options.maxConcurrency};
  impl_->actors_.create(ref.id, std::move(entry),
                        options.maxRestarts > 0 || options.cpus > 0 || options.memoryBytes > 0);
  return ref;
}

void Runtime::killActor(const ActorRef& ref) {
  const std::optional<detail::ActorTable::Killed> killed = impl_->actors_.kill(ref);
  if (!killed) return;
  const int where = killed->rank;
  if (where == rank()) {
    impl_->node_.killActor(ref.id);
  } else {
    auto promise = std::make_shared<detail::Promise>();
    wire::Message m;
    m.type = static_cast<std::uint8_t>(wire::Type::kKillActor);
    m.actor = ref.id;
    impl_->peers_.dispatch(where, std::move(m), detail::fulfil(promise));
    const std::chrono::milliseconds timeout =
        impl_->o_.callTimeout.count() > 0 ? impl_->o_.callTimeout : impl_->o_.connectTimeout;
    // A lost process took the actor with it; one that does not answer in time keeps it running
    // but gets no more calls from here that could reach it alive.
    if (!promise->waitUntil(std::chrono::steady_clock::now() + timeout) || impl_->peers_.lost(where)) return;
  }
  impl_->placement_.release(where, killed->cpus, killed->memoryBytes);
}

std::shared_ptr<detail::Promise> Runtime::submitMethod(const ActorRef& actor, const std::string& className,
                                                       const std::string& method, Bytes args) {
  auto promise = std::make_shared<detail::Promise>();
  const std::string name = ActorHandle<void>::actorName(className, actor.id);
  wire::Message m;
  m.type = static_cast<std::uint8_t>(wire::Type::kCall);
  m.actor = actor.id;
  m.name = method;
  m.payload = std::move(args);
  // Placed where the actor lives now (rebuilt first when its process was lost and restarts are
  // left); a call in flight at the loss goes again with retries left, else fails as the actor.
  impl_->peers_.send(
      std::move(m), [this, actor] { return impl_->actors_.rankOf(actor); }, actor.maxTaskRetries,
      [promise, name](Bytes value, std::exception_ptr error) {
        if (error) try {
            std::rethrow_exception(error);
          } catch (const PeerLostError& e) {  // its process is gone, and the actor with it
            error = std::make_exception_ptr(
                ActorDiedError("gyre::rt: actor " + name + " died with its process: " + e.what()));
          } catch (...) {
          }
        detail::fulfil(promise)(std::move(value), std::move(error));
      });
  const std::chrono::milliseconds timeout =
      actor.callTimeout.count() > 0 ? actor.callTimeout : impl_->o_.callTimeout;
  if (timeout.count() > 0) impl_->deadlines_.watch(promise, timeout, name + "::" + method);
  return promise;
}

}  // namespace gyre::rt
