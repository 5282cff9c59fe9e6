// Searchers: where the configurations of an experiment's trials come from.
//
//   random   Ray Tune's basic variant generator: --samples repeats of the grid's product (every
//            combination of the grid parameters), each combination with the other parameters drawn
//            at random. Each repeat visits the combinations in a random order of its own (as
//            Optuna's GridSampler does) rather than Ray's product order: an early-stopping
//            scheduler's first rungs then see a fair sample of the grid, not its first corner
//            (ASHA on the mlp grid of docs/tune.md: 99 worker-epochs in product order, 63 to 91 in
//            random orders). Trial i's draws depend only on (seed, i), so a resumed experiment makes
//            the same trials. With grid parameters only and --samples 1, this is grid search.
//   tpe      the Tree-structured Parzen Estimator (Bergstra et al., NeurIPS 2011; as HyperOpt and
//            Optuna do it): random for the first --tpe-startup trials, then each parameter is drawn
//            from a Parzen density over the best gamma share of the finished results, choosing among
//            24 candidates the one with the highest l(x)/g(x). Grid parameters still cycle.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tune/space.h"
#include "tune/trial.h"

namespace gyre::tune {

struct SearcherOptions {
  std::string name = "random";  // random or tpe
  int samples = 1;              // repeats of the grid's product
  std::uint64_t seed = 0;
  int tpeStartup = 10;     // tpe: random trials first
  double tpeGamma = 0.25;  // tpe: the share of results that count as good
  int tpeCandidates = 24;
};

class Searcher {
 public:
  virtual ~Searcher() = default;
  virtual std::string describe() const = 0;
  // How many trials the search makes.
  virtual int total() const = 0;
  // The configuration of trial `index` (the trials before it are in `trials`, their results so
  // far with them); `sign` is +1 to maximize the metric, -1 to minimize it.
  virtual Json suggest(int index, const std::vector<Trial>& trials, double sign) const = 0;
};

// Throws InvalidArgument for an unknown name, samples < 1, or a search so large (samples x grid)
// that it would not fit in an int.
std::unique_ptr<Searcher> makeSearcher(const SearcherOptions& o, const Space& space);

// The draws of trial `index` of a random search: a generator seeded with (seed, index).
std::mt19937_64 trialGenerator(std::uint64_t seed, int index);
// The grid point of trial `index`: repeat index / size of the grid visits every point once, in
// an order drawn from (seed, repeat). Keeps the orders it made.
class GridOrder {
 public:
  GridOrder(std::int64_t size, std::uint64_t seed) : size_(size), seed_(seed) {}
  std::int64_t point(std::int64_t index);

 private:
  std::int64_t size_;
  std::uint64_t seed_;
  std::int64_t repeat_ = -1;
  std::vector<std::int64_t> order_;
};

// Trial `index` of a random search at grid point `point`, the other parameters drawn.
Json randomConfig(const Space& space, std::uint64_t seed, int index, std::int64_t point);

}  // namespace gyre::tune
