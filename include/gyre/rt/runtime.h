// gyre::rt: remote functions, stateful actors and their futures (docs/runtime.md).
//
//   gyre::rt::Runtime rt;                                   // this process's workers
//   gyre::rt::Future<int> f = rt.task(add).remote(1, 2);   // add registered with GYRE_RT_FUNCTION
//   gyre::rt::ActorHandle<Counter> c = rt.actor<Counter>(10);
//   c.call(&Counter::add, 5);                              // calls to one actor run in order
//   int v = c.call(&Counter::value).get();                 // 15
//
// Every call goes through the registry by name with its arguments serialized, wherever it runs:
// a value the callee changes is its own copy, and an unregistered function or class is an
// InvalidArgument at the call. Argument types are checked against the function's or method's
// parameters at compile time; an actor's constructor arguments where it runs (an error of its
// calls). Each process runs the calls on a pool of its threads; calls to one actor run one at a
// time, in the order they were made (from one thread).
//
// A runtime of several processes (RuntimeOptions::size > 1) is one Runtime per process, every
// process running the same binary: each listens (authenticated with the job secret), publishes its
// address in the job's store, and connects to another the first time it calls it. Tasks and
// actors are spread over the processes (CallOptions, ActorOptions place them). A process that
// dies fails the calls in flight to it: PeerLostError for tasks, ActorDiedError for its actors.
//
// Thread-safety: a Runtime, its handles and futures may be used from any thread. The destructor
// waits for every call this process runs; the processes of a runtime end together (one that
// leaves while others call it is lost to them).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <typeindex>
#include <utility>

#include "gyre/rt/buffer.h"
#include "gyre/rt/future.h"
#include "gyre/rt/object_ref.h"
#include "gyre/rt/registry.h"
#include "gyre/store.h"

namespace gyre::rt {

struct RuntimeOptions {
  int threads = 0;  // worker threads that run the calls; 0: the machine's hardware threads
  // The processes of a job: this one's rank among `size`, the store they meet in and the job
  // secret that every connection proves. size 1: this process alone (store and secret unused).
  int rank = 0;
  int size = 1;
  std::shared_ptr<Store> store{};
  std::string secret{};
  std::string host = "127.0.0.1";  // the address this process listens on, which the others reach
  // How long a process waits for another to publish its address and accept its connection.
  std::chrono::milliseconds connectTimeout{30000};
  // The time-out of every call made through this runtime unless its options set one; 0: none.
  std::chrono::milliseconds callTimeout{0};
  // What this process offers actors that declare what they need (ActorOptions::cpus,
  // ::memoryBytes): 0 cpus means its worker threads; 0 bytes, this host's physical memory.
  double cpus = 0;
  std::int64_t memoryBytes = 0;
  // Whether tasks and actors placed in turn (CallOptions and ActorOptions without a rank or host)
  // may come to this process. A driver whose thread is the program's sets false (gyre.rt's in
  // Python, as Ray's driver runs none); they still come here when every other process is lost.
  bool placeHere = true;

  // The options of this process under a launcher (`gyre run`, mpirun, Slurm, torchrun; see
  // docs/launching.md): rank and size, the job's store and secret, and the address to listen on
  // (GYRE_IFACE; loopback when every process is on this host; else this host's first address that
  // is not loopback). Without launcher variables: a runtime of one. Under torchrun and Slurm rank 0
  // hosts the store, so a program that also calls gyre::init() there passes init's store instead.
  // Throws InvalidArgument for a malformed variable, and what opening the store throws.
  static RuntimeOptions fromEnvironment();
};

// Where a task runs: the process of rank `rank`, or (-1) the next live process in turn, this one
// included. A task placed in turn whose process is lost before it answers runs again on another
// live process, up to `maxRetries` times (so it may run more than once: keep tasks that can be
// retried free of side effects); one placed on a rank fails with PeerLostError.
//
// `timeout` (0: RuntimeOptions::callTimeout) fails the future with TimeoutError when no answer
// came in time, whatever the reason (a process that hangs, a queue that never drains); the call
// may still run, and its answer is then dropped.
struct CallOptions {
  int rank = -1;
  int maxRetries = 3;
  std::chrono::milliseconds timeout{0};
};

// Where an actor lives: the process of rank `rank`; else one on host `host` (its name, or the
// address it listens on); else (-1, "") the next live process in turn. An actor that declares
// `cpus` or `memoryBytes` goes to the first of those whose offer (RuntimeOptions::cpus,
// ::memoryBytes) less what earlier actors reserved there still holds them, and reserves them until
// it is killed (ActorHandle::kill) or the runtime ends. InvalidArgument, naming what the processes have, when no process fits. When its process is lost, the calls in flight to it fail with ActorDiedError;
// with restarts left (`maxRestarts`) the next call builds it again (the constructor re-run with
// its first arguments, wasRestarted() true in it) on the next live process (one that holds its
// `cpus` and `memoryBytes`, reserved there; if none does, its calls fail as its death), and goes on there.
// A call in flight when the process was lost is sent again to the rebuilt actor up to
// `maxTaskRetries` times (Ray's max_task_retries; it may then run twice), else fails.
// `callTimeout` (0: RuntimeOptions::callTimeout) bounds each of its calls as CallOptions::timeout.
struct ActorOptions {
  int rank = -1;
  std::string host{};
  int maxRestarts = 0;
  int maxTaskRetries = 0;
  double cpus = 0;
  std::int64_t memoryBytes = 0;
  std::chrono::milliseconds callTimeout{0};
  // How many of its calls may run at once, on its process's worker threads (Ray's
  // max_concurrency): 1, the default, runs them in order, one at a time; with more, they start
  // in order and overlap, so the class guards its own state. Its constructor always runs alone,
  // before any call.
  int maxConcurrency = 1;
};

// In an actor's constructor or method: whether this instance was built by a restart (the process
// of the one before was lost), so that it may reload what it had. False elsewhere.
bool wasRestarted();

// An actor: its number (the creating process's rank in the high 32 bits) and where it lives.
struct ActorRef {
  std::uint64_t id = 0;
  int rank = 0;
  std::chrono::milliseconds callTimeout{0};  // ActorOptions::callTimeout
  int maxTaskRetries = 0;                    // ActorOptions::maxTaskRetries
};

class Runtime;

// rt.task(fn): the call of one registered function; remote(args...) runs it.
template <class R, class... P>
class TaskCall {
 public:
  TaskCall(Runtime& rt, std::string name) : rt_(&rt), name_(std::move(name)) {}
  TaskCall options(const CallOptions& o) const {
    TaskCall copy = *this;
    copy.options_ = o;
    return copy;
  }
  template <class... A>
  Future<R> remote(A&&... args) const;
  const std::string& name() const { return name_; }

 private:
  Runtime* rt_;
  std::string name_;
  CallOptions options_;
};

// A live actor: calls to its registered methods. Copies refer to the same actor.
template <class C>
class ActorHandle {
 public:
  ActorHandle(Runtime& rt, ActorRef ref, std::string className)
      : rt_(&rt), ref_(ref), className_(std::move(className)) {}

  template <class M, class... A>
  Future<typename detail::MethodTraits<M>::Result> call(M method, A&&... args) const;
  // "Counter#0.3": the class, the creating process's rank and its number for this actor.
  std::string name() const { return actorName(className_, ref_.id); }
  const ActorRef& ref() const { return ref_; }
  int rank() const { return ref_.rank; }  // the process it lives in
  // Ends the actor (Ray's ray.kill): its queued calls and every later one fail with
  // ActorDiedError ("was killed"), a call already running finishes, it is not rebuilt, and the
  // cpus and memory it reserved are given back. Waits for its process to confirm (up to the
  // runtime's callTimeout, else connectTimeout). Killing it again does nothing.
  void kill() const;

  static std::string actorName(const std::string& className, std::uint64_t id) {
    return className + "#" + std::to_string(id >> 32) + "." + std::to_string(id & 0xffffffffu);
  }

 private:
  Runtime* rt_;
  ActorRef ref_;
  std::string className_;
};

class Runtime {
 public:
  explicit Runtime(const RuntimeOptions& options = {});
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // InvalidArgument when `fn` is not registered (GYRE_RT_FUNCTION).
  template <class R, class... P>
  TaskCall<R, P...> task(R (*fn)(P...)) {
    return TaskCall<R, P...>(*this, detail::functionName(detail::keyOf(fn)));
  }

  // Creates an actor of the registered class C with these constructor arguments. The
  // constructor runs before the actor's first call; if it throws, every call fails with
  // ActorDiedError carrying its error. InvalidArgument when C is not registered (GYRE_RT_ACTOR).
  template <class C, class... A>
  ActorHandle<C> actor(A&&... args) {
    return actorWith<C>(ActorOptions{}, std::forward<A>(args)...);
  }
  // The same, placed by `options`.
  template <class C, class... A>
  ActorHandle<C> actorWith(const ActorOptions& options, A&&... args) {
    const std::string name = detail::actorClassName(std::type_index(typeid(C)));
    return ActorHandle<C>(*this, createActor(name, pack(std::make_tuple(std::forward<A>(args)...)), options), name);
  }

  // Stores `value` once, in this process, and returns a reference to it that any process of the
  // runtime can read (object_ref.h). The value lives while a copy of the reference made here does.
  // A type whose SharedValue says so (a torch::Tensor, with gyre/rt/tensor.h) goes into shared
  // memory, as putBuffer's bytes do.
  template <class T>
  ObjectRef<T> put(const T& value) {
    if constexpr (SharedValue<T>::kInSharedMemory) {
      ObjectRef<Buffer> bytes = SharedValue<T>::put(*this, value);
      return ObjectRef<T>(bytes.id_, bytes.owner_, std::move(bytes.keep_));
    } else {
      auto [id, keep] = putBytes(pack(value));
      return ObjectRef<T>(id, rank(), std::move(keep));
    }
  }
  // The value of `ref`: from this process's store, or fetched from its owner. InvalidArgument when
  // it was freed; PeerLostError when its owner was lost.
  template <class T>
  T get(const ObjectRef<T>& ref) {
    if constexpr (SharedValue<T>::kInSharedMemory)
      return SharedValue<T>::get(*this, ObjectRef<Buffer>(ref.id(), ref.owner(), nullptr));
    else
      return unpack<T>(getBytes(ref.id(), ref.owner()), "an ObjectRef's value");
  }
  // Bytes in shared memory (buffer.h): copied once into a file of /dev/shm on this host; a get()
  // in this process or another one on this host maps it without a copy, one on another host
  // fetches a copy. Freed as put() values are. Error when /dev/shm has no room. With
  // Access::kCopyOnWrite, the Buffer is a private mapping that may be written (buffer.h).
  ObjectRef<Buffer> putBuffer(const void* data, std::size_t size);
  // The parts one after the other, in one object (copied once, never joined first).
  ObjectRef<Buffer> putBuffer(std::span<const std::span<const std::byte>> parts);
  ObjectRef<Buffer> put(const Buffer& value) { return putBuffer(value.data(), value.size()); }
  Buffer get(const ObjectRef<Buffer>& ref, Access access = Access::kReadOnly);

  // The Runtime whose worker thread runs the calling task or method; null on other threads.
  static Runtime* current();

  // The untyped calls the handles make; arguments as a packed tuple. InvalidArgument at once for
  // what is not registered, or a placement no process fits.
  std::shared_ptr<detail::Promise> submitTask(const std::string& function, Bytes args, const CallOptions& options = {});
  ActorRef createActor(const std::string& className, Bytes args, const ActorOptions& options = {});
  std::shared_ptr<detail::Promise> submitMethod(const ActorRef& actor, const std::string& className,
                                                const std::string& method, Bytes args);
  void killActor(const ActorRef& actor);

  int rank() const;
  int size() const;
  int threads() const;

  // put() and get() without the types.
  std::pair<std::uint64_t, std::shared_ptr<void>> putBytes(Bytes value);
  Bytes getBytes(std::uint64_t id, int owner);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

// In a task or an actor's method: the value of `ref`, through the runtime that runs the call.
// InvalidArgument on a thread that is not running one (use Runtime::get there).
template <class T>
T get(const ObjectRef<T>& ref) {
  Runtime* rt = Runtime::current();
  if (rt == nullptr)
    throw InvalidArgument("gyre::rt::get(ref) outside a task or actor method: call the Runtime's get(ref)");
  return rt->get(ref);
}

template <class R, class... P>
template <class... A>
Future<R> TaskCall<R, P...>::remote(A&&... args) const {
  static_assert(sizeof...(A) == sizeof...(P), "remote(): the function takes another number of arguments");
  return Future<R>(rt_->submitTask(name_, pack(std::tuple<std::decay_t<P>...>(std::forward<A>(args)...)), options_));
}

template <class C>
void ActorHandle<C>::kill() const {
  rt_->killActor(ref_);
}

template <class C>
template <class M, class... A>
Future<typename detail::MethodTraits<M>::Result> ActorHandle<C>::call(M method, A&&... args) const {
  using T = detail::MethodTraits<M>;
  static_assert(std::is_base_of_v<typename T::Class, C>, "call(): a method of another class");
  static_assert(sizeof...(A) == std::tuple_size_v<typename T::Args>,
                "call(): the method takes another number of arguments");
  const std::string name = detail::methodName(className_, detail::keyOf(method));
  return Future<typename T::Result>(
      rt_->submitMethod(ref_, className_, name, pack(typename T::Args(std::forward<A>(args)...))));
}

}  // namespace gyre::rt
