// gyre::rt in one process: remote functions and actors run through the registry by name, with
// their arguments and results serialized; errors come back typed and named; calls to one actor
// run in order, one at a time; futures time out, chain and wait for some of many.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "common/auth.h"
#include "common/socket.h"
#include "gyre/rt.h"
#include "rt/wire.h"
#include "support/rt_runtimes.h"

namespace gyre::rt {
namespace rt_test {

int add(int a, int b) { return a + b; }
GYRE_RT_FUNCTION(add);

struct Point {
  double x = 0, y = 0;
  std::string label;
  MSGPACK_DEFINE(x, y, label)
};

Point moved(const Point& p, std::vector<double> by) {
  return {p.x + by.at(0), p.y + by.at(1), p.label + "'"};
}
GYRE_RT_FUNCTION(moved);

std::map<std::string, int> countWords(const std::vector<std::string>& words) {
  std::map<std::string, int> counts;
  for (const std::string& w : words) ++counts[w];
  return counts;
}
GYRE_RT_FUNCTION(countWords);

std::atomic<int> touched{0};
void touch(int n) { touched += n; }
GYRE_RT_FUNCTION(touch);

int fails(std::string why) { throw std::out_of_range(why); }
GYRE_RT_FUNCTION(fails);

// A task that waits until the test opens the gate.
std::shared_future<void> gateOpen;
int waitsForGate(int v) {
  gateOpen.wait();
  return v;
}
GYRE_RT_FUNCTION(waitsForGate);

int notRegistered(int v) { return v; }

// The rank of the process that runs it.
int whereItRuns() { return Runtime::current()->rank(); }
GYRE_RT_FUNCTION(whereItRuns);

// Reads an object through the runtime that runs it.
long sumOf(ObjectRef<std::vector<long>> ref) {
  long sum = 0;
  for (long v : get(ref)) sum += v;
  return sum;
}
GYRE_RT_FUNCTION(sumOf);

class Counter {
 public:
  explicit Counter(int start) : value_(start) {}
  int add(int n) {
    // Calls to one actor never overlap: a second one in here at once would be seen.
    EXPECT_EQ(inside_.fetch_add(1), 0);
    value_ += n;
    order_.push_back(n);
    inside_.fetch_sub(1);
    return value_;
  }
  int value() const { return value_; }
  std::vector<int> order() const { return order_; }
  void reset() { value_ = 0; }
  int unregistered() const { return 0; }

 private:
  int value_;
  std::vector<int> order_;
  std::atomic<int> inside_{0};
};
GYRE_RT_ACTOR(Counter, int);
GYRE_RT_METHOD(Counter, add);
GYRE_RT_METHOD(Counter, value);
GYRE_RT_METHOD(Counter, order);
GYRE_RT_METHOD(Counter, reset);

// Knows whether it was built by a restart.
class Restartable {
 public:
  explicit Restartable(int start) : value_(start), restarted_(wasRestarted()) {}
  int add(int n) { return value_ += n; }
  bool restarted() const { return restarted_ && wasRestarted(); }

 private:
  int value_;
  bool restarted_;
};
GYRE_RT_ACTOR(Restartable, int);
GYRE_RT_METHOD(Restartable, add);
GYRE_RT_METHOD(Restartable, restarted);

// meet(ms): comes in and waits up to `ms` for a second call to be inside too; returns how many
// came in so far (2 when two calls overlapped, 1 for the first of two that ran one at a time).
class Meeting {
 public:
  int meet(int ms) {
    std::unique_lock<std::mutex> lock(mu_);
    ++inside_;
    cv_.notify_all();
    cv_.wait_for(lock, std::chrono::milliseconds(ms), [this] { return inside_ >= 2; });
    return inside_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int inside_ = 0;
};
GYRE_RT_ACTOR(Meeting);
GYRE_RT_METHOD(Meeting, meet);

// An actor whose method waits for the test's gate.
class Waiter {
 public:
  int wait(int v) { return waitsForGate(v); }
};
GYRE_RT_ACTOR(Waiter);
GYRE_RT_METHOD(Waiter, wait);

class Broken {
 public:
  explicit Broken(const std::string& why) { throw std::invalid_argument(why); }
  int ping() { return 1; }
};
GYRE_RT_ACTOR(Broken, std::string);
GYRE_RT_METHOD(Broken, ping);

class Unregistered {
 public:
  int ping() { return 1; }
};

RuntimeOptions withThreads(int threads) {
  RuntimeOptions o;
  o.threads = threads;
  return o;
}
ActorOptions onRank(int rank) {
  ActorOptions o;
  o.rank = rank;
  return o;
}
ActorOptions onHost(const std::string& host) {
  ActorOptions o;
  o.host = host;
  return o;
}

template <class F>
std::string errorOf(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(RtTask, RunsRegisteredFunctionsWithTheirValues) {
  Runtime rt(withThreads(2));
  EXPECT_EQ(rt.task(add).remote(1, 2).get(), 3);
  const Point p = rt.task(moved).remote(Point{1, 2, "p"}, std::vector<double>{0.5, -1}).get();
  EXPECT_EQ(p.x, 1.5);
  EXPECT_EQ(p.y, 1);
  EXPECT_EQ(p.label, "p'");
  const auto counts = rt.task(countWords).remote(std::vector<std::string>{"a", "b", "a"}).get();
  EXPECT_EQ(counts, (std::map<std::string, int>{{"a", 2}, {"b", 1}}));

  touched = 0;
  std::vector<Future<void>> done;
  std::vector<Future<int>> sums;
  for (int i = 0; i < 200; ++i) {
    done.push_back(rt.task(touch).remote(i));
    sums.push_back(rt.task(add).remote(i, i));
  }
  for (auto& f : done) f.get();
  EXPECT_EQ(touched.load(), 199 * 200 / 2);
  for (int i = 0; i < 200; ++i) EXPECT_EQ(sums[static_cast<std::size_t>(i)].get(), 2 * i);
}

TEST(RtTask, ErrorsComeBackTypedAndNamed) {
  Runtime rt(withThreads(2));
  try {
    rt.task(fails).remote("no such key").get();
    ADD_FAILURE() << "no error";
  } catch (const RemoteError& e) {
    EXPECT_EQ(e.function(), "fails");
    EXPECT_EQ(e.type(), "std::out_of_range");
    EXPECT_EQ(e.message(), "no such key");
    EXPECT_STREQ(e.what(), "fails raised std::out_of_range: no such key");
  }
  EXPECT_EQ(errorOf([&] { rt.task(notRegistered); }),
            "gyre::rt: task(): the function is not registered as a remote function: add GYRE_RT_FUNCTION(its "
            "name) at namespace scope");
  // By name, as a peer process would call: another function, arguments of other types or number.
  EXPECT_THROW(rt.submitTask("nosuch", pack(std::make_tuple(1))), InvalidArgument);
  EXPECT_EQ(errorOf([&] { Future<int>(rt.submitTask("add", pack(std::make_tuple(1, "two")))).get(); }),
            "add's argument 2 is a string, which does not convert to int");
  EXPECT_EQ(errorOf([&] { Future<int>(rt.submitTask("add", pack(std::make_tuple(1, 2, 3)))).get(); }),
            "add takes 2 arguments, the call passed 3");
  EXPECT_THROW(Future<int>(rt.submitTask("add", "\xc1 not msgpack")).get(), ProtocolError);
  // An array header that claims 2^26 elements in 5 bytes is refused before any is reserved.
  EXPECT_THROW(unpack<std::vector<int>>(std::string("\xdd\x04\x00\x00\x00", 5), "a claim"), ProtocolError);
  // A result read as another type.
  EXPECT_EQ(errorOf([&] { Future<std::string>(rt.submitTask("add", pack(std::make_tuple(1, 2)))).get(); }),
            "the result is an integer, which does not convert to std::__cxx11::basic_string<char, "
            "std::char_traits<char>, std::allocator<char> >");
}

TEST(RtFuture, TimesOutChainsAndWaitsForSome) {
  Runtime rt(withThreads(3));
  std::promise<void> open;
  gateOpen = open.get_future().share();
  const Future<int> slow = rt.task(waitsForGate).remote(7);
  // A bounded get() or wait() is a wait to try again, not a failure of the call.
  EXPECT_THROW(slow.get(std::chrono::milliseconds(20)), GetTimeoutError);
  try {
    slow.get(std::chrono::milliseconds(1));
  } catch (const TimeoutError&) {
    ADD_FAILURE() << "a bounded get() threw gyre::TimeoutError, which means an operation gave up";
  } catch (const GetTimeoutError&) {
  }
  EXPECT_FALSE(slow.wait(std::chrono::milliseconds(20)));
  EXPECT_FALSE(slow.isCompleted());

  std::vector<Future<int>> some = {slow, rt.task(add).remote(2, 2), rt.task(waitsForGate).remote(9)};
  some[1].get();
  EXPECT_EQ(wait(some, 1, std::chrono::seconds(5)), (std::vector<std::size_t>{1}));
  EXPECT_EQ(wait(some, 3, std::chrono::milliseconds(20)), (std::vector<std::size_t>{1}));  // timed out

  const Future<std::string> chained =
      slow.then([](int v) { return v * 6; }).then([](int v) { return "answer " + std::to_string(v); });
  open.set_value();
  EXPECT_EQ(wait(some, 3, std::chrono::seconds(30)), (std::vector<std::size_t>{0, 1, 2}));
  EXPECT_TRUE(slow.wait(std::chrono::seconds(30)));
  EXPECT_TRUE(slow.isCompleted());
  EXPECT_EQ(slow.get(std::chrono::seconds(30)), 7);
  EXPECT_EQ(chained.get(), "answer 42");
  // An error goes down the chain; a ready future's then() runs at once.
  const Future<int> failed = rt.task(fails).remote("x").then([](int v) { return v + 1; });
  EXPECT_THROW(failed.get(), RemoteError);
  EXPECT_EQ(rt.task(add).remote(1, 1).then([](int v) { return v * 10; }).get(), 20);
  Future<void> after = rt.task(touch).remote(0).then([] { return 5; }).then([](int v) { EXPECT_EQ(v, 5); });
  after.get();
}

TEST(RtActor, CallsRunInOrderOneAtATime) {
  Runtime rt(withThreads(4));
  const ActorHandle<Counter> counter = rt.actor<Counter>(10);
  EXPECT_EQ(counter.name().rfind("Counter#", 0), 0u);
  std::vector<Future<int>> sums;
  for (int i = 1; i <= 300; ++i) sums.push_back(counter.call(&Counter::add, i));
  EXPECT_EQ(sums.back().get(), 10 + 300 * 301 / 2);
  for (int i = 1; i <= 300; ++i) EXPECT_EQ(sums[static_cast<std::size_t>(i - 1)].get(), 10 + i * (i + 1) / 2);
  std::vector<int> expected(300);
  for (int i = 0; i < 300; ++i) expected[static_cast<std::size_t>(i)] = i + 1;
  EXPECT_EQ(counter.call(&Counter::order).get(), expected);
  counter.call(&Counter::reset).get();
  EXPECT_EQ(counter.call(&Counter::value).get(), 0);

  // Two actors of a class are two states.
  const ActorHandle<Counter> other = rt.actor<Counter>(1);
  other.call(&Counter::add, 1);
  EXPECT_EQ(other.call(&Counter::value).get(), 2);
  EXPECT_EQ(counter.call(&Counter::value).get(), 0);
}

TEST(RtActor, AFailedConstructorFailsEveryCallAndRegistrationIsChecked) {
  Runtime rt(withThreads(2));
  const ActorHandle<Broken> broken = rt.actor<Broken>(std::string("no disk"));
  const std::string message = errorOf([&] { broken.call(&Broken::ping).get(); });
  EXPECT_EQ(message, "gyre::rt: actor " + broken.name() +
                         " died: Broken's constructor raised std::invalid_argument: no disk");
  EXPECT_THROW(broken.call(&Broken::ping).get(), ActorDiedError);

  EXPECT_EQ(errorOf([&] { rt.actor<Unregistered>(); }),
            "gyre::rt: actor(): gyre::rt::rt_test::Unregistered is not a registered actor class: add "
            "GYRE_RT_ACTOR(gyre::rt::rt_test::Unregistered, its constructor's parameter types)");
  const ActorHandle<Counter> counter = rt.actor<Counter>(0);
  EXPECT_THROW(counter.call(&Counter::unregistered), InvalidArgument);
  // A constructor argument of another type fails the actor, by name.
  const ActorHandle<Counter> wrong = rt.actor<Counter>(std::string("ten"));
  EXPECT_EQ(errorOf([&] { wrong.call(&Counter::value).get(); }),
            "gyre::rt: actor " + wrong.name() +
                " died: Counter's constructor's argument 1 is a string, which does not convert to int");
}

// Three processes of one runtime, as threads of this test: each its own Runtime, listening on
// loopback, meeting in a memory store.
class RtProcesses : public ::testing::Test {
 protected:
  void start(int size, const std::string& secret = "job-secret") {
    store_ = createMemoryStore();
    runtimes_ = test::loopbackRuntimes(size, 2, store_, secret);
  }
  Runtime& rt(int r) { return *runtimes_[static_cast<std::size_t>(r)]; }
  std::shared_ptr<Store> store_;
  std::vector<std::unique_ptr<Runtime>> runtimes_;
};

TEST_F(RtProcesses, TasksAndActorsRunInEveryProcess) {
  start(3);
  for (int r = 0; r < 3; ++r) EXPECT_EQ(rt(0).task(add).options({.rank = r}).remote(r, 10).get(), r + 10);
  std::vector<Future<int>> spread;
  for (int i = 0; i < 60; ++i) spread.push_back(rt(1).task(add).remote(i, 1));
  for (int i = 0; i < 60; ++i) EXPECT_EQ(spread[static_cast<std::size_t>(i)].get(), i + 1);
  const Point p = rt(2).task(moved).options({.rank = 0}).remote(Point{1, 2, "q"}, std::vector<double>{1, 1}).get();
  EXPECT_EQ(p.label, "q'");

  const ActorHandle<Counter> counter = rt(0).actorWith<Counter>(onRank(2), 5);
  EXPECT_EQ(counter.rank(), 2);
  EXPECT_EQ(counter.name().rfind("Counter#0.", 0), 0u) << counter.name();
  std::vector<Future<int>> sums;
  for (int i = 1; i <= 100; ++i) sums.push_back(counter.call(&Counter::add, i));
  EXPECT_EQ(sums.back().get(), 5 + 5050);
  std::vector<int> expected(100);
  for (int i = 0; i < 100; ++i) expected[static_cast<std::size_t>(i)] = i + 1;
  EXPECT_EQ(counter.call(&Counter::order).get(), expected);

  // Errors cross the wire with their types.
  try {
    rt(0).task(fails).options({.rank = 1}).remote("far away").get();
    ADD_FAILURE() << "no error";
  } catch (const RemoteError& e) {
    EXPECT_STREQ(e.what(), "fails raised std::out_of_range: far away");
  }
  EXPECT_EQ(errorOf([&] { Future<int>(rt(0).submitTask("add", pack(std::make_tuple("x", 2)), {.rank = 2})).get(); }),
            "add's argument 1 is a string, which does not convert to int");
  const ActorHandle<Broken> broken = rt(1).actorWith<Broken>(onRank(0), std::string("far"));
  EXPECT_THROW(broken.call(&Broken::ping).get(), ActorDiedError);

  EXPECT_EQ(rt(0).actorWith<Counter>(onHost("127.0.0.1"), 0).rank(), 0);
  EXPECT_EQ(errorOf([&] { rt(0).actorWith<Counter>(onHost("elsewhere"), 0); }).rfind(
                "gyre::rt: no process of the runtime is on host elsewhere", 0),
            0u);
  EXPECT_THROW(rt(0).task(add).options({.rank = 3}).remote(1, 1), InvalidArgument);
}

// A driver that takes no calls placed in turn (RuntimeOptions::placeHere, gyre.rt's in Python):
// tasks and actors without a rank go to the others, from whichever process makes them; placed on
// its rank they still run there.
TEST_F(RtProcesses, AProcessThatDoesNotPlaceHereGetsNoCallPlacedInTurn) {
  store_ = createMemoryStore();
  runtimes_ = test::loopbackRuntimes(3, 2, store_, "job-secret", /*placeOnRankZero=*/false);
  for (int caller = 0; caller < 3; ++caller) {
    for (int i = 0; i < 12; ++i) {
      const ActorHandle<Counter> c = rt(caller).actor<Counter>(0);
      EXPECT_NE(c.rank(), 0) << "from process " << caller;
      EXPECT_NE(rt(caller).task(whereItRuns).remote().get(), 0) << "from process " << caller;
    }
  }
  EXPECT_EQ(rt(1).task(add).options({.rank = 0}).remote(2, 3).get(), 5);
}

// A process that goes away fails the calls in flight to it (its tasks with PeerLostError, its
// actors with ActorDiedError naming them) and every later one, at once; the others go on.
TEST_F(RtProcesses, ALostProcessFailsItsCallsAndTheOthersGoOn) {
  start(3);
  std::promise<void> open;
  gateOpen = open.get_future().share();
  const ActorHandle<Counter> counter = rt(0).actorWith<Counter>(onRank(2), 0);
  EXPECT_EQ(counter.call(&Counter::add, 1).get(), 1);
  const Future<int> inFlight = rt(0).task(waitsForGate).options({.rank = 2}).remote(1);
  std::thread leaving([&] { runtimes_[2].reset(); });  // waits for the gated task to finish
  const std::string lost = errorOf([&] { inFlight.get(std::chrono::seconds(30)); });
  open.set_value();  // on every path, so that process 2 can finish leaving
  leaving.join();
  EXPECT_EQ(lost.rfind("gyre::rt: process 2 (127.0.0.1:", 0), 0u) << lost;
  EXPECT_THROW(inFlight.get(), PeerLostError);
  EXPECT_EQ(errorOf([&] { counter.call(&Counter::value).get(std::chrono::seconds(30)); })
                .rfind("gyre::rt: actor " + counter.name() + " died with its process: gyre::rt: process 2", 0),
            0u);
  EXPECT_THROW(rt(0).task(add).options({.rank = 2}).remote(1, 1).get(std::chrono::seconds(30)), PeerLostError);
  EXPECT_EQ(rt(0).task(add).options({.rank = 1}).remote(1, 1).get(), 2);
}

// An actor with restarts left is built again (its constructor re-run with its first arguments,
// wasRestarted() true) on a live process once its own is lost, and its calls go on there.
TEST_F(RtProcesses, AnActorWithRestartsLeftIsRebuiltOnALiveProcess) {
  start(3);
  ActorOptions where = onRank(2);
  where.maxRestarts = 1;
  const ActorHandle<Restartable> actor = rt(0).actorWith<Restartable>(where, 5);
  EXPECT_EQ(actor.call(&Restartable::add, 10).get(), 15);
  EXPECT_FALSE(actor.call(&Restartable::restarted).get());
  EXPECT_FALSE(wasRestarted());  // outside an actor
  runtimes_[2].reset();
  // Process 0 learns of the loss from a call that fails (the link closes under it).
  EXPECT_THROW(rt(0).task(add).options({.rank = 2}).remote(1, 1).get(std::chrono::seconds(30)), PeerLostError);
  // The next process in turn is 0, then 1: one task takes 0, so the actor is rebuilt over the wire
  // on process 1.
  EXPECT_EQ(rt(0).task(add).remote(0, 0).get(std::chrono::seconds(30)), 0);
  EXPECT_EQ(actor.call(&Restartable::add, 1).get(std::chrono::seconds(30)), 6);
  EXPECT_TRUE(actor.call(&Restartable::restarted).get());
  // A task placed in turn skips the lost process; its retries are for losses in flight.
  for (int i = 0; i < 6; ++i) EXPECT_EQ(rt(0).task(add).remote(i, 1).get(std::chrono::seconds(30)), i + 1);
}

// With task retries, a call in flight when the actor's process is lost runs again on the rebuilt
// actor and answers.
TEST_F(RtProcesses, ACallInFlightRunsAgainOnTheRebuiltActor) {
  start(3);
  std::promise<void> open;
  gateOpen = open.get_future().share();
  ActorOptions where = onRank(2);
  where.maxRestarts = 1;
  where.maxTaskRetries = 1;
  const ActorHandle<Waiter> waiter = rt(0).actorWith<Waiter>(where);
  const Future<int> inFlight = waiter.call(&Waiter::wait, 7);
  std::thread leaving([&] { runtimes_[2].reset(); });  // waits for its copy of the call
  // The loss reaches process 0 as the connection closes; the call goes to the rebuilt actor,
  // which waits for the gate too.
  const bool answeredEarly = inFlight.isCompleted();
  open.set_value();
  leaving.join();
  EXPECT_FALSE(answeredEarly);
  EXPECT_EQ(inFlight.get(std::chrono::seconds(30)), 7);
  // (Process 2's own copy could not answer: its connections closed before its workers stopped.)
  EXPECT_EQ(waiter.call(&Waiter::wait, 8).get(std::chrono::seconds(30)), 8);
}

// Actors that declare cpus or memory go where the offer less the reservations holds them; one
// that no process can hold is refused at once, naming what they offer.
TEST_F(RtProcesses, ActorsArePlacedByTheResourcesTheyDeclare) {
  start(3);  // each process offers its 2 worker threads as 2 cpus
  ActorOptions two;
  two.cpus = 2;
  std::set<int> ranks;
  for (int i = 0; i < 3; ++i) ranks.insert(rt(0).actorWith<Counter>(two, i).rank());
  EXPECT_EQ(ranks, (std::set<int>{0, 1, 2}));  // one per process: each takes all of one
  EXPECT_EQ(errorOf([&] { rt(1).actorWith<Counter>(two, 0); }).rfind(
                "gyre::rt: no process can hold an actor of 2.000000 cpus and 0 bytes of memory now", 0),
            0u);
  ActorOptions huge;
  huge.memoryBytes = std::int64_t{1} << 62;
  EXPECT_THROW(rt(0).actorWith<Counter>(huge, 0), InvalidArgument);
  // Undeclared needs are not counted: any process takes it.
  EXPECT_EQ(rt(0).actorWith<Counter>(onRank(1), 5).call(&Counter::value).get(), 5);
  ActorOptions negative;
  negative.cpus = -1;
  EXPECT_THROW(rt(0).actorWith<Counter>(negative, 0), InvalidArgument);
}

// An actor that declared resources is rebuilt where they are free, and reserves them there.
TEST_F(RtProcesses, ARebuiltActorGoesWhereItsResourcesAreFree) {
  start(4);  // each process offers 2 cpus
  ActorOptions all;
  all.cpus = 2;
  all.rank = 1;
  const ActorHandle<Counter> one = rt(0).actorWith<Counter>(all, 1);
  all.rank = 2;
  const ActorHandle<Counter> two = rt(0).actorWith<Counter>(all, 2);
  all.rank = 3;
  all.maxRestarts = 1;
  const ActorHandle<Restartable> actor = rt(0).actorWith<Restartable>(all, 5);
  EXPECT_EQ(actor.call(&Restartable::add, 1).get(), 6);
  runtimes_[3].reset();
  EXPECT_THROW(rt(0).task(add).options({.rank = 3}).remote(1, 1).get(std::chrono::seconds(30)), PeerLostError);
  // Processes 1 and 2 are full: only 0 holds it.
  EXPECT_EQ(actor.call(&Restartable::add, 1).get(std::chrono::seconds(30)), 6);
  EXPECT_TRUE(actor.call(&Restartable::restarted).get());
  ActorOptions more;
  more.cpus = 1;
  EXPECT_THROW(rt(0).actorWith<Counter>(more, 0), InvalidArgument);  // every live process is full now
  EXPECT_EQ(one.call(&Counter::value).get() + two.call(&Counter::value).get(), 3);
}

// An actor of maxConcurrency 2 runs two calls at once; by default they run one at a time. Here
// and in another process.
TEST_F(RtProcesses, AnActorRunsAsManyCallsAtOnceAsItDeclares) {
  start(2);
  for (int rank : {0, 1}) {
    ActorOptions two = onRank(rank);
    two.maxConcurrency = 2;
    const ActorHandle<Meeting> both = rt(0).actorWith<Meeting>(two);
    const Future<int> first = both.call(&Meeting::meet, 30000), second = both.call(&Meeting::meet, 30000);
    EXPECT_EQ(first.get(std::chrono::seconds(30)), 2) << "rank " << rank;
    EXPECT_EQ(second.get(std::chrono::seconds(30)), 2);
    const ActorHandle<Meeting> alone = rt(0).actorWith<Meeting>(onRank(rank));
    const Future<int> a = alone.call(&Meeting::meet, 100), b = alone.call(&Meeting::meet, 100);
    EXPECT_EQ(a.get(std::chrono::seconds(30)), 1) << "rank " << rank;  // waited alone, then b came
    EXPECT_EQ(b.get(std::chrono::seconds(30)), 2);
  }
  ActorOptions none;
  none.maxConcurrency = 0;
  EXPECT_EQ(errorOf([&] { rt(0).actorWith<Meeting>(none); }),
            "gyre::rt: ActorOptions::maxConcurrency must be 1 to 1024, not 0");
}

// A killed actor fails its later calls with ActorDiedError and gives back what it reserved; here
// and in another process; killing it again does nothing.
TEST_F(RtProcesses, AKilledActorFailsItsCallsAndGivesBackItsResources) {
  start(2);  // each process offers 2 cpus
  for (int rank : {0, 1}) {
    ActorOptions all = onRank(rank);
    all.cpus = 2;
    all.maxRestarts = 1;  // a killed actor is not rebuilt all the same
    const ActorHandle<Counter> counter = rt(0).actorWith<Counter>(all, 3);
    EXPECT_EQ(counter.call(&Counter::value).get(), 3);
    EXPECT_THROW(rt(0).actorWith<Counter>(all, 0), InvalidArgument) << "rank " << rank << " is full";
    counter.kill();
    counter.kill();
    EXPECT_EQ(errorOf([&] { counter.call(&Counter::value).get(std::chrono::seconds(30)); }),
              "gyre::rt: actor " + counter.name() + " was killed");
    const ActorHandle<Counter> next = rt(0).actorWith<Counter>(all, 4);  // its cpus are free again
    EXPECT_EQ(next.call(&Counter::value).get(), 4);
    next.kill();
  }
}

// An object is stored once where it was put and read from any process, by a task through the
// runtime that runs it; once the owner's last reference goes it is freed, and a borrowed
// reference then gets a clear error everywhere.
TEST_F(RtProcesses, ObjectsAreReadAnywhereAndFreedWithTheirOwnersLastReference) {
  start(3);
  std::vector<long> values(100000);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<long>(i);
  const long expected = 99999L * 100000L / 2;
  auto ref = std::make_unique<ObjectRef<std::vector<long>>>(rt(0).put(values));
  EXPECT_EQ(ref->owner(), 0);
  EXPECT_EQ(rt(0).get(*ref), values);
  EXPECT_EQ(rt(2).get(*ref), values);  // fetched from process 0
  for (int rank : {0, 1, 2}) EXPECT_EQ(rt(0).task(sumOf).options({.rank = rank}).remote(*ref).get(), expected);
  EXPECT_EQ(errorOf([&] { (void)get(*ref); }),
            "gyre::rt::get(ref) outside a task or actor method: call the Runtime's get(ref)");

  // A copy made elsewhere (as a task's argument is) borrows: the owner's last copy frees it.
  const auto borrowed = unpack<ObjectRef<std::vector<long>>>(pack(*ref), "a reference");
  std::optional<ObjectRef<std::vector<long>>> second = *ref;
  ref.reset();
  EXPECT_EQ(rt(1).get(borrowed), values);  // `second` still keeps it
  second.reset();                          // the owner's last copy
  const std::string name = "gyre::rt: object 0.1 was freed: no ObjectRef to it remains in the process that put it";
  EXPECT_EQ(errorOf([&] { rt(0).get(borrowed); }), name);
  EXPECT_EQ(errorOf([&] { rt(2).get(borrowed); }), name);
  EXPECT_THROW(rt(0).task(sumOf).options({.rank = 1}).remote(borrowed).get(), RemoteError);
}

// The runtime's port takes only the job's own: a wrong secret is refused at the handshake, and a
// malformed message from an authenticated peer closes that connection alone.
TEST_F(RtProcesses, ItsPortRefusesStrangersAndMalformedMessages) {
  start(2);
  EXPECT_EQ(rt(0).task(add).options({.rank = 1}).remote(2, 3).get(), 5);
  const auto [host, port] = net::splitHostPort(store_->getString("gyre-rt/address/1"));
  EXPECT_THROW(auth::connectAuthenticated(host, port, "another-secret", wire::kAuthContext,
                                          Deadline::after(std::chrono::seconds(5))),
               ProtocolError);
  net::Fd peer = auth::connectAuthenticated(host, port, "job-secret", wire::kAuthContext,
                                            Deadline::after(std::chrono::seconds(5)));
  const std::string garbage(40, 'x');
  net::writeAll(peer.get(), garbage.data(), garbage.size(), Deadline::after(std::chrono::seconds(5)));
  char byte;
  EXPECT_THROW(net::readAll(peer.get(), &byte, 1, Deadline::after(std::chrono::seconds(10))), net::ConnectionClosed);
  // A message claiming a huge name is refused before anything is allocated.
  net::Fd second = auth::connectAuthenticated(host, port, "job-secret", wire::kAuthContext,
                                              Deadline::after(std::chrono::seconds(5)));
  std::string header(40, '\0');
  const std::uint32_t magic = wire::kMagic, nameBytes = 1u << 30;
  std::memcpy(header.data(), &magic, 4);
  header[4] = 1;
  std::memcpy(header.data() + 24, &nameBytes, 4);
  net::writeAll(second.get(), header.data(), header.size(), Deadline::after(std::chrono::seconds(5)));
  EXPECT_THROW(net::readAll(second.get(), &byte, 1, Deadline::after(std::chrono::seconds(10))), net::ConnectionClosed);
  EXPECT_EQ(rt(0).task(add).options({.rank = 1}).remote(4, 5).get(), 9);
}

// A call's time-out fails its future whatever holds the answer up (here a callee that waits),
// on this process or another; the late answer is dropped.
TEST_F(RtProcesses, CallsTimeOut) {
  start(2);
  std::promise<void> open;
  gateOpen = open.get_future().share();
  for (int rank : {0, 1}) {
    const Future<int> late =
        rt(0).task(waitsForGate).options({.rank = rank, .timeout = std::chrono::milliseconds(50)}).remote(1);
    EXPECT_EQ(errorOf([&] { late.get(); }),
              "gyre::rt: waitsForGate on process " + std::to_string(rank) + " did not answer within 50 ms");
  }
  ActorOptions where = onRank(1);
  where.callTimeout = std::chrono::milliseconds(50);
  const ActorHandle<Waiter> waiter = rt(0).actorWith<Waiter>(where);
  EXPECT_THROW(waiter.call(&Waiter::wait, 2).get(), TimeoutError);
  open.set_value();
  // Answered in time, the same calls return (an actor with a time-out a loaded machine meets).
  EXPECT_EQ(rt(0).task(add).options({.rank = 1, .timeout = std::chrono::seconds(30)}).remote(2, 2).get(), 4);
  where.callTimeout = std::chrono::seconds(30);
  EXPECT_EQ(rt(0).actorWith<Waiter>(where).call(&Waiter::wait, 3).get(), 3);
}

TEST(RtOptions, AreChecked) {
  RuntimeOptions o;
  o.rank = 2;
  o.size = 2;
  EXPECT_THROW(Runtime{o}, InvalidArgument);
  o.rank = 0;
  EXPECT_EQ(errorOf([&] { Runtime{o}; }),
            "gyre::rt: a runtime of 2 processes needs the job's store and secret (RuntimeOptions::store, ::secret)");
  EXPECT_THROW(Runtime{withThreads(-1)}, InvalidArgument);
}

}  // namespace rt_test
}  // namespace gyre::rt
