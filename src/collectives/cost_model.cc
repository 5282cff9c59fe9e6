// The α-β-γ model: a message costs α, each byte moved between two ranks β, each byte reduced γ.
// For n bytes over p ranks, with p' the largest power of two <= p, L = log2 p',
// F = 2α + 2nβ + nγ when p != p' (MPICH's fold in and out), 0 otherwise, and d = floor(log2 p):
//   naive      2(p-1)·α + 2(p-1)·n·β + (p-1)·n·γ          (rank 0 moves and reduces everything)
//   ring       2(p-1)·α + 2(p-1)/p·n·β + (p-1)/p·n·γ
//   halving-doubling, Rabenseifner   2L·α + 2(p'-1)/p'·n·β + (p'-1)/p'·n·γ + F
//   halving-doubling, recursive doubling (small)   L·(α + n·β + n·γ) + F
//   tree       (2d + k - 1)·(α + s·((c+1)·β + c·γ)), k = ceil(n / 64 KiB) pipeline segments of
//              s = n/k bytes, c = min(2, p-1) children: the up and down streams overlap, an
//              inner rank takes in c+1 segments and sends c+1 per stage and reduces c.
// These assume a core per rank. With more ranks than cores the time of small and mid-sized
// messages is set by how often ranks wait for each other to be scheduled, which no formula of
// α, β and γ captures (with 4 ranks on 2 cores the tree beats the ring 1.5-5x from 4 to 64 KiB),
// so calibrate() also times every variant at 4 KiB and 64 KiB. predict() then interpolates
// between those two timings, takes the 4 KiB one below, and adds the formula's growth beyond
// 64 KiB to the 64 KiB one: measurements rank the algorithms for small and mid messages, the
// bandwidth terms for large ones.
//
// calibrate() measures, on the communicator, all ranks at once:
//   α: half the median of 24 8-byte round trips between ranks r and r^1 (the last rank of an
//      odd p pairs with p-2 afterwards);
//   β: the best of three 1 MiB one-way transfers (with a 1-byte acknowledgement) between the
//      same pairs, after one untimed; on shared-memory rings that are still cold (their first
//      4 MiB pay page faults) this reads up to 10x high, which only steepens how predictions
//      grow beyond 64 KiB for every algorithm alike;
//   γ: the best of three reduce::apply calls on 1 MiB of float32;
//   timings: each variant's second in-place allreduce of 4 KiB and of 64 KiB of float32 zeros
//      (the first warms the links up), each started right after a barrier.
// Every rank then takes the largest value of each measurement across ranks (a ring allreduce
// with kMax), so every rank holds the same model and chooses alike.
#include "collectives/cost_model.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "collectives/algorithms.h"
#include "collectives/context.h"
#include "collectives/op_list.h"
#include "common/check.h"
#include "common/clock.h"
#include "common/reduce.h"

namespace gyre::collectives {
namespace {

constexpr double kTreeSegment = 64 * 1024;
using AllreduceFn = void (*)(Context&, const void*, void*, std::size_t, DataType, ReduceOp);
constexpr AllreduceFn kVariantFns[kAllreduceVariants] = {
    allreduceNaive, allreduceRing, allreduceRecursiveDoubling, allreduceRabenseifner, allreduceTree};

struct Shape {
  Shape(std::size_t bytes, int ranks)
      : n(static_cast<double>(bytes)),
        p(ranks),
        p2(static_cast<int>(std::bit_floor(static_cast<unsigned>(std::max(ranks, 1))))),
        logP2(std::countr_zero(static_cast<unsigned>(p2))) {}
  double n;
  int p;
  int p2;
  int logP2;
};

double fold(const CostModel& m, const Shape& s) {
  return s.p == s.p2 ? 0.0 : 2 * m.alpha + 2 * s.n * m.beta + s.n * m.gamma;
}

double naive(const CostModel& m, const Shape& s) {
  const double k = s.p - 1;
  return 2 * k * m.alpha + 2 * k * s.n * m.beta + k * s.n * m.gamma;
}

double ring(const CostModel& m, const Shape& s) {
  const double share = static_cast<double>(s.p - 1) / s.p;
  return 2 * (s.p - 1) * m.alpha + 2 * share * s.n * m.beta + share * s.n * m.gamma;
}

double rabenseifner(const CostModel& m, const Shape& s) {
  const double share = static_cast<double>(s.p2 - 1) / s.p2;
  return 2 * s.logP2 * m.alpha + 2 * share * s.n * m.beta + share * s.n * m.gamma + fold(m, s);
}

double recursiveDoubling(const CostModel& m, const Shape& s) {
  return s.logP2 * (m.alpha + s.n * m.beta + s.n * m.gamma) + fold(m, s);
}

double tree(const CostModel& m, const Shape& s) {
  const int depth = std::bit_width(static_cast<unsigned>(s.p)) - 1;
  const double segments = std::max(1.0, std::ceil(s.n / kTreeSegment));
  const double segment = s.n / segments;
  const double children = std::min(2, s.p - 1);
  return (2 * depth + segments - 1) * (m.alpha + segment * ((children + 1) * m.beta + children * m.gamma));
}

const CostModel& effective(const CostModel& m) {
  static const CostModel kTypical = CostModel::typical();
  return m.calibrated ? m : kTypical;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Round trips with `partner`; the leading side returns {alpha, beta}, the other {0, 0}.
struct LinkTerms {
  double alpha = 0;
  double beta = 0;
};

LinkTerms measureLink(Context& c, std::byte* buffer, std::size_t big, int partner, bool lead) {
  constexpr int kWarmup = 3;
  constexpr int kRounds = 24;
  constexpr int kBulkRounds = 3;
  std::vector<double> times;
  for (int i = 0; i < kWarmup + kRounds; ++i) {
    OpList ops;
    const auto start = Clock::now();
    if (lead) {
      ops.send(partner, buffer, 8);
      ops.recv(partner, buffer + 8, 8);
    } else {
      const int arrived = ops.recv(partner, buffer, 8);
      ops.send(partner, buffer, 8, arrived);
    }
    ops.run(c);
    if (i >= kWarmup) times.push_back(secondsSince(start));
  }
  LinkTerms terms;
  if (lead) terms.alpha = median(times) / 2;
  times.clear();
  std::byte ack{0};
  for (int i = 0; i < kBulkRounds + 1; ++i) {  // the first warms the link up
    OpList ops;
    const auto start = Clock::now();
    if (lead) {
      ops.send(partner, buffer, big);
      ops.recv(partner, &ack, 1);
      ops.run(c);
    } else {
      ops.recv(partner, buffer, big);
      ops.run(c);
      ops.send(partner, &ack, 1);
      ops.run(c);
    }
    if (i > 0) times.push_back(secondsSince(start));
  }
  if (lead) {
    const double t = *std::min_element(times.begin(), times.end());
    terms.beta = std::max(t - 2 * terms.alpha, t / 2) / static_cast<double>(big);
  }
  return terms;
}

double parseTerm(std::string_view text, std::string_view spec) {
  double value = 0;
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  GYRE_ARG_CHECK(ec == std::errc() && end == text.data() + text.size() && std::isfinite(value) && value >= 0,
                 "GYRE_COST_MODEL '", spec, "': '", text, "' is not a non-negative number");
  return value;
}

}  // namespace

CostModel CostModel::typical() {
  CostModel m;
  m.alpha = 5e-6;     // 5 µs per message: shared memory with more ranks than cores
  m.beta = 1 / 5e9;   // 5 GB/s between two ranks
  m.gamma = 1 / 8e9;  // 8 GB/s reduced by one core
  return m;
}

namespace {

double formula(const CostModel& m, AllreduceVariant variant, std::size_t bytes, int p) {
  const Shape s(bytes, p);
  switch (variant) {
    case AllreduceVariant::kNaive:
      return naive(m, s);
    case AllreduceVariant::kRing:
      return ring(m, s);
    case AllreduceVariant::kRecursiveDoubling:
      return recursiveDoubling(m, s);
    case AllreduceVariant::kRabenseifner:
      return rabenseifner(m, s);
    case AllreduceVariant::kTree:
      return tree(m, s);
  }
  GYRE_THROW(InvalidArgument, "unknown allreduce variant ", static_cast<int>(variant));
}

}  // namespace

double CostModel::predict(AllreduceVariant variant, std::size_t bytes, int p) const {
  if (p <= 1 || bytes == 0) return 0;
  if (measuredSize != p) return formula(*this, variant, bytes, p);
  const double small = atSmall[static_cast<std::size_t>(variant)];
  const double mid = atMid[static_cast<std::size_t>(variant)];
  if (bytes <= kSmallBytes) return small;
  if (bytes <= kMidBytes)
    return small + (mid - small) * static_cast<double>(bytes - kSmallBytes) /
                       static_cast<double>(kMidBytes - kSmallBytes);
  const double large = atLarge[static_cast<std::size_t>(variant)];
  if (large <= 0)
    return mid + std::max(0.0, formula(*this, variant, bytes, p) - formula(*this, variant, kMidBytes, p));
  if (bytes <= kLargeBytes)
    return mid + (large - mid) * static_cast<double>(bytes - kMidBytes) /
                     static_cast<double>(kLargeBytes - kMidBytes);
  return large + std::max(0.0, formula(*this, variant, bytes, p) - formula(*this, variant, kLargeBytes, p));
}

double CostModel::predict(AllreduceAlgorithm algorithm, std::size_t bytes, int p) const {
  switch (algorithm) {
    case AllreduceAlgorithm::kAuto:
      return predict(choose(bytes, p), bytes, p);
    case AllreduceAlgorithm::kNaive:
      return predict(AllreduceVariant::kNaive, bytes, p);
    case AllreduceAlgorithm::kRing:
    // One link class, as this model knows it, is one host, where the hierarchical allreduce runs
    // the ring (its phase across hosts has a model of its own: collectives/topology.h).
    case AllreduceAlgorithm::kHierarchical:
      return predict(AllreduceVariant::kRing, bytes, p);
    case AllreduceAlgorithm::kTree:
      return predict(AllreduceVariant::kTree, bytes, p);
    case AllreduceAlgorithm::kHalvingDoubling:
      // The element count is unknown here: assume elements of at most 8 bytes.
      return predict(useRecursiveDoubling(*this, bytes, bytes / 8, p) ? AllreduceVariant::kRecursiveDoubling
                                                                      : AllreduceVariant::kRabenseifner,
                     bytes, p);
  }
  GYRE_THROW(InvalidArgument, "unknown allreduce algorithm ", static_cast<int>(algorithm));
}

// Up to kMidBytes the measured times rank every algorithm. Beyond them only the bandwidth-optimal
// ones (ring, halving-doubling) compete: extrapolating a latency-bound measurement (the naive
// algorithm wins 64 KiB when ranks outnumber cores) would otherwise keep a bandwidth-poor
// algorithm chosen at 16 MiB, where it loses by 1.3x (np=4, 2 cores).
AllreduceAlgorithm CostModel::choose(std::size_t bytes, int p) const {
  const CostModel& m = effective(*this);
  AllreduceAlgorithm best = AllreduceAlgorithm::kRing;
  double bestTime = m.predict(best, bytes, p);
  const bool bandwidthBound = bytes > kMidBytes;
  for (AllreduceAlgorithm a :
       {AllreduceAlgorithm::kHalvingDoubling, AllreduceAlgorithm::kTree, AllreduceAlgorithm::kNaive}) {
    if (bandwidthBound && a != AllreduceAlgorithm::kHalvingDoubling) continue;
    const double t = m.predict(a, bytes, p);
    if (t < bestTime) best = a, bestTime = t;
  }
  return best;
}

bool useRecursiveDoubling(const CostModel& model, std::size_t bytes, std::size_t count, int p) {
  if (count < std::bit_floor(static_cast<std::size_t>(std::max(p, 1)))) return true;
  const CostModel& m = effective(model);
  return m.predict(AllreduceVariant::kRecursiveDoubling, bytes, p) <
         m.predict(AllreduceVariant::kRabenseifner, bytes, p);
}

void calibrate(Context& c) {
  const int p = c.size();
  const int r = c.rank();
  constexpr std::size_t kBig = std::size_t{1} << 20;
  // Measurements, agreed by their maximum: alpha, beta, gamma, then per variant the seconds at
  // kSmallBytes and at kMidBytes.
  // Then the ring's and Rabenseifner's seconds at kLargeBytes.
  constexpr std::size_t kLargeIndex = 3 + 2 * kAllreduceVariants;
  constexpr AllreduceVariant kLargeVariants[] = {AllreduceVariant::kRing, AllreduceVariant::kRabenseifner};
  constexpr std::size_t kTerms = kLargeIndex + std::size(kLargeVariants);
  double terms[kTerms] = {};
  {
    std::byte* buffer = bytePtr(c.scratch.get(3 * kBig));
    auto keep = [&](const LinkTerms& t) {
      terms[0] = std::max(terms[0], t.alpha);
      terms[1] = std::max(terms[1], t.beta);
    };
    if ((r ^ 1) < p) keep(measureLink(c, buffer, kBig, r ^ 1, r % 2 == 0));
    if (p % 2 == 1 && p > 1) {
      if (r == p - 1) keep(measureLink(c, buffer, kBig, p - 2, true));
      if (r == p - 2) keep(measureLink(c, buffer, kBig, p - 1, false));
    }
    float* a = reinterpret_cast<float*>(buffer + kBig);
    const float* b = reinterpret_cast<const float*>(buffer + 2 * kBig);
    std::fill(buffer + kBig, buffer + 3 * kBig, std::byte{0});
    double best = std::numeric_limits<double>::infinity();
    for (int i = 0; i < 3; ++i) {
      const auto start = Clock::now();
      reduce::apply(DataType::kFloat32, ReduceOp::kSum, a, a, b, kBig / sizeof(float));
      best = std::min(best, secondsSince(start));
    }
    terms[2] = best / static_cast<double>(kBig);
  }

  // The algorithms use the scratch buffer themselves: time them on a buffer of zeros of their
  // own (zeros: no denormals to slow the reductions down).
  if (p > 1) {
    std::vector<float> data(CostModel::kMidBytes / sizeof(float), 0.0f);
    for (std::size_t v = 0; v < kAllreduceVariants; ++v) {
      for (int size = 0; size < 2; ++size) {
        const std::size_t count = (size == 0 ? CostModel::kSmallBytes : CostModel::kMidBytes) / sizeof(float);
        double took = 0;
        for (int i = 0; i < 2; ++i) {  // the first run warms the links up, the second is timed
          barrierDissemination(c);
          const auto start = Clock::now();
          kVariantFns[v](c, data.data(), data.data(), count, DataType::kFloat32, ReduceOp::kSum);
          took = secondsSince(start);
        }
        terms[3 + 2 * v + static_cast<std::size_t>(size)] = took;
      }
    }
    // Best of two timed runs after a warm-up: at this size a descheduled rank costs more than the
    // difference being measured.
    std::vector<float> large(CostModel::kLargeBytes / sizeof(float), 0.0f);
    for (std::size_t k = 0; k < std::size(kLargeVariants); ++k) {
      double best = std::numeric_limits<double>::infinity();
      for (int i = 0; i < 3; ++i) {
        barrierDissemination(c);
        const auto start = Clock::now();
        kVariantFns[static_cast<std::size_t>(kLargeVariants[k])](c, large.data(), large.data(), large.size(),
                                                                  DataType::kFloat32, ReduceOp::kSum);
        if (i > 0) best = std::min(best, secondsSince(start));
      }
      terms[kLargeIndex + k] = best;
    }
  }

  allreduceRing(c, terms, terms, kTerms, DataType::kFloat64, ReduceOp::kMax);
  CostModel& m = c.cost;
  m.alpha = terms[0];
  m.beta = terms[1];
  m.gamma = terms[2];
  m.measuredSize = p > 1 ? p : 0;
  for (std::size_t v = 0; v < kAllreduceVariants; ++v) {
    m.atSmall[v] = terms[3 + 2 * v];
    m.atMid[v] = std::max(terms[4 + 2 * v], terms[3 + 2 * v]);  // noise must not make it shrink
  }
  for (std::size_t k = 0; k < std::size(kLargeVariants); ++k) {
    const auto v = static_cast<std::size_t>(kLargeVariants[k]);
    m.atLarge[v] = p > 1 ? std::max(terms[kLargeIndex + k], m.atMid[v]) : 0.0;
  }
  m.calibrated = true;
}

CostModel parseCostModel(std::string_view spec) {
  std::vector<std::string_view> parts;
  std::string_view rest = spec;
  for (std::size_t comma; (comma = rest.find(',')) != std::string_view::npos; rest.remove_prefix(comma + 1))
    parts.push_back(rest.substr(0, comma));
  parts.push_back(rest);
  GYRE_ARG_CHECK(parts.size() == 3, "GYRE_COST_MODEL '", spec, "': expected alpha_us,beta_GBps,gamma_GBps");
  const double alphaUs = parseTerm(parts[0], spec);
  const double betaGBps = parseTerm(parts[1], spec);
  const double gammaGBps = parseTerm(parts[2], spec);
  GYRE_ARG_CHECK(betaGBps > 0 && gammaGBps > 0, "GYRE_COST_MODEL '", spec, "': bandwidths must be positive");
  CostModel m;
  m.calibrated = true;
  m.alpha = alphaUs * 1e-6;
  m.beta = 1 / (betaGBps * 1e9);
  m.gamma = 1 / (gammaGBps * 1e9);
  return m;
}

}  // namespace gyre::collectives
