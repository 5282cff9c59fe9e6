// The result of a remote call: a Future<T> that is fulfilled once, with a value or an error.
//
//   gyre::rt::Future<int> f = rt.task(add).remote(1, 2);
//   int three = f.get();                                   // waits; rethrows the call's error
//   auto maybe = f.get(std::chrono::milliseconds(50));      // TimeoutError after 50 ms
//   gyre::rt::Future<std::string> s = f.then([](int v) { return std::to_string(v); });
//   std::vector<std::size_t> done = gyre::rt::wait(futures, 2, std::chrono::seconds(1));
//
// A call's error comes back as the exception it raised where it ran: RemoteError (with the
// exception's type and message) for one the function threw, or one of gyre's own (InvalidArgument
// for an unregistered function or arguments of another type, TimeoutError, ActorDiedError).
// Thread-safety: a Future may be copied, and its copies read, from any thread; `then` callbacks
// run on the thread that fulfils it (or at once, on the caller's, when it already is): for a call
// to another process that is the thread reading that process's answers, so a callback must not
// wait for another call (get() inside then() would wait for an answer only it can read).
#pragma once

#include <chrono>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "gyre/errors.h"
#include "gyre/rt/serialize.h"

namespace gyre::rt {

// A remote function or method threw: what() is "FUNCTION raised TYPE: MESSAGE".
class RemoteError : public Error {
 public:
  RemoteError(const std::string& function, const std::string& type, const std::string& message)
      : Error(function + " raised " + type + ": " + message), function_(function), type_(type), message_(message) {}
  const std::string& function() const { return function_; }
  const std::string& type() const { return type_; }  // the exception's type, demangled
  const std::string& message() const { return message_; }

 private:
  std::string function_, type_, message_;
};

// An actor's calls failed because the actor is gone (its constructor threw, or it died): names it.
class ActorDiedError : public Error {
 public:
  using Error::Error;
};

// Future::get(timeout) found no result in time. Nothing failed: the call goes on, and a later
// get() or wait() may have its result (Ray's GetTimeoutError). Unlike gyre::TimeoutError (an
// operation gave up: a collective's communicator is broken, an rt call with its own time-out has
// failed), this is a wait to try again.
class GetTimeoutError : public Error {
 public:
  using Error::Error;
};

namespace detail {

// An error as data: which of the types above (or InvalidArgument, ProtocolError, TimeoutError,
// PeerLostError, another gyre::Error) and what it said. A future keeps this, not the exception,
// so that every get() throws a fresh exception of its own thread (an exception object shared by
// threads is safe in libstdc++, but its reference count is invisible to ThreadSanitizer); it is
// also what crosses the wire.
struct ErrorRecord {
  int kind = 0;
  std::string function, type, message;
  int rank = -1;  // PeerLostError's
  MSGPACK_DEFINE(kind, function, type, message, rank)
};
// On the thread that holds `error`.
ErrorRecord recordOf(std::exception_ptr error);
// A new exception of the recorded type.
std::exception_ptr exceptionOf(const ErrorRecord& record);

// The shared state of a Future: MessagePack bytes or an error, set once.
class Promise {
 public:
  void setValue(Bytes value);
  void setError(std::exception_ptr error);
  // Waits until set or until `deadline` (nullopt: no limit); false on the deadline.
  bool waitUntil(std::optional<std::chrono::steady_clock::time_point> deadline) const;
  bool ready() const;
  // ready(), after writing the calls this thread queued (a caller that polls waits too).
  bool poll() const;
  // The value's bytes; throws (a new exception of) the error. Only once ready.
  const Bytes& value() const;
  // Runs `f` once set: at once (on this thread) when it is, else on the thread that sets it.
  // Returns a number for forget(), 0 when `f` already ran.
  std::uint64_t onReady(std::function<void()> f);
  // Drops the callback `id` of onReady() if it has not run.
  void forget(std::uint64_t id);

 private:
  void finish(std::unique_lock<std::mutex>& lock);
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool ready_ = false;
  std::atomic<bool> set_{false};  // ready_, for a waiter's short spin before it blocks
  Bytes value_;
  std::optional<ErrorRecord> error_;
  std::vector<std::pair<std::uint64_t, std::function<void()>>> callbacks_;
  std::uint64_t nextCallback_ = 1;
};

template <class F, class T>
struct ThenResult {
  using type = std::invoke_result_t<F, T>;
};
template <class F>
struct ThenResult<F, void> {
  using type = std::invoke_result_t<F>;
};

std::vector<std::size_t> waitSome(const std::vector<std::shared_ptr<Promise>>& promises, std::size_t k,
                                  std::chrono::milliseconds timeout);
[[noreturn]] void throwGetTimeout(std::chrono::milliseconds timeout);

}  // namespace detail

template <class T>
class Future {
 public:
  using value_type = T;
  Future() = default;
  explicit Future(std::shared_ptr<detail::Promise> promise) : promise_(std::move(promise)) {}

  bool valid() const { return promise_ != nullptr; }
  // Whether the result (or the error) is there, as gyre::Work::isCompleted().
  bool isCompleted() const { return promise_->poll(); }
  // Waits up to `timeout` for the result, as gyre::Work::wait(): true once it is there, false when
  // the time passed first (the call goes on). Never throws the call's error: get() does.
  bool wait(std::chrono::milliseconds timeout) const {
    return promise_->waitUntil(std::chrono::steady_clock::now() + timeout);
  }

  // Waits for the result; rethrows the call's error.
  T get() const {
    promise_->waitUntil(std::nullopt);
    return decode();
  }
  // As get(), but GetTimeoutError once `timeout` passed without a result (the call goes on).
  T get(std::chrono::milliseconds timeout) const {
    if (!wait(timeout)) detail::throwGetTimeout(timeout);
    return decode();
  }

  // A future of f(value) (of f() for a Future<void>); an error of this one, or one f throws,
  // becomes its error.
  template <class F>
  auto then(F f) const -> Future<typename detail::ThenResult<F, T>::type> {
    using R = typename detail::ThenResult<F, T>::type;
    auto next = std::make_shared<detail::Promise>();
    Future<T> self = *this;
    promise_->onReady([self, next, f = std::move(f)]() mutable {
      try {
        auto run = [&] {
          if constexpr (std::is_void_v<T>) {
            self.decode();
            return f();
          } else {
            return f(self.decode());
          }
        };
        if constexpr (std::is_void_v<R>) {
          run();
          next->setValue(pack(msgpack::type::nil_t()));
        } else {
          next->setValue(pack(run()));
        }
      } catch (...) {
        next->setError(std::current_exception());
      }
    });
    return Future<R>(std::move(next));
  }

  const std::shared_ptr<detail::Promise>& promise() const { return promise_; }

 private:
  T decode() const {
    if constexpr (std::is_void_v<T>) {
      promise_->value();  // rethrows
    } else {
      return unpack<T>(promise_->value(), "the result");
    }
  }
  std::shared_ptr<detail::Promise> promise_;
};

// The indices (ascending) of the futures that are ready once at least `k` of them are (k is
// capped at their number), or once `timeout` passed: then fewer. Never throws a call's error.
template <class T>
std::vector<std::size_t> wait(const std::vector<Future<T>>& futures, std::size_t k, std::chrono::milliseconds timeout) {
  std::vector<std::shared_ptr<detail::Promise>> promises;
  promises.reserve(futures.size());
  for (const Future<T>& f : futures) promises.push_back(f.promise());
  return detail::waitSome(promises, k, timeout);
}

}  // namespace gyre::rt
