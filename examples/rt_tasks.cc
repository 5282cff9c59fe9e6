// gyre::rt from an installed gyre: remote functions and an actor across the processes of a job.
//   gyre run -np 2 -- ./gyre_example_rt_tasks
// Every process runs this binary; rank 0 calls, the others serve until it is done.
#include <gyre/rt.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace {

long square(long x) { return x * x; }
GYRE_RT_FUNCTION(square);

class Tally {
 public:
  explicit Tally(std::string name) : name_(std::move(name)) {}
  long add(long x) { return total_ += x; }
  std::string report() const { return name_ + ": " + std::to_string(total_); }

 private:
  std::string name_;
  long total_ = 0;
};
GYRE_RT_ACTOR(Tally, std::string);
GYRE_RT_METHOD(Tally, add);
GYRE_RT_METHOD(Tally, report);

}  // namespace

int main() {
  gyre::rt::RuntimeOptions options = gyre::rt::RuntimeOptions::fromEnvironment();
  gyre::rt::Runtime rt(options);
  if (rt.rank() != 0) {  // serve until rank 0 is done
    options.store->get("example/done", std::chrono::minutes(5));
    return 0;
  }
  std::vector<gyre::rt::Future<long>> squares;
  for (long i = 1; i <= 10; ++i) squares.push_back(rt.task(square).remote(i));  // spread over the processes
  gyre::rt::ActorOptions last;
  last.rank = rt.size() - 1;
  const auto tally = rt.actorWith<Tally>(last, std::string("sum of squares"));
  for (auto& f : squares) tally.call(&Tally::add, f.get());
  const std::string report = tally.call(&Tally::report).get();
  std::printf("%s (on %d processes)\n", report.c_str(), rt.size());
  if (options.store) options.store->setString("example/done", "1");
  return report == "sum of squares: 385" ? 0 : 1;
}
