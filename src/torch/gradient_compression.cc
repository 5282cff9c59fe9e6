#include "torch/gradient_compression.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "common/check.h"
#include "common/compression_spec.h"
#include "gyre/torch/distributed_optimizer.h"

namespace gyre::torch {

std::string_view toString(Compression compression) {
  switch (compression) {
    case Compression::kNone:
      return "none";
    case Compression::kFp16:
      return "fp16";
    case Compression::kBf16:
      return "bf16";
    case Compression::kTopK:
      return "topk";
    case Compression::kPowerSgd:
      return "powersgd";
  }
  return "?";
}

Compression parseCompression(std::string_view name) {
  DistributedOptimizerOptions o;
  setCompression(o, name);
  return o.compression;
}

void setCompression(DistributedOptimizerOptions& options, std::string_view spec) {
  const CompressionSpec parsed = parseCompressionSpec(spec);
  if (parsed.kind == "none") options.compression = Compression::kNone;
  if (parsed.kind == "fp16") options.compression = Compression::kFp16;
  if (parsed.kind == "bf16") options.compression = Compression::kBf16;
  if (parsed.kind == "topk") {
    options.compression = Compression::kTopK;
    options.topkRatio = parsed.ratio.value_or(options.topkRatio);
  }
  if (parsed.kind == "powersgd") {
    options.compression = Compression::kPowerSgd;
    options.powerSgdRank = parsed.rank.value_or(options.powerSgdRank);
  }
}

}  // namespace gyre::torch

namespace gyre::torch::detail {
namespace {

using ::torch::Tensor;

// Sums (or averages) a float32 tensor over the ranks, in place.
void allreduceInPlace(Communicator& comm, Tensor& t, bool average, Timeout timeout) {
  AllreduceOptions o;
  o.op = average ? ReduceOp::kAverage : ReduceOp::kSum;
  o.timeout = timeout;
  comm.allreduce(t.data_ptr<float>(), t.data_ptr<float>(), static_cast<std::size_t>(t.numel()), o);
}

}  // namespace

Tensor largestEntries(const Tensor& magnitude, std::int64_t k) {
  const auto topIndices = [k](const Tensor& t) {
    return std::get<1>(t.topk(k, 0, /*largest=*/true, /*sorted=*/false));
  };
  const std::int64_t n = magnitude.numel();
  constexpr std::int64_t kSample = 8192;
  // A sample is no cheaper than the whole where the tensor is small or k a large share of it.
  if (n <= 8 * kSample || k * 8 > n) return topIndices(magnitude);
  // A fixed, spread sample: i * P mod n for a prime P that does not divide n visits the entries
  // in an order unrelated to the layers' row lengths.
  constexpr std::int64_t kStride = 2'654'435'761;
  const Tensor at = ::torch::arange(kSample, ::torch::kLong).mul_(kStride % n).remainder_(n);
  // Aim 25% above k (plus a margin for the sample's own spread), so the candidates hold the top
  // k nearly always and are few enough to sort cheaply.
  const double share = static_cast<double>(k) / static_cast<double>(n);
  const std::int64_t above = std::min<std::int64_t>(
      kSample, std::llround(1.25 * share * kSample + 3 * std::sqrt(share * kSample)) + 1);
  const float threshold =
      std::get<0>(magnitude.index_select(0, at).kthvalue(kSample - above + 1)).item<float>();
  const Tensor candidates = (magnitude >= threshold).nonzero().squeeze(1);
  if (candidates.numel() < k) return topIndices(magnitude);
  return candidates.index_select(0, topIndices(magnitude.index_select(0, candidates)));
}

namespace {

class TopK final : public GradientCompressor {
 public:
  explicit TopK(double ratio) : ratio_(ratio) {}

  std::size_t reduce(Communicator& comm, const std::vector<Tensor>& grads, bool average,
                     Timeout timeout) override {
    ::torch::NoGradGuard noGrad;
    std::vector<Tensor> flats;
    for (const Tensor& g : grads) flats.push_back(g.reshape({-1}));
    const Tensor flat = ::torch::cat(flats);
    const std::int64_t n = flat.numel();
    if (error_.numel() != n) error_ = ::torch::zeros({n});
    // What is due: this step's gradients plus what earlier steps left out.
    error_.add_(flat);
    const std::int64_t k = std::clamp<std::int64_t>(std::llround(ratio_ * static_cast<double>(n)), 1, n);
    const Tensor index = largestEntries(error_.abs(), k);
    // The message: k values, then their k indices as int32 in float32 slots.
    Tensor message = ::torch::empty({2 * k});
    message.narrow(0, 0, k).copy_(error_.index_select(0, index));
    message.narrow(0, k, k).view(::torch::kInt32).copy_(index);
    error_.index_fill_(0, index, 0);  // sent: no longer owed
    const int world = comm.size();
    Tensor all = ::torch::empty({world * 2 * k});
    CollectiveOptions o;
    o.timeout = timeout;
    comm.allgather(message.data_ptr<float>(), all.data_ptr<float>(), static_cast<std::size_t>(2 * k), o);
    Tensor dense = ::torch::zeros({n});
    for (int r = 0; r < world; ++r) {
      const Tensor part = all.narrow(0, static_cast<std::int64_t>(r) * 2 * k, 2 * k);
      dense.index_add_(0, part.narrow(0, k, k).view(::torch::kInt32).to(::torch::kLong),
                       part.narrow(0, 0, k));
    }
    if (average) dense.div_(world);
    std::int64_t at = 0;
    for (const Tensor& g : grads) {
      g.copy_(dense.narrow(0, at, g.numel()).view(g.sizes()));
      at += g.numel();
    }
    return static_cast<std::size_t>(2 * k) * sizeof(float);
  }

 private:
  double ratio_;
  Tensor error_;  // [n]: the entries not sent yet
};

class PowerSgd final : public GradientCompressor {
 public:
  PowerSgd(int rank, const std::vector<std::vector<std::int64_t>>& shapes) : rank_(rank) { plan(shapes); }

  std::size_t reduce(Communicator& comm, const std::vector<Tensor>& grads, bool average,
                     Timeout timeout) override {
    ::torch::NoGradGuard noGrad;
    GYRE_ENFORCE_EQ(states_.size(), grads.size(), "PowerSGD: the gradients changed");
    // First allreduce: every compressed matrix's P = M Q, then the uncompressed gradients.
    std::vector<Tensor> first;
    for (std::size_t i = 0; i < grads.size(); ++i) {
      State& s = states_[i];
      if (!s.compressed) {
        first.push_back(grads[i].reshape({-1}));
        continue;
      }
      s.error.add_(grads[i].reshape({s.rows, s.cols}));  // M: the gradient plus what is owed
      first.push_back(s.error.mm(s.q).reshape({-1}));
    }
    Tensor buffer = ::torch::cat(first);
    std::size_t bytes = static_cast<std::size_t>(buffer.numel()) * sizeof(float);
    allreduceInPlace(comm, buffer, average, timeout);
    std::int64_t at = 0;
    std::vector<Tensor> ps(grads.size());
    for (std::size_t i = 0; i < grads.size(); ++i) {
      const State& s = states_[i];
      if (!s.compressed) {
        grads[i].copy_(buffer.narrow(0, at, grads[i].numel()).view(grads[i].sizes()));
        at += grads[i].numel();
        continue;
      }
      ps[i] = orthonormalColumns(buffer.narrow(0, at, s.rows * rank_).view({s.rows, rank_}));
      at += s.rows * rank_;
    }
    // Second allreduce: Q = M^T P of every compressed matrix.
    std::vector<Tensor> second;
    for (std::size_t i = 0; i < grads.size(); ++i)
      if (states_[i].compressed) second.push_back(states_[i].error.t().mm(ps[i]).reshape({-1}));
    if (second.empty()) return bytes;
    buffer = ::torch::cat(second);
    bytes += static_cast<std::size_t>(buffer.numel()) * sizeof(float);
    allreduceInPlace(comm, buffer, average, timeout);
    at = 0;
    for (std::size_t i = 0; i < grads.size(); ++i) {
      State& s = states_[i];
      if (!s.compressed) continue;
      s.q.copy_(buffer.narrow(0, at, s.cols * rank_).view({s.cols, rank_}));  // the next step's start
      at += s.cols * rank_;
      const Tensor approx = ps[i].mm(s.q.t());
      // What the approximation left out of this rank's M: its share of the sum's approximation.
      s.error.sub_(average ? approx : approx / comm.size());
      redrawEmptyColumns(s.q);
      grads[i].copy_(approx.view(grads[i].sizes()));
    }
    return bytes;
  }

 private:
  struct State {
    bool compressed = false;
    std::int64_t rows = 0, cols = 0;
    Tensor error;  // [rows, cols]
    Tensor q;      // [cols, rank]
  };

  void plan(const std::vector<std::vector<std::int64_t>>& shapes) {
    // The same seed on every rank, so Q starts the same everywhere.
    auto generator = ::at::detail::createCPUGenerator(0x9e3779b97f4a7c15ULL);
    std::int64_t largest = 0;  // the highest rank that compresses some matrix
    for (const std::vector<std::int64_t>& shape : shapes) {
      State s;
      if (shape.size() >= 2) {
        s.rows = shape[0];
        s.cols = 1;
        for (std::size_t d = 1; d < shape.size(); ++d) s.cols *= shape[d];
        // Sent as P and Q only where that is smaller: (n + m) r < n m (so r < min(n, m)).
        s.compressed = (s.rows + s.cols) * rank_ < s.rows * s.cols;
        if (s.rows + s.cols > 0) largest = std::max(largest, (s.rows * s.cols - 1) / (s.rows + s.cols));
      }
      if (s.compressed) {
        s.error = ::torch::zeros({s.rows, s.cols});
        s.q = ::torch::randn({s.cols, rank_}, generator);
      }
      states_.push_back(std::move(s));
    }
    GYRE_ARG_CHECK(std::any_of(states_.begin(), states_.end(), [](const State& s) { return s.compressed; }),
                   "PowerSGD rank ", rank_, " compresses none of the gradients: ",
                   largest == 0
                       ? std::string("the model has no weight matrix that a low rank makes smaller")
                       : "choose a rank of at most " + std::to_string(largest) +
                             " (a matrix n x m travels as (n + m) x rank numbers only when that is fewer)");
  }

  // A column of Q that came back zero (a step whose gradient was zero) would stay zero through
  // every warm start: it starts again from a random column. Q is the same on every rank (an
  // allreduce's result), so every rank redraws the same columns from the same draw.
  void redrawEmptyColumns(Tensor& q) {
    // One reduction over Q each step (no column is zero: nothing to do); column by column only
    // when one is.
    if (q.abs().amax(0).min().item<float>() > 0) return;
    for (std::int64_t c = 0; c < q.size(1); ++c) {
      Tensor col = q.select(1, c);
      if (col.abs().max().item<float>() > 0) continue;
      auto generator = ::at::detail::createCPUGenerator(0x5bd1e995ULL + redraws_++);
      col.copy_(::torch::randn({q.size(0)}, generator));
    }
  }

  // The columns of p made orthonormal (Gram-Schmidt, as the paper's reference implementation); a
  // column with nothing left of its own (a zero gradient) becomes zero.
  static Tensor orthonormalColumns(Tensor p) {
    for (std::int64_t c = 0; c < p.size(1); ++c) {
      Tensor col = p.select(1, c);
      for (std::int64_t d = 0; d < c; ++d) {
        const Tensor prev = p.select(1, d);
        col.sub_(prev * prev.dot(col));
      }
      const double norm = col.norm().item<double>();
      if (norm > 1e-12)
        col.div_(norm);
      else
        col.zero_();
    }
    return p;
  }

  int rank_;
  std::vector<State> states_;
  std::uint64_t redraws_ = 0;  // the same count on every rank
};

}  // namespace

std::unique_ptr<GradientCompressor> makeTopK(double ratio) {
  GYRE_ARG_CHECK(std::isfinite(ratio) && ratio > 0 && ratio <= 1,
                 "top-k compression: the ratio must be in (0, 1] (got ", ratio, ")");
  return std::make_unique<TopK>(ratio);
}

std::unique_ptr<GradientCompressor> makePowerSgd(int rank,
                                                 const std::vector<std::vector<std::int64_t>>& shapes) {
  GYRE_ARG_CHECK(rank >= 1, "PowerSGD: the rank must be at least 1 (got ", rank, ")");
  return std::make_unique<PowerSgd>(rank, shapes);
}

}  // namespace gyre::torch::detail
