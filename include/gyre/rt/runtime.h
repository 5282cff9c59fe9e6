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
// calls). This runtime runs the calls on a pool of threads of this process; calls to one actor
// run one at a time, in the order they were made (from one thread).
//
// Thread-safety: a Runtime, its handles and futures may be used from any thread. The destructor
// waits for every call made through it to finish.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <typeindex>
#include <utility>

#include "gyre/rt/future.h"
#include "gyre/rt/registry.h"

namespace gyre::rt {

struct RuntimeOptions {
  int threads = 0;  // worker threads that run the calls; 0: the machine's hardware threads
};

class Runtime;

// rt.task(fn): the call of one registered function; remote(args...) runs it.
template <class R, class... P>
class TaskCall {
 public:
  TaskCall(Runtime& rt, std::string name) : rt_(&rt), name_(std::move(name)) {}
  template <class... A>
  Future<R> remote(A&&... args) const;
  const std::string& name() const { return name_; }

 private:
  Runtime* rt_;
  std::string name_;
};

// A live actor: calls to its registered methods. Copies refer to the same actor.
template <class C>
class ActorHandle {
 public:
  ActorHandle(Runtime& rt, std::uint64_t id, std::string className)
      : rt_(&rt), id_(id), className_(std::move(className)) {}

  template <class M, class... A>
  Future<typename detail::MethodTraits<M>::Result> call(M method, A&&... args) const;
  // "Counter#3": the class and the runtime's number for this actor.
  std::string name() const { return className_ + "#" + std::to_string(id_); }
  std::uint64_t id() const { return id_; }

 private:
  Runtime* rt_;
  std::uint64_t id_;
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
    const std::string name = detail::actorClassName(std::type_index(typeid(C)));
    return ActorHandle<C>(*this, createActor(name, pack(std::make_tuple(std::forward<A>(args)...))), name);
  }

  // The untyped calls the handles make; arguments as a packed tuple.
  std::shared_ptr<detail::Promise> submitTask(const std::string& function, Bytes args);
  std::uint64_t createActor(const std::string& className, Bytes args);
  std::shared_ptr<detail::Promise> submitMethod(std::uint64_t actor, const std::string& method, Bytes args);

  int threads() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

template <class R, class... P>
template <class... A>
Future<R> TaskCall<R, P...>::remote(A&&... args) const {
  static_assert(sizeof...(A) == sizeof...(P), "remote(): the function takes another number of arguments");
  return Future<R>(rt_->submitTask(name_, pack(std::tuple<std::decay_t<P>...>(std::forward<A>(args)...))));
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
      rt_->submitMethod(id_, name, pack(typename T::Args(std::forward<A>(args)...))));
}

}  // namespace gyre::rt
