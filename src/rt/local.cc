#include "rt/local.h"

#include <algorithm>

#include "gyre/errors.h"
#include "gyre/rt/future.h"
#include "gyre/rt/registry.h"
#include "gyre/rt/runtime.h"

namespace gyre::rt {
namespace {

// The actor whose constructor or method this thread runs: whether it was restarted.
thread_local bool currentActorRestarted = false;

// While alive, this thread runs a call of an actor built `restarts` times before.
class InActor {
 public:
  explicit InActor(int restarts) : was_(currentActorRestarted) { currentActorRestarted = restarts > 0; }
  ~InActor() { currentActorRestarted = was_; }
  InActor(const InActor&) = delete;
  InActor& operator=(const InActor&) = delete;

 private:
  bool was_;
};

}  // namespace

bool wasRestarted() {
  return currentActorRestarted;
}

namespace detail {

namespace {
thread_local void* workerContext = nullptr;
}  // namespace

void* currentContext() {
  return workerContext;
}

LocalNode::LocalNode(int threads, void* context) {
  for (int i = 0; i < threads; ++i)
    workers_.emplace_back([this, context] {
      workerContext = context;
      work();
    });
}

std::shared_ptr<void> LocalNode::putObject(std::uint64_t id, Bytes value) {
  {
    MutexLock lock(objects_->mu);
    objects_->values[id] = std::make_shared<const Bytes>(std::move(value));
  }
  std::weak_ptr<Objects> objects = objects_;
  return std::shared_ptr<void>(nullptr, [objects, id](void*) {
    if (auto o = objects.lock()) {
      MutexLock lock(o->mu);
      o->values.erase(id);
    }
  });
}

std::shared_ptr<void> LocalNode::putSegment(std::uint64_t id, std::shared_ptr<const Segment> segment) {
  {
    MutexLock lock(objects_->mu);
    objects_->segments[id] = std::move(segment);
  }
  std::weak_ptr<Objects> objects = objects_;
  return std::shared_ptr<void>(nullptr, [objects, id](void*) {
    std::shared_ptr<const Segment> last;  // released after the lock: it may go back to the pool
    if (auto o = objects.lock()) {
      MutexLock lock(o->mu);
      const auto it = o->segments.find(id);
      if (it == o->segments.end()) return;
      last = std::move(it->second);
      o->segments.erase(it);
    }
  });
}

namespace {

[[noreturn]] void freed(std::uint64_t id) {
  throw InvalidArgument("gyre::rt: object " + std::to_string(id >> 32) + "." +
                        std::to_string(id & 0xffffffffu) +
                        " was freed: no ObjectRef to it remains in the process that put it");
}

}  // namespace

std::shared_ptr<const Bytes> LocalNode::object(std::uint64_t id) const {
  std::shared_ptr<const Segment> segment;
  {
    MutexLock lock(objects_->mu);
    if (const auto it = objects_->values.find(id); it != objects_->values.end()) return it->second;
    const auto s = objects_->segments.find(id);
    if (s == objects_->segments.end()) freed(id);
    segment = s->second;
  }
  return std::make_shared<const Bytes>(SharedObjects::copy(*segment));
}

std::shared_ptr<const Segment> LocalNode::segment(std::uint64_t id) const {
  MutexLock lock(objects_->mu);
  const auto it = objects_->segments.find(id);
  if (it == objects_->segments.end()) freed(id);
  return it->second;
}

void LocalNode::stop() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  cv_.notifyAll();
  for (std::thread& t : workers_)
    if (t.joinable()) t.join();
}

bool LocalNode::post(std::function<void()> job) {
  {
    MutexLock lock(mu_);
    if (closed_) return false;
    queue_.push_back(std::move(job));
  }
  cv_.notifyOne();
  return true;
}

void LocalNode::work() {
  for (;;) {
    std::function<void()> job;
    {
      MutexLock lock(mu_);
      cv_.wait(mu_, [this]() GYRE_REQUIRES(mu_) { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) {  // stopping, and every call made has run
        closed_ = true;
        return;
      }
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    job();
  }
}

void LocalNode::postToActor(const std::shared_ptr<Actor>& actor, std::function<void()> call) {
  {
    MutexLock lock(actor->mu);
    actor->mailbox.push_back(std::move(call));
    if (actor->drainers >= actor->concurrency) return;
    ++actor->drainers;
  }
  // Stopped (a call that raced with the end): its calls run here rather than never.
  if (!post([this, actor] { drain(actor); })) drain(actor);
}

// Runs the actor's calls one at a time until its mailbox is empty; an actor of concurrency N has
// up to N drains at once, each taking the next call. A long mailbox yields the worker after a
// batch, so that one busy actor does not hold a worker from the others.
void LocalNode::drain(const std::shared_ptr<Actor>& actor) {
  constexpr int kBatch = 64;
  for (int n = 0;; ++n) {
    std::function<void()> call;
    {
      MutexLock lock(actor->mu);
      if (actor->mailbox.empty()) {
        --actor->drainers;
        return;
      }
      if (n == kBatch) break;
      call = std::move(actor->mailbox.front());
      actor->mailbox.pop_front();
    }
    call();
  }
  if (!post([this, actor] { drain(actor); })) drain(actor);
}

void LocalNode::runTask(const std::string& function, Bytes args, Done done) {
  auto failed = std::make_shared<Done>(done);
  const bool queued = post([function, args = std::move(args), done = std::move(done)] {
    Bytes value;
    std::exception_ptr error;
    try {
      value = detail::function(function)(args);
    } catch (...) {
      error = std::current_exception();
    }
    done(std::move(value), error);
  });
  if (!queued) (*failed)({}, std::make_exception_ptr(Error("gyre::rt: this process's runtime has stopped")));
}

void LocalNode::createActor(std::uint64_t id, const std::string& name, const std::string& className,
                            Bytes args, int restarts, int concurrency) {
  auto actor = std::make_shared<Actor>();
  actor->name = name;
  actor->className = className;
  actor->restarts = restarts;
  {
    MutexLock lock(mu_);
    actors_[id] = actor;
  }
  // The constructor runs alone (the actor's concurrency is 1 until it returns); then up to
  // `concurrency` calls at once, so more drains start for the calls that queued meanwhile.
  postToActor(actor, [this, actor, concurrency, args = std::move(args)] {
    {
      const InActor in(actor->restarts);
      try {
        if (!actor->killed.load()) actor->instance = actorFactory(actor->className)(args);
      } catch (const std::exception& e) {
        actor->died =
            std::make_exception_ptr(ActorDiedError("gyre::rt: actor " + actor->name + " died: " + e.what()));
      }
    }
    int more = 0;
    {
      MutexLock lock(actor->mu);
      actor->concurrency = std::max(1, concurrency);
      more = std::max(
          0, std::min(actor->concurrency - actor->drainers, static_cast<int>(actor->mailbox.size())));
      actor->drainers += more;
    }
    for (int i = 0; i < more; ++i)
      if (!post([this, actor] { drain(actor); })) drain(actor);
  });
}

namespace {

std::exception_ptr killedError(const std::string& name) {
  return std::make_exception_ptr(ActorDiedError("gyre::rt: actor " + name + " was killed"));
}

}  // namespace

void LocalNode::killActor(std::uint64_t id) {
  std::shared_ptr<Actor> actor;
  {
    MutexLock lock(mu_);
    const auto it = actors_.find(id);
    if (it == actors_.end()) return;
    actor = std::move(it->second);
    actors_.erase(it);
    killed_[id] = actor->name;
  }
  actor->killed.store(true);
}

void LocalNode::callActor(std::uint64_t id, const std::string& method, Bytes args, Done done) {
  std::shared_ptr<Actor> actor;
  std::exception_ptr gone;
  {
    MutexLock lock(mu_);
    if (const auto it = actors_.find(id); it != actors_.end())
      actor = it->second;
    else if (const auto k = killed_.find(id); k != killed_.end())
      gone = killedError(k->second);
    else
      gone = std::make_exception_ptr(
          InvalidArgument("gyre::rt: no actor #" + std::to_string(id) + " lives here"));
  }
  if (gone) return done({}, gone);
  postToActor(actor, [actor, method, args = std::move(args), done = std::move(done)] {
    Bytes value;
    std::exception_ptr error = actor->killed.load() ? killedError(actor->name) : actor->died;
    if (!error) {
      const InActor in(actor->restarts);
      try {
        value = detail::method(actor->className, method)(actor->instance.get(), args);
      } catch (...) {
        error = std::current_exception();
      }
    }
    done(std::move(value), error);
  });
}

}  // namespace detail
}  // namespace gyre::rt
