// A runtime of one or several processes: this process's LocalNode runs calls from here and, through
// its Server, from the others; a PeerLink per other process carries this one's calls to it.
#include "gyre/rt/runtime.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "common/logging.h"
#include "common/socket.h"
#include "rt/deadlines.h"
#include "rt/links.h"
#include "rt/local.h"

namespace gyre::rt {
namespace {

int threadsOf(const RuntimeOptions& options) {
  if (options.threads < 0) throw InvalidArgument("gyre::rt: RuntimeOptions::threads must not be negative");
  if (options.threads > 0) return options.threads;
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

const RuntimeOptions& checked(const RuntimeOptions& o) {
  if (o.size < 1 || o.rank < 0 || o.rank >= o.size)
    throw InvalidArgument("gyre::rt: rank " + std::to_string(o.rank) + " is not a rank of a runtime of " +
                          std::to_string(o.size) + " processes");
  if (o.size > 1 && (!o.store || o.secret.empty()))
    throw InvalidArgument("gyre::rt: a runtime of " + std::to_string(o.size) +
                          " processes needs the job's store and secret (RuntimeOptions::store, ::secret)");
  return o;
}

std::string addressKey(int rank) { return "gyre-rt/address/" + std::to_string(rank); }
std::string sharedKey(int rank) { return "gyre-rt/shm/" + std::to_string(rank); }
std::string hostKey(int rank) { return "gyre-rt/host/" + std::to_string(rank); }
std::string resourceKey(const char* what, int rank) { return std::string("gyre-rt/") + what + "/" + std::to_string(rank); }

// Sets `promise` from an answer.
detail::Done fulfil(std::shared_ptr<detail::Promise> promise) {
  return [promise = std::move(promise)](Bytes value, std::exception_ptr error) {
    if (error) {
      promise->setError(std::move(error));
    } else {
      promise->setValue(std::move(value));
    }
  };
}

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

class Runtime::Impl {
 public:
  Impl(const RuntimeOptions& o, Runtime* self) : o_(checked(o)), node_(threadsOf(o), self) {
    if (!o_.store) o_.store = createMemoryStore();  // a runtime of one keeps its books in memory
    // What this process offers actors that declare their needs: milli-cpus and bytes.
    const double cpus = o_.cpus > 0 ? o_.cpus : node_.threads();
    const std::int64_t memory = o_.memoryBytes > 0 ? o_.memoryBytes
                                                   : static_cast<std::int64_t>(::sysconf(_SC_PHYS_PAGES)) *
                                                         static_cast<std::int64_t>(::sysconf(_SC_PAGESIZE));
    o_.store->setString(resourceKey("cpus", o_.rank), std::to_string(std::llround(cpus * 1000)));
    o_.store->setString(resourceKey("memory", o_.rank), std::to_string(memory));
    o_.store->setString(hostKey(o_.rank), net::hostName());
    o_.store->setString(sharedKey(o_.rank), detail::SharedObjects::hostKey() + "/" + shared_.prefix());
    if (o_.size == 1) return;
    server_ = std::make_unique<detail::Server>(node_, o_.secret, o_.host, "gyre::rt process " + std::to_string(o_.rank));
    o_.store->setString(addressKey(o_.rank), server_->address());
  }

  ~Impl() {
    server_.reset();  // no more calls from the others
    node_.stop();     // runs what it has queued, which may still call the others
    // From here a call, a retry included, fails at once; the links close, failing their calls in
    // flight (whose retries find no links, and closing_).
    closing_.store(true);
    std::map<int, std::shared_ptr<Slot>> slots;
    {
      std::lock_guard<std::mutex> lock(linksMu_);
      slots.swap(slots_);
    }
    for (auto& [rank, slot] : slots) {
      std::lock_guard<std::mutex> lock(slot->mu);
      // Closed here, its calls failed now: a flusher that still holds the link for a moment
      // destroys an empty shell after this Impl is gone.
      if (slot->link) slot->link->close();
      slot->link.reset();
    }
  }

  // What this process knows of another: its link once connected, and whether it is lost (its
  // link broke, or it could not be reached). The slot's mutex is held while connecting, so that
  // the others (and lost()) do not wait behind one connection. A link is dropped only after its
  // slot left slots_ (~Impl), so lost(), which reads `connected` under linksMu_, never sees a
  // freed one.
  struct Slot {
    std::mutex mu;
    std::shared_ptr<detail::PeerLink> link;
    std::atomic<bool> unreachable{false};
    std::atomic<detail::PeerLink*> connected{nullptr};  // link, for lost() (read under linksMu_)
    bool lost() const {
      const detail::PeerLink* l = connected.load();
      return unreachable.load() || (l != nullptr && !l->alive());
    }
  };

  std::shared_ptr<Slot> slot(int rank) {
    std::lock_guard<std::mutex> lock(linksMu_);
    std::shared_ptr<Slot>& s = slots_[rank];
    if (!s) s = std::make_shared<Slot>();
    return s;
  }

  // The link to process `rank`, connected on first use. PeerLostError when it cannot be reached
  // (its address not published, or no connection within connectTimeout): it is then lost.
  std::shared_ptr<detail::PeerLink> link(int rank) {
    const std::shared_ptr<Slot> s = slot(rank);
    std::lock_guard<std::mutex> lock(s->mu);
    if (s->link) return s->link;
    if (s->unreachable.load()) throw PeerLostError("gyre::rt: process " + std::to_string(rank) + " cannot be reached", rank);
    try {
      const std::string address = o_.store->getString(addressKey(rank), o_.connectTimeout);
      s->link = std::make_shared<detail::PeerLink>(rank, address, o_.secret, Deadline::after(o_.connectTimeout));
      s->connected.store(s->link.get());
    } catch (const PeerLostError&) {
      s->unreachable.store(true);
      throw;
    } catch (const std::exception& e) {
      s->unreachable.store(true);
      throw PeerLostError("gyre::rt: process " + std::to_string(rank) + " cannot be reached: " + e.what(), rank);
    }
    return s->link;
  }

  // Runs the request in process `rank`: here, or over its link.
  void dispatch(int rank, wire::Message m, detail::Done done) {
    if (closing_.load())
      return done({}, std::make_exception_ptr(Error("gyre::rt: this process's runtime has stopped")));
    if (m.name.size() > wire::kMaxNameBytes || m.payload.size() > wire::kMaxPayloadBytes)
      return done({}, std::make_exception_ptr(InvalidArgument(
                          "gyre::rt: a call of " + std::to_string(m.payload.size()) + " bytes of arguments (at most " +
                          std::to_string(wire::kMaxPayloadBytes) + ")")));
    if (rank == o_.rank) {
      switch (static_cast<wire::Type>(m.type)) {
        case wire::Type::kTask: return node_.runTask(m.name, std::move(m.payload), std::move(done));
        case wire::Type::kCall: return node_.callActor(m.actor, m.name, std::move(m.payload), std::move(done));
        case wire::Type::kCreateActor:
        case wire::Type::kGetObject:
        case wire::Type::kKillActor: break;
      }
      throw Error("gyre::rt: dispatch of an actor's creation or an object here");
    }
    std::shared_ptr<detail::PeerLink> l;
    try {
      l = link(rank);
    } catch (...) {
      return done({}, std::current_exception());
    }
    l->send(std::move(m), std::move(done));
  }

  // Dispatches `m` to the process `place()` names; when that process is lost before it answers
  // and retries are left, places and sends it again (each try's answer starts the next).
  void send(wire::Message m, std::function<int()> place, int retriesLeft, detail::Done done) {
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

  // Whether this process's link to `rank` broke (the process is lost to this one).
  bool lost(int rank) {
    std::lock_guard<std::mutex> lock(linksMu_);
    const auto it = slots_.find(rank);
    return it != slots_.end() && it->second->lost();
  }

  // The next process in turn that is not lost (this one never is).
  int spread() {
    for (int tries = 0; tries < o_.size; ++tries) {
      const int r = static_cast<int>(next_.fetch_add(1) % static_cast<std::uint64_t>(o_.size));
      if (r == o_.rank || !lost(r)) return r;
    }
    return o_.rank;
  }

  // The actors this process created: what rebuilding one takes, and where it lives now.
  struct ActorEntry {
    std::string className;
    std::string name;
    Bytes args;
    int rank = 0;
    int restartsLeft = 0;
    int restarts = 0;  // times rebuilt
    double cpus = 0;   // what it declared (ActorOptions), reserved again where it is rebuilt
    std::int64_t memoryBytes = 0;
    int maxConcurrency = 1;
  };

  void sendCreate(std::uint64_t id, const ActorEntry& e) {
    if (e.rank == o_.rank) return node_.createActor(id, e.name, e.className, e.args, e.restarts, e.maxConcurrency);
    // Its calls go down the same link after the creation, so they find it; a failed creation
    // (the process lost) shows in them.
    wire::Message m;
    m.type = static_cast<std::uint8_t>(wire::Type::kCreateActor);
    m.actor = id;
    m.name = e.className + std::string(1, '\0') + e.name + std::string(1, '\0') + std::to_string(e.restarts) +
             std::string(1, '\0') + std::to_string(e.maxConcurrency);
    m.payload = e.args;
    dispatch(e.rank, std::move(m), [](Bytes, std::exception_ptr) {});
  }

  // Where actor `id` lives for its next call: its process, or, when that is lost and restarts
  // are left, a new live one it is rebuilt on first.
  int actorRank(const ActorRef& ref) {
    std::lock_guard<std::mutex> lock(actorsMu_);
    const auto it = actors_.find(ref.id);
    if (it == actors_.end()) return ref.rank;
    ActorEntry& e = it->second;
    if (e.rank != o_.rank && e.restartsLeft > 0 && lost(e.rank)) {
      // On a live process that holds what it declared (reserved there), the next in turn first.
      ActorOptions needs;
      needs.cpus = e.cpus;
      needs.memoryBytes = e.memoryBytes;
      try {
        e.rank = placeActor(needs);
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

  // Gives back what an actor reserved on process `rank` (placeActor).
  void release(int rank, double cpus, std::int64_t memoryBytes) {
    if (cpus > 0) o_.store->add(resourceKey("used-cpus", rank), -std::llround(cpus * 1000));
    if (memoryBytes > 0) o_.store->add(resourceKey("used-memory", rank), -memoryBytes);
  }

  int placeActor(const ActorOptions& a) {
    if (a.rank >= o_.size)
      throw InvalidArgument("gyre::rt: ActorOptions::rank " + std::to_string(a.rank) + " is not a process of the " +
                            std::to_string(o_.size));
    if (a.cpus < 0 || a.memoryBytes < 0)
      throw InvalidArgument("gyre::rt: ActorOptions::cpus and ::memoryBytes must not be negative");
    // The processes that may hold it, in the order they are tried.
    std::vector<int> candidates;
    std::string seen;
    if (a.rank >= 0) {
      candidates = {a.rank};
    } else if (!a.host.empty()) {
      for (int r = 0; r < o_.size; ++r) {
        const std::string host = o_.store->getString(hostKey(r), o_.connectTimeout);
        const std::string address =
            r == o_.rank || o_.size == 1 ? o_.host
                                         : net::splitHostPort(o_.store->getString(addressKey(r), o_.connectTimeout)).first;
        if (host == a.host || address == a.host) candidates.push_back(r);
        seen += (seen.empty() ? "" : ", ") + host;
      }
      if (candidates.empty())
        throw InvalidArgument("gyre::rt: no process of the runtime is on host " + a.host + " (they are on " + seen + ")");
    } else {  // the next live process in turn, then the ones after it
      const int first = spread();
      for (int i = 0; i < o_.size; ++i) candidates.push_back((first + i) % o_.size);
    }
    if (a.cpus == 0 && a.memoryBytes == 0) return candidates.front();
    const std::int64_t milli = std::llround(a.cpus * 1000);
    std::string offers;
    for (int r : candidates) {
      if (r != o_.rank && lost(r)) continue;
      const std::int64_t cpus = std::stoll(o_.store->getString(resourceKey("cpus", r), o_.connectTimeout));
      const std::int64_t memory = std::stoll(o_.store->getString(resourceKey("memory", r), o_.connectTimeout));
      offers += (offers.empty() ? "" : ", ") + std::string("process ") + std::to_string(r) + ": " +
                std::to_string(static_cast<double>(cpus) / 1000) + " cpus, " + std::to_string(memory) + " bytes";
      if (milli > cpus || a.memoryBytes > memory) continue;
      // Reserve both, atomically in the store (another process may place at the same time).
      if (o_.store->add(resourceKey("used-cpus", r), milli) > cpus) {
        release(r, a.cpus, 0);
        continue;
      }
      if (o_.store->add(resourceKey("used-memory", r), a.memoryBytes) > memory) {
        release(r, a.cpus, a.memoryBytes);
        continue;
      }
      return r;
    }
    throw InvalidArgument("gyre::rt: no process can hold an actor of " + std::to_string(a.cpus) + " cpus and " +
                          std::to_string(a.memoryBytes) + " bytes of memory now (offered, before reservations: " +
                          offers + ")");
  }

  RuntimeOptions o_;
  std::atomic<std::uint64_t> next_{0};
  std::atomic<std::uint32_t> actorCount_{0};
  std::atomic<std::uint32_t> objectCount_{0};
  // An object's number: this process's rank in the high 32 bits, then its count here.
  std::uint64_t nextObjectId() {
    return (static_cast<std::uint64_t>(o_.rank) << 32) | (objectCount_.fetch_add(1) + 1);
  }
  detail::SharedObjects shared_;

  // The prefix of `rank`'s shared-memory files, and whether it runs on this host (read from the
  // store once).
  struct SharedPrefix {
    std::string prefix;
    std::string host;  // its SharedObjects::hostKey()
    bool here = false;
  };
  SharedPrefix sharedPrefixOf(int rank) {
    std::lock_guard<std::mutex> lock(sharedMu_);
    auto it = sharedPrefixes_.find(rank);
    if (it == sharedPrefixes_.end()) {
      const std::string value = o_.store->getString(sharedKey(rank), o_.connectTimeout);  // "<host key>/<prefix>"
      const std::size_t slash = value.find('/');
      SharedPrefix p;
      if (slash != std::string::npos) {
        p.prefix = value.substr(slash + 1);
        p.host = value.substr(0, slash);
        p.here = p.host == detail::SharedObjects::hostKey();
      }
      it = sharedPrefixes_.emplace(rank, p).first;
    }
    return it->second;
  }
  std::mutex sharedMu_;
  std::map<int, SharedPrefix> sharedPrefixes_;
  std::mutex actorsMu_;
  std::map<std::uint64_t, ActorEntry> actors_;  // those created here, by id
  std::set<std::uint64_t> killedActors_;         // those of them killed
  std::atomic<bool> closing_{false};
  std::mutex linksMu_;  // guards slots_ (the map; each slot has its own mutex)
  std::map<int, std::shared_ptr<Slot>> slots_;
  detail::Deadlines deadlines_;
  detail::LocalNode node_;  // stopped by ~Impl before the links close: its last calls may use them
  std::unique_ptr<detail::Server> server_;
};

Runtime::Runtime(const RuntimeOptions& options) : impl_(std::make_unique<Impl>(options, this)) {}

Runtime* Runtime::current() { return static_cast<Runtime*>(detail::currentContext()); }

std::pair<std::uint64_t, std::shared_ptr<void>> Runtime::putBytes(Bytes value) {
  const std::uint64_t id = impl_->nextObjectId();
  return {id, impl_->node_.putObject(id, std::move(value))};
}

ObjectRef<Buffer> Runtime::putBuffer(const void* data, std::size_t size) {
  const std::span<const std::byte> whole(static_cast<const std::byte*>(data), size);
  return putBuffer(std::span<const std::span<const std::byte>>(&whole, 1));
}

ObjectRef<Buffer> Runtime::putBuffer(std::span<const std::span<const std::byte>> parts) {
  const std::uint64_t id = impl_->nextObjectId();
  std::shared_ptr<const detail::Segment> segment = impl_->shared_.put(id, parts);
  std::shared_ptr<void> inNode = impl_->node_.putSegment(id, segment);
  // The owner's last reference: no reader may open the file any more; then the node forgets it.
  std::shared_ptr<void> keep(nullptr, [inNode, segment](void*) { detail::SharedObjects::retire(*segment); });
  return ObjectRef<Buffer>(id, rank(), std::move(keep));
}

Buffer Runtime::get(const ObjectRef<Buffer>& ref, Access access) {
  if (ref.owner() == rank()) {
    std::shared_ptr<const detail::Segment> segment = impl_->node_.segment(ref.id());  // or "freed"
    if (access == Access::kReadOnly) return detail::SharedObjects::view(segment);
    if (std::optional<Buffer> mapped = detail::SharedObjects::open(impl_->shared_.prefix(), ref.id(), access))
      return *std::move(mapped);
    const Buffer view = detail::SharedObjects::view(segment);
    return Buffer::copyOf(view.data(), view.size());
  }
  if (ref.owner() >= 0 && ref.owner() < size()) {
    const Impl::SharedPrefix owner = impl_->sharedPrefixOf(ref.owner());
    if (owner.here && !owner.prefix.empty()) {
      if (std::optional<Buffer> mapped = detail::SharedObjects::open(owner.prefix, ref.id(), access))
        return *std::move(mapped);
    } else if (!owner.prefix.empty()) {  // another host: one copy fetched for this host's readers
      return detail::SharedObjects::fetchOnce(owner.host, owner.prefix, ref.id(), access,
                                              [&] { return getBytes(ref.id(), ref.owner()); });
    }
  }
  // Freed (the owner says so), or no shared memory.
  const Bytes bytes = getBytes(ref.id(), ref.owner());
  return Buffer::copyOf(bytes.data(), bytes.size());
}

Bytes Runtime::getBytes(std::uint64_t id, int owner) {
  if (owner < 0 || owner >= size())
    throw InvalidArgument("gyre::rt: get() of an ObjectRef whose owner " + std::to_string(owner) +
                          " is not a process of the " + std::to_string(size()));
  if (owner == rank()) return *impl_->node_.object(id);
  auto promise = std::make_shared<detail::Promise>();
  wire::Message m;
  m.type = static_cast<std::uint8_t>(wire::Type::kGetObject);
  m.actor = id;
  impl_->dispatch(owner, std::move(m), fulfil(promise));
  const std::chrono::milliseconds timeout = impl_->o_.callTimeout;
  if (timeout.count() > 0) impl_->deadlines_.watch(promise, timeout, "the object's owner " + std::to_string(owner));
  promise->waitUntil(std::nullopt);
  return promise->value();
}
Runtime::~Runtime() = default;

int Runtime::rank() const { return impl_->o_.rank; }
int Runtime::size() const { return impl_->o_.size; }
int Runtime::threads() const { return impl_->node_.threads(); }

std::shared_ptr<detail::Promise> Runtime::submitTask(const std::string& function, Bytes args,
                                                     const CallOptions& options) {
  detail::function(function);  // unregistered: thrown here, at the call
  if (options.rank >= size())
    throw InvalidArgument("gyre::rt: CallOptions::rank " + std::to_string(options.rank) + " is not a process of the " +
                          std::to_string(size()));
  auto promise = std::make_shared<detail::Promise>();
  wire::Message m;
  m.type = static_cast<std::uint8_t>(wire::Type::kTask);
  m.name = function;
  m.payload = std::move(args);
  // A task placed in turn runs again elsewhere when its process is lost; one placed on a rank not.
  const bool pinned = options.rank >= 0;
  impl_->send(std::move(m), [this, rank = options.rank, pinned] { return pinned ? rank : impl_->spread(); },
              pinned ? 0 : options.maxRetries, fulfil(promise));
  const std::chrono::milliseconds timeout = options.timeout.count() > 0 ? options.timeout : impl_->o_.callTimeout;
  if (timeout.count() > 0)
    impl_->deadlines_.watch(promise, timeout,
                            function + (options.rank >= 0 ? " on process " + std::to_string(options.rank) : ""));
  return promise;
}

ActorRef Runtime::createActor(const std::string& className, Bytes args, const ActorOptions& options) {
  detail::actorFactory(className);  // unregistered: thrown here
  if (options.maxRestarts < 0 || options.maxTaskRetries < 0)
    throw InvalidArgument("gyre::rt: ActorOptions::maxRestarts and ::maxTaskRetries must not be negative");
  if (options.maxConcurrency < 1 || options.maxConcurrency > 1024)
    throw InvalidArgument("gyre::rt: ActorOptions::maxConcurrency must be 1 to 1024, not " +
                          std::to_string(options.maxConcurrency));
  const ActorRef ref{(static_cast<std::uint64_t>(rank()) << 32) | (impl_->actorCount_.fetch_add(1) + 1),
                     impl_->placeActor(options), options.callTimeout, options.maxTaskRetries};
  Impl::ActorEntry entry{className, ActorHandle<void>::actorName(className, ref.id), std::move(args), ref.rank,
                         options.maxRestarts, 0, options.cpus, options.memoryBytes, options.maxConcurrency};
  impl_->sendCreate(ref.id, entry);
  // Kept to rebuild it, or to release what it reserved when it is killed.
  if (options.maxRestarts > 0 || options.cpus > 0 || options.memoryBytes > 0) {
    std::lock_guard<std::mutex> lock(impl_->actorsMu_);
    impl_->actors_.emplace(ref.id, std::move(entry));
  }
  return ref;
}

void Runtime::killActor(const ActorRef& ref) {
  int where = ref.rank;
  double cpus = 0;
  std::int64_t memory = 0;
  {
    std::lock_guard<std::mutex> lock(impl_->actorsMu_);
    if (!impl_->killedActors_.insert(ref.id).second) return;  // killed before
    if (const auto it = impl_->actors_.find(ref.id); it != impl_->actors_.end()) {
      where = it->second.rank;
      cpus = it->second.cpus;
      memory = it->second.memoryBytes;
      impl_->actors_.erase(it);  // never rebuilt
    }
  }
  if (where == rank()) {
    impl_->node_.killActor(ref.id);
  } else {
    auto promise = std::make_shared<detail::Promise>();
    wire::Message m;
    m.type = static_cast<std::uint8_t>(wire::Type::kKillActor);
    m.actor = ref.id;
    impl_->dispatch(where, std::move(m), fulfil(promise));
    const std::chrono::milliseconds timeout =
        impl_->o_.callTimeout.count() > 0 ? impl_->o_.callTimeout : impl_->o_.connectTimeout;
    // A lost process took the actor with it; one that does not answer in time keeps it running
    // but gets no more calls from here that could reach it alive.
    if (!promise->waitUntil(std::chrono::steady_clock::now() + timeout) || impl_->lost(where)) return;
  }
  impl_->release(where, cpus, memory);
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
  impl_->send(std::move(m), [this, actor] { return impl_->actorRank(actor); }, actor.maxTaskRetries,
              [promise, name](Bytes value, std::exception_ptr error) {
                if (error) try {
                    std::rethrow_exception(error);
                  } catch (const PeerLostError& e) {  // its process is gone, and the actor with it
                    error = std::make_exception_ptr(
                        ActorDiedError("gyre::rt: actor " + name + " died with its process: " + e.what()));
                  } catch (...) {
                  }
                fulfil(promise)(std::move(value), std::move(error));
              });
  const std::chrono::milliseconds timeout =
      actor.callTimeout.count() > 0 ? actor.callTimeout : impl_->o_.callTimeout;
  if (timeout.count() > 0) impl_->deadlines_.watch(promise, timeout, name + "::" + method);
  return promise;
}

}  // namespace gyre::rt
