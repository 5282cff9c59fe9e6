// The runtime of one process: a pool of worker threads that runs the calls, and the actors,
// each with a mailbox that one worker at a time drains in order.
#include "gyre/rt/runtime.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

namespace gyre::rt {

namespace {

// An actor: its instance (once constructed) and its calls not yet run.
struct Actor {
  std::string name;       // "Counter#3"
  std::string className;
  std::shared_ptr<void> instance;
  std::exception_ptr died;  // set when the constructor threw: every call fails with it
  std::mutex mu;
  std::deque<std::function<void()>> mailbox;
  bool draining = false;  // a worker is running its calls
};

}  // namespace

class Runtime::Impl {
 public:
  explicit Impl(int threads) {
    for (int i = 0; i < threads; ++i) workers_.emplace_back([this] { work(); });
  }

  ~Impl() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : workers_) t.join();
  }

  void post(std::function<void()> job) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(job));
    }
    cv_.notify_one();
  }

  // Appends to the actor's mailbox; the first call of an idle actor schedules its draining.
  void postToActor(const std::shared_ptr<Actor>& actor, std::function<void()> call) {
    {
      std::lock_guard<std::mutex> lock(actor->mu);
      actor->mailbox.push_back(std::move(call));
      if (actor->draining) return;
      actor->draining = true;
    }
    post([this, actor] { drain(actor); });
  }

  std::shared_ptr<Actor> actor(std::uint64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = actors_.find(id);
    if (it == actors_.end()) throw InvalidArgument("gyre::rt: no actor #" + std::to_string(id) + " in this runtime");
    return it->second;
  }

  std::uint64_t addActor(std::shared_ptr<Actor> actor) {
    std::lock_guard<std::mutex> lock(mu_);
    const std::uint64_t id = nextActor_++;
    actor->name = actor->className + "#" + std::to_string(id);
    actors_[id] = std::move(actor);
    return id;
  }

  int threads() const { return static_cast<int>(workers_.size()); }

 private:
  void work() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping, and every call made has run
        job = std::move(queue_.front());
        queue_.pop_front();
      }
      job();
    }
  }

  // Runs the actor's calls one at a time until its mailbox is empty. A long mailbox yields the
  // worker after a batch, so that one busy actor does not hold a worker from the others.
  void drain(const std::shared_ptr<Actor>& actor) {
    constexpr int kBatch = 64;
    for (int n = 0;; ++n) {
      std::function<void()> call;
      {
        std::lock_guard<std::mutex> lock(actor->mu);
        if (actor->mailbox.empty()) {
          actor->draining = false;
          return;
        }
        if (n == kBatch) break;
        call = std::move(actor->mailbox.front());
        actor->mailbox.pop_front();
      }
      call();
    }
    post([this, actor] { drain(actor); });
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::map<std::uint64_t, std::shared_ptr<Actor>> actors_;
  std::uint64_t nextActor_ = 1;
  std::vector<std::thread> workers_;  // last: they start once the rest exists
};

namespace {

int threadsOf(const RuntimeOptions& options) {
  if (options.threads < 0) throw InvalidArgument("gyre::rt: RuntimeOptions::threads must not be negative");
  if (options.threads > 0) return options.threads;
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

}  // namespace

Runtime::Runtime(const RuntimeOptions& options) : impl_(std::make_unique<Impl>(threadsOf(options))) {}
Runtime::~Runtime() = default;

int Runtime::threads() const { return impl_->threads(); }

std::shared_ptr<detail::Promise> Runtime::submitTask(const std::string& function, Bytes args) {
  const detail::Invoker& invoke = detail::function(function);  // unregistered: thrown here, at the call
  auto promise = std::make_shared<detail::Promise>();
  impl_->post([&invoke, promise, args = std::move(args)] {
    try {
      promise->setValue(invoke(args));
    } catch (...) {
      promise->setError(std::current_exception());
    }
  });
  return promise;
}

std::uint64_t Runtime::createActor(const std::string& className, Bytes args) {
  const detail::ActorFactory& make = detail::actorFactory(className);
  auto actor = std::make_shared<Actor>();
  actor->className = className;
  const std::uint64_t id = impl_->addActor(actor);
  // The constructor is the actor's first call: the ones made meanwhile queue behind it.
  impl_->postToActor(actor, [actor, &make, args = std::move(args)] {
    try {
      actor->instance = make(args);
    } catch (const std::exception& e) {
      actor->died = std::make_exception_ptr(ActorDiedError("gyre::rt: actor " + actor->name +
                                                           " died: " + e.what()));
    }
  });
  return id;
}

std::shared_ptr<detail::Promise> Runtime::submitMethod(std::uint64_t id, const std::string& name, Bytes args) {
  const std::shared_ptr<Actor> actor = impl_->actor(id);
  const detail::MethodInvoker& invoke = detail::method(actor->className, name);
  auto promise = std::make_shared<detail::Promise>();
  impl_->postToActor(actor, [actor, &invoke, promise, args = std::move(args)] {
    if (actor->died) return promise->setError(actor->died);
    try {
      promise->setValue(invoke(actor->instance.get(), args));
    } catch (...) {
      promise->setError(std::current_exception());
    }
  });
  return promise;
}

}  // namespace gyre::rt
