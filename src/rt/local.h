// What runs the calls in one process of a runtime: a pool of worker threads for tasks, and the
// actors that live here, each with a mailbox that one worker at a time drains in order. Calls
// arrive from this process (Runtime) and from the others (server.h) alike.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "gyre/rt/serialize.h"
#include "rt/shared_objects.h"

namespace gyre::rt::detail {

// Called once with a call's packed result, or with its error (then `value` is empty).
using Done = std::function<void(Bytes value, std::exception_ptr error)>;

// The context of the LocalNode whose worker runs this thread; null on other threads.
void* currentContext();

class LocalNode {
 public:
  // Each worker thread runs with `context` as the value of currentContext() (the Runtime).
  LocalNode(int threads, void* context);
  // Runs every call already queued (and those they queue), then stops the workers; from then on
  // a call fails at once ("this process's runtime has stopped"). Idempotent.
  void stop() GYRE_EXCLUDES(mu_);
  ~LocalNode() { stop(); }
  LocalNode(const LocalNode&) = delete;
  LocalNode& operator=(const LocalNode&) = delete;

  // Each throws nothing: an unregistered name or an unknown actor becomes `done`'s error.
  void runTask(const std::string& function, Bytes args, Done done) GYRE_EXCLUDES(mu_);
  // Creates the actor `id` (named `name`, "Counter#0.3"); its constructor is its first call, and
  // if it throws, every call fails with ActorDiedError. `restarts`: how many times it was built
  // before (wasRestarted() is true in this instance when it is more than 0). `concurrency`: how
  // many of its calls may run at once (1: in order, one at a time).
  void createActor(std::uint64_t id, const std::string& name, const std::string& className, Bytes args,
                   int restarts = 0, int concurrency = 1) GYRE_EXCLUDES(mu_);
  void callActor(std::uint64_t id, const std::string& method, Bytes args, Done done) GYRE_EXCLUDES(mu_);
  // Ends actor `id`: its queued calls and every later one fail with ActorDiedError ("was
  // killed"); a call already running finishes. Its instance is destroyed once no call holds it.
  // Nothing for an actor that does not live here.
  void killActor(std::uint64_t id) GYRE_EXCLUDES(mu_);

  int threads() const { return static_cast<int>(workers_.size()); }

  // The values of this process's ObjectRefs. put() stores one and returns what keeps it: the
  // value is freed when the last copy of that goes (even after this node is gone).
  std::shared_ptr<void> putObject(std::uint64_t id, Bytes value);
  // The same for an object in shared memory (putBuffer).
  std::shared_ptr<void> putSegment(std::uint64_t id, std::shared_ptr<const Segment> segment);
  // The value (a shared-memory object's bytes copied); InvalidArgument when it was freed (or
  // never put here).
  std::shared_ptr<const Bytes> object(std::uint64_t id) const;
  // A shared-memory object; InvalidArgument when it was freed (or is not one).
  std::shared_ptr<const Segment> segment(std::uint64_t id) const;

 private:
  struct Actor {
    std::string name;
    std::string className;
    std::shared_ptr<void> instance;
    std::exception_ptr died;
    int restarts = 0;
    Mutex mu;
    std::deque<std::function<void()>> mailbox GYRE_GUARDED_BY(mu);
    int drainers GYRE_GUARDED_BY(mu) = 0;     // drains running or queued
    int concurrency GYRE_GUARDED_BY(mu) = 1;  // the most at once: 1 until the constructor returned
    std::atomic<bool> killed{false};
  };

  // Queues a job; false once the workers have stopped (the job is not run).
  bool post(std::function<void()> job) GYRE_EXCLUDES(mu_);
  void postToActor(const std::shared_ptr<Actor>& actor, std::function<void()> call) GYRE_EXCLUDES(mu_);
  void drain(const std::shared_ptr<Actor>& actor) GYRE_EXCLUDES(mu_);
  void work() GYRE_EXCLUDES(mu_);

  Mutex mu_;
  CondVar cv_;
  std::deque<std::function<void()>> queue_ GYRE_GUARDED_BY(mu_);
  bool stopping_ GYRE_GUARDED_BY(mu_) = false;
  // A worker found the queue empty while stopping: nothing runs any more.
  bool closed_ GYRE_GUARDED_BY(mu_) = false;
  std::map<std::uint64_t, std::shared_ptr<Actor>> actors_ GYRE_GUARDED_BY(mu_);
  // Actors killed here, by id: their names.
  std::map<std::uint64_t, std::string> killed_ GYRE_GUARDED_BY(mu_);
  struct Objects {
    mutable Mutex mu;
    std::map<std::uint64_t, std::shared_ptr<const Bytes>> values GYRE_GUARDED_BY(mu);
    std::map<std::uint64_t, std::shared_ptr<const Segment>> segments GYRE_GUARDED_BY(mu);
  };
  std::shared_ptr<Objects> objects_ = std::make_shared<Objects>();
  std::vector<std::thread> workers_;  // last: they start once the rest exists
};

}  // namespace gyre::rt::detail
