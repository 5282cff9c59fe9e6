// What a process can run by name: remote functions and actor classes with their methods,
// registered once per binary by macros at namespace scope (every process of a job runs the same
// binary, so a name means the same code everywhere, as in Ray's C++ API):
//
//   int add(int a, int b) { return a + b; }
//   GYRE_RT_FUNCTION(add);
//
//   class Counter { public: explicit Counter(int start); int add(int n); int value() const; };
//   GYRE_RT_ACTOR(Counter, int);          // the constructor's parameter types
//   GYRE_RT_METHOD(Counter, add);
//   GYRE_RT_METHOD(Counter, value);
//
// Parameters are taken by value or const reference; they and the results go through
// serialize.h. The table is written during static initialisation and only read afterwards.
#pragma once

#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <typeindex>
#include <utility>

#include "gyre/rt/serialize.h"

namespace gyre::rt::detail {

using Invoker = std::function<Bytes(std::string_view args)>;
using ActorFactory = std::function<std::shared_ptr<void>(std::string_view args)>;
using MethodInvoker = std::function<Bytes(void* self, std::string_view args)>;

// The bytes of a function or member-function pointer: its key in the table.
template <class P>
std::string keyOf(P pointer) {
  std::string key(sizeof(P), '\0');
  std::memcpy(key.data(), &pointer, sizeof(P));
  return key;
}

// An exception that `function`'s own code threw, as the RemoteError the caller gets.
std::exception_ptr remoteError(const std::string& function, std::exception_ptr thrown);

bool addFunction(const std::string& name, std::string key, Invoker invoke);
bool addActorClass(const std::string& name, std::type_index type, ActorFactory make);
bool addMethod(const std::string& className, const std::string& method, std::string key, MethodInvoker invoke);

// Lookups; InvalidArgument naming what is missing and the macro that registers it.
const Invoker& function(const std::string& name);
std::string functionName(const std::string& key);
const ActorFactory& actorFactory(const std::string& className);
std::string actorClassName(std::type_index type);
const MethodInvoker& method(const std::string& className, const std::string& method);
std::string methodName(const std::string& className, const std::string& key);

// Calls `call` with the arguments; its result packed (nil for void). What `call` throws becomes
// a RemoteError of `name`.
template <class R, class Call>
Bytes runAndPack(const std::string& name, Call&& call) {
  try {
    if constexpr (std::is_void_v<R>) {
      call();
      return pack(msgpack::type::nil_t());
    } else {
      return pack(call());
    }
  } catch (...) {
    std::rethrow_exception(remoteError(name, std::current_exception()));
  }
}

template <class R, class... P>
bool registerFunction(const std::string& name, R (*fn)(P...)) {
  return addFunction(name, keyOf(fn), [name, fn](std::string_view bytes) {
    auto args = unpackArguments<std::tuple<std::decay_t<P>...>>(bytes, name);
    return runAndPack<R>(name, [&] { return std::apply(fn, std::move(args)); });
  });
}

template <class C, class... P>
bool registerActor(const std::string& name) {
  return addActorClass(name, std::type_index(typeid(C)), [name](std::string_view bytes) -> std::shared_ptr<void> {
    const std::string ctor = name + "'s constructor";
    auto args = unpackArguments<std::tuple<std::decay_t<P>...>>(bytes, ctor);
    try {
      return std::apply([](auto&&... a) { return std::make_shared<C>(std::move(a)...); }, std::move(args));
    } catch (...) {
      std::rethrow_exception(remoteError(ctor, std::current_exception()));
    }
  });
}

// A method's class, result and arguments (as they travel), const or not.
template <class M>
struct MethodTraits;
template <class C, class R, class... P>
struct MethodTraits<R (C::*)(P...)> {
  using Class = C;
  using Result = R;
  using Args = std::tuple<std::decay_t<P>...>;
};
template <class C, class R, class... P>
struct MethodTraits<R (C::*)(P...) const> : MethodTraits<R (C::*)(P...)> {};

template <class M>
bool registerMethod(const std::string& className, const std::string& methodName, M m) {
  using T = MethodTraits<M>;
  const std::string name = className + "::" + methodName;
  return addMethod(className, methodName, keyOf(m), [name, m](void* self, std::string_view bytes) {
    auto args = unpackArguments<typename T::Args>(bytes, name);
    auto* object = static_cast<typename T::Class*>(self);
    return runAndPack<typename T::Result>(name, [&] {
      return std::apply([&](auto&&... a) { return (object->*m)(std::move(a)...); }, std::move(args));
    });
  });
}

}  // namespace gyre::rt::detail

#define GYRE_RT_CONCAT_(a, b) a##b
#define GYRE_RT_CONCAT(a, b) GYRE_RT_CONCAT_(a, b)
// Registers the function `fn` (not overloaded) under its name.
#define GYRE_RT_FUNCTION(fn)                                                              \
  [[maybe_unused]] static const bool GYRE_RT_CONCAT(gyreRtFunction_, __COUNTER__) = \
      ::gyre::rt::detail::registerFunction(#fn, &fn)
// Registers the actor class `Class` and the parameter types of the constructor actors use.
#define GYRE_RT_ACTOR(Class, ...)                                                        \
  [[maybe_unused]] static const bool GYRE_RT_CONCAT(gyreRtActor_, __COUNTER__) =    \
      ::gyre::rt::detail::registerActor<Class __VA_OPT__(, ) __VA_ARGS__>(#Class)
// Registers the method `method` of the registered actor class `Class` (not overloaded).
#define GYRE_RT_METHOD(Class, method)                                                    \
  [[maybe_unused]] static const bool GYRE_RT_CONCAT(gyreRtMethod_, __COUNTER__) =   \
      ::gyre::rt::detail::registerMethod(#Class, #method, &Class::method)
