// TPE (Bergstra, Bardenet, Bengio, Kégl, "Algorithms for Hyper-Parameter Optimization", NeurIPS
// 2011). The trials with a result are split by their best score: the top gamma share (at least
// one) is "good", the rest "bad". For each parameter on its own, l(x) is a Parzen density over the
// good values and g(x) over the bad ones, each with a prior component (the range's middle, as wide
// as the range); of --tpe-candidates draws from l the one with the highest log l - log g is taken.
// Numbers use truncated Gaussian kernels (on the log scale for loguniform), each as wide as the
// larger gap to its neighbours, clipped to [range / min(100, n + 1), range], as HyperOpt does;
// choices use counts plus one. Grid parameters cycle as in random search; the first --tpe-startup
// trials (and every trial while fewer than two have results) are random.
#include "tune/tpe.h"

#include <algorithm>
#include <cmath>

#include "gyre/errors.h"

namespace gyre::tune {
namespace {

constexpr double kPi = 3.14159265358979323846;

struct Kernel {
  double mu;
  double sigma;
};

double transform(const Param& p, double x) {
  return p.distribution == Distribution::kLogUniform ? std::log(x) : x;
}

double untransform(const Param& p, double u) {
  return p.distribution == Distribution::kLogUniform ? std::exp(u) : u;
}

// The range a kernel lives in, transformed. randint's is [low, high - 1], widened by half a step.
std::pair<double, double> bounds(const Param& p) {
  if (p.distribution == Distribution::kRandInt) return {p.low - 0.5, p.high - 0.5};
  return {transform(p, p.low), transform(p, p.high)};
}

std::vector<Kernel> parzen(const Param& p, std::vector<double> points) {
  const auto [lo, hi] = bounds(p);
  const double range = std::max(hi - lo, 1e-12);
  points.push_back((lo + hi) / 2);  // the prior's centre, in order among the others
  std::sort(points.begin(), points.end());
  const double minSigma = range / std::min(100.0, static_cast<double>(points.size()) + 1);
  std::vector<Kernel> kernels;
  for (std::size_t i = 0; i < points.size(); ++i) {
    const double left = i == 0 ? points[i] - lo : points[i] - points[i - 1];
    const double right = i + 1 == points.size() ? hi - points[i] : points[i + 1] - points[i];
    kernels.push_back({points[i], std::clamp(std::max(left, right), minSigma, range)});
  }
  kernels.push_back({(lo + hi) / 2, range});  // the prior itself
  return kernels;
}

double normalCdf(double x) {
  return 0.5 * std::erfc(-x / std::sqrt(2.0));
}

double logDensity(const std::vector<Kernel>& kernels, double x, double lo, double hi) {
  double sum = 0;
  for (const Kernel& k : kernels) {
    const double z = (x - k.mu) / k.sigma;
    const double mass = std::max(normalCdf((hi - k.mu) / k.sigma) - normalCdf((lo - k.mu) / k.sigma), 1e-12);
    sum += std::exp(-0.5 * z * z) / (k.sigma * std::sqrt(2 * kPi) * mass);
  }
  return std::log(std::max(sum / static_cast<double>(kernels.size()), 1e-300));
}

double draw(const std::vector<Kernel>& kernels, double lo, double hi, std::mt19937_64& rng) {
  std::uniform_int_distribution<std::size_t> pick(0, kernels.size() - 1);
  const Kernel& k = kernels[pick(rng)];
  std::normal_distribution<double> normal(k.mu, k.sigma);
  for (int attempt = 0; attempt < 64; ++attempt) {
    const double x = normal(rng);
    if (x >= lo && x <= hi) return x;
  }
  return std::clamp(k.mu, lo, hi);
}

Json numberValue(const Param& p, double u) {
  const double x = untransform(p, u);
  if (p.distribution == Distribution::kRandInt)
    return std::clamp<std::int64_t>(std::llround(x), static_cast<std::int64_t>(p.low),
                                    static_cast<std::int64_t>(p.high) - 1);
  if (p.distribution == Distribution::kQUniform) {
    const double v = std::round(x / p.q) * p.q;
    if (p.q == std::floor(p.q)) return static_cast<std::int64_t>(v);
    return v;
  }
  return std::clamp(x, p.low, p.high);
}

class Tpe final : public Searcher {
 public:
  Tpe(const SearcherOptions& o, const Space& space) : o_(o), space_(space) {}

  std::string describe() const override {
    return "tpe (" + std::to_string(total()) + " trials, the first " + std::to_string(o_.tpeStartup) +
           " random, seed " + std::to_string(o_.seed) + ")";
  }

  int total() const override { return o_.samples * static_cast<int>(space_.gridSize()); }

  Json suggest(int index, const std::vector<Trial>& trials, double sign) const override {
    Json config = randomConfig(space_, o_.seed, index, grid_.point(index));
    std::vector<std::pair<double, const Trial*>> scored;
    for (const Trial& t : trials)
      if (!std::isnan(t.best(sign))) scored.emplace_back(score(t.best(sign), sign), &t);
    if (index < o_.tpeStartup || scored.size() < 2) return config;
    std::stable_sort(scored.begin(), scored.end(),
                     [](const auto& a, const auto& b) { return a.first > b.first; });
    const auto good = std::max<std::size_t>(
        1, static_cast<std::size_t>(std::ceil(o_.tpeGamma * static_cast<double>(scored.size()))));
    std::mt19937_64 rng = trialGenerator(o_.seed ^ 0x5450450000000000ull, index);
    for (const Param& p : space_.params) {
      if (p.distribution == Distribution::kGrid) continue;
      std::vector<Json> below, above;
      for (std::size_t i = 0; i < scored.size(); ++i) {
        const Json& v =
            scored[i].second->config.contains(p.name) ? scored[i].second->config.at(p.name) : Json();
        if (!v.is_null()) (i < good ? below : above).push_back(v);
      }
      config[p.name] = p.distribution == Distribution::kChoice ? chooseCategory(p, below, above, rng)
                                                               : chooseNumber(p, below, above, rng);
    }
    return config;
  }

 private:
  Json chooseNumber(const Param& p, const std::vector<Json>& below, const std::vector<Json>& above,
                    std::mt19937_64& rng) const {
    auto points = [&](const std::vector<Json>& values) {
      std::vector<double> u;
      for (const Json& v : values)
        if (v.is_number() && (p.distribution != Distribution::kLogUniform || v.get<double>() > 0))
          u.push_back(transform(p, v.get<double>()));
      return u;
    };
    const std::vector<Kernel> l = parzen(p, points(below));
    const std::vector<Kernel> g = parzen(p, points(above));
    const auto [lo, hi] = bounds(p);
    double best = 0, bestGain = -INFINITY;
    for (int i = 0; i < o_.tpeCandidates; ++i) {
      const double x = draw(l, lo, hi, rng);
      const double gain = logDensity(l, x, lo, hi) - logDensity(g, x, lo, hi);
      if (gain > bestGain) {
        bestGain = gain;
        best = x;
      }
    }
    return numberValue(p, best);
  }

  Json chooseCategory(const Param& p, const std::vector<Json>& below, const std::vector<Json>& above,
                      std::mt19937_64& rng) const {
    auto weights = [&](const std::vector<Json>& values) {
      std::vector<double> w(p.values.size(), 1.0);
      for (const Json& v : values)
        for (std::size_t i = 0; i < p.values.size(); ++i)
          if (p.values[i] == v) w[i] += 1;
      return w;
    };
    const std::vector<double> l = weights(below), g = weights(above);
    double lSum = 0, gSum = 0;
    for (std::size_t i = 0; i < l.size(); ++i) {
      lSum += l[i];
      gSum += g[i];
    }
    std::discrete_distribution<std::size_t> pick(l.begin(), l.end());
    std::size_t best = 0;
    double bestGain = -INFINITY;
    for (int i = 0; i < o_.tpeCandidates; ++i) {
      const std::size_t c = pick(rng);
      const double gain = std::log(l[c] / lSum) - std::log(g[c] / gSum);
      if (gain > bestGain) {
        bestGain = gain;
        best = c;
      }
    }
    return p.values[best];
  }

  SearcherOptions o_;
  const Space& space_;
  mutable GridOrder grid_{space_.gridSize(), o_.seed};
};

}  // namespace

std::unique_ptr<Searcher> makeTpe(const SearcherOptions& o, const Space& space) {
  if (o.tpeStartup < 0) throw InvalidArgument("--tpe-startup must be at least 0");
  return std::make_unique<Tpe>(o, space);
}

}  // namespace gyre::tune
