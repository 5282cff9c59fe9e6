#include "tune/searcher.h"

#include <algorithm>

#include "common/numbers.h"
#include "gyre/errors.h"
#include "tune/tpe.h"

namespace gyre::tune {
namespace {

class RandomSearch final : public Searcher {
 public:
  RandomSearch(const SearcherOptions& o, const Space& space) : o_(o), space_(space) {}

  std::string describe() const override {
    const std::int64_t grid = space_.gridSize();
    bool random = false;
    for (const Param& p : space_.params) random |= p.distribution != Distribution::kGrid;
    if (!random && o_.samples == 1) return "grid search (" + std::to_string(grid) + " points)";
    return "random search (" + std::to_string(o_.samples) + " sample" + (o_.samples == 1 ? "" : "s") +
           (grid > 1 ? " x " + std::to_string(grid) + " grid points" : "") + ", seed " +
           std::to_string(o_.seed) + ")";
  }

  int total() const override { return o_.samples * static_cast<int>(space_.gridSize()); }

  Json suggest(int index, const std::vector<Trial>&, double) const override {
    return randomConfig(space_, o_.seed, index, grid_.point(index));
  }

 private:
  SearcherOptions o_;
  const Space& space_;
  mutable GridOrder grid_{space_.gridSize(), o_.seed};
};

}  // namespace

std::mt19937_64 trialGenerator(std::uint64_t seed, int index) {
  std::seed_seq seq{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32),
                    static_cast<std::uint32_t>(index), 0x7475u /* "tu" */};
  return std::mt19937_64(seq);
}

std::int64_t GridOrder::point(std::int64_t index) {
  if (size_ <= 1) return 0;
  const std::int64_t repeat = index / size_;
  if (repeat != repeat_) {
    order_.resize(static_cast<std::size_t>(size_));
    for (std::int64_t i = 0; i < size_; ++i) order_[static_cast<std::size_t>(i)] = i;
    std::mt19937_64 rng = trialGenerator(seed_ ^ 0x67726964ull /* "grid" */, static_cast<int>(repeat));
    std::shuffle(order_.begin(), order_.end(), rng);
    repeat_ = repeat;
  }
  return order_[static_cast<std::size_t>(index % size_)];
}

Json randomConfig(const Space& space, std::uint64_t seed, int index, std::int64_t point) {
  Json config = gridPoint(space, point);
  std::mt19937_64 rng = trialGenerator(seed, index);
  for (const Param& p : space.params)
    if (p.distribution != Distribution::kGrid) config[p.name] = sample(p, rng);
  return config;
}

std::unique_ptr<Searcher> makeSearcher(const SearcherOptions& o, const Space& space) {
  numbers::checkInt("--samples", o.samples, 1, 1000000);
  const std::int64_t total = static_cast<std::int64_t>(o.samples) * space.gridSize();
  if (total > 1000000)
    throw InvalidArgument("--samples " + std::to_string(o.samples) + " x " +
                          std::to_string(space.gridSize()) + " grid points makes " + std::to_string(total) +
                          " trials; at most 1000000");
  if (o.name == "random") return std::make_unique<RandomSearch>(o, space);
  if (o.name == "tpe") return makeTpe(o, space);
  throw InvalidArgument("unknown --search " + o.name + " (random or tpe)");
}

}  // namespace gyre::tune
