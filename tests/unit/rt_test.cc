// gyre::rt in one process: remote functions and actors run through the registry by name, with
// their arguments and results serialized; errors come back typed and named; calls to one actor
// run in order, one at a time; futures time out, chain and wait for some of many.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "gyre/rt.h"

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
  Runtime rt({.threads = 2});
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
  Runtime rt({.threads = 2});
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
  // A result read as another type.
  EXPECT_EQ(errorOf([&] { Future<std::string>(rt.submitTask("add", pack(std::make_tuple(1, 2)))).get(); }),
            "the result is an integer, which does not convert to std::__cxx11::basic_string<char, "
            "std::char_traits<char>, std::allocator<char> >");
}

TEST(RtFuture, TimesOutChainsAndWaitsForSome) {
  Runtime rt({.threads = 3});
  std::promise<void> open;
  gateOpen = open.get_future().share();
  const Future<int> slow = rt.task(waitsForGate).remote(7);
  EXPECT_THROW(slow.get(std::chrono::milliseconds(20)), TimeoutError);
  EXPECT_FALSE(slow.ready());

  std::vector<Future<int>> some = {slow, rt.task(add).remote(2, 2), rt.task(waitsForGate).remote(9)};
  some[1].get();
  EXPECT_EQ(wait(some, 1, std::chrono::seconds(5)), (std::vector<std::size_t>{1}));
  EXPECT_EQ(wait(some, 3, std::chrono::milliseconds(20)), (std::vector<std::size_t>{1}));  // timed out

  const Future<std::string> chained =
      slow.then([](int v) { return v * 6; }).then([](int v) { return "answer " + std::to_string(v); });
  open.set_value();
  EXPECT_EQ(wait(some, 3, std::chrono::seconds(30)), (std::vector<std::size_t>{0, 1, 2}));
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
  Runtime rt({.threads = 4});
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
  Runtime rt({.threads = 2});
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

}  // namespace rt_test
}  // namespace gyre::rt
