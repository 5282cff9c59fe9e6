// Pipeline schedules (what each rank does, in order), stage balancing, and each rank's plan of
// exchanges with the check that the plans of all ranks cannot deadlock.
#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "common/check.h"
#include "gyre/errors.h"
#include "gyre/torch/pipeline.h"
#include "torch/pipeline_plan.h"

namespace gyre::torch {

std::string_view toString(PipelineSchedule schedule) {
  switch (schedule) {
    case PipelineSchedule::kGPipe: return "gpipe";
    case PipelineSchedule::kOneFOneB: return "1f1b";
    case PipelineSchedule::kInterleaved: return "interleaved";
    case PipelineSchedule::kZeroBubble: return "zero-bubble";
  }
  return "?";
}

PipelineSchedule pipelineScheduleFrom(std::string_view name) {
  for (const PipelineSchedule s : {PipelineSchedule::kGPipe, PipelineSchedule::kOneFOneB,
                                   PipelineSchedule::kInterleaved, PipelineSchedule::kZeroBubble})
    if (toString(s) == name) return s;
  GYRE_THROW(InvalidArgument, "pipeline schedule '", name, "': gpipe, 1f1b, interleaved or zero-bubble");
}

std::string toString(const PipelineAction& a) {
  static constexpr char kLetters[] = {'F', 'B', 'I', 'W'};
  std::string text = kLetters[static_cast<int>(a.kind)] + std::to_string(a.microBatch);
  if (a.chunk > 0) text += "." + std::to_string(a.chunk);
  return text;
}

namespace {

using Kind = PipelineAction::Kind;

PipelineAction act(Kind kind, int microBatch, int chunk = 0) {
  return PipelineAction{kind, microBatch, chunk};
}

// PipeDream-flush: p − 1 − rank forwards to fill the pipe, then one forward and one backward in
// turn, then the backwards left.
std::vector<PipelineAction> oneFOneB(int rank, int p, int m) {
  const int warmup = std::min(p - 1 - rank, m);
  std::vector<PipelineAction> out;
  for (int i = 0; i < warmup; ++i) out.push_back(act(Kind::kForward, i));
  for (int i = 0; i < m - warmup; ++i) {
    out.push_back(act(Kind::kForward, warmup + i));
    out.push_back(act(Kind::kBackward, i));
  }
  for (int i = m - warmup; i < m; ++i) out.push_back(act(Kind::kBackward, i));
  return out;
}

// ZB-H1: 1F1B with each backward split; rank r runs the weight gradient of micro-batch j after the
// input gradient of micro-batch j + (p − 1 − r), so its Ws fill the time 1F1B spends waiting for
// the later stages' gradients in the cool-down. The last stage defers nothing.
std::vector<PipelineAction> zeroBubble(int rank, int p, int m) {
  const int defer = p - 1 - rank;
  std::vector<PipelineAction> out;
  int nextWeight = 0;
  for (const PipelineAction& a : oneFOneB(rank, p, m)) {
    if (a.kind == Kind::kForward) {
      out.push_back(a);
      continue;
    }
    out.push_back(act(Kind::kBackwardInput, a.microBatch));
    if (a.microBatch - defer >= nextWeight) out.push_back(act(Kind::kBackwardWeight, nextWeight++));
  }
  while (nextWeight < m) out.push_back(act(Kind::kBackwardWeight, nextWeight++));
  return out;
}

// Megatron-LM's interleaved 1F1B: forward k runs chunk (k mod p·v) / p on micro-batch
// (k / (p·v))·p + k mod p; backward k the chunks in reverse. Warm-up: 2(p − 1 − rank) + (v − 1)·p
// forwards (all of them when m = p).
std::vector<PipelineAction> interleaved(int rank, int p, int m, int v) {
  const int total = m * v;
  const auto chunkOf = [&](int k, bool forward) {
    const int chunk = (k % (p * v)) / p;
    return forward ? chunk : v - 1 - chunk;
  };
  const auto microBatchOf = [&](int k) { return (k / (p * v)) * p + k % p; };
  const int warmup = m == p ? total : std::min(total, 2 * (p - 1 - rank) + (v - 1) * p);
  std::vector<PipelineAction> out;
  for (int k = 0; k < warmup; ++k) out.push_back(act(Kind::kForward, microBatchOf(k), chunkOf(k, true)));
  for (int k = 0; k < total - warmup; ++k) {
    const int f = k + warmup;
    out.push_back(act(Kind::kForward, microBatchOf(f), chunkOf(f, true)));
    out.push_back(act(Kind::kBackward, microBatchOf(k), chunkOf(k, false)));
  }
  for (int k = total - warmup; k < total; ++k)
    out.push_back(act(Kind::kBackward, microBatchOf(k), chunkOf(k, false)));
  return out;
}

}  // namespace

std::vector<PipelineAction> pipelineActions(PipelineSchedule schedule, int rank, int p, int m, int v) {
  GYRE_ARG_CHECK(p >= 1 && rank >= 0 && rank < p, "pipeline rank ", rank, " of ", p, " stages");
  GYRE_ARG_CHECK(m >= 1, "a pipeline needs at least 1 micro-batch; got ", m);
  GYRE_ARG_CHECK(v >= 1, "a pipeline needs at least 1 stage per rank; got ", v);
  GYRE_ARG_CHECK(v == 1 || schedule == PipelineSchedule::kInterleaved, "schedule ", toString(schedule),
                 " runs one stage per rank; ", v, " stages per rank (virtual stages) need the interleaved schedule");
  switch (schedule) {
    case PipelineSchedule::kGPipe: {
      std::vector<PipelineAction> out;
      for (int i = 0; i < m; ++i) out.push_back(act(Kind::kForward, i));
      for (int i = 0; i < m; ++i) out.push_back(act(Kind::kBackward, i));
      return out;
    }
    case PipelineSchedule::kOneFOneB: return oneFOneB(rank, p, m);
    case PipelineSchedule::kZeroBubble: return zeroBubble(rank, p, m);
    case PipelineSchedule::kInterleaved:
      GYRE_ARG_CHECK(m % p == 0, "the interleaved schedule takes micro-batches in groups of the ", p,
                     " pipeline ranks: ", m, " micro-batches is not a multiple of ", p);
      return interleaved(rank, p, m, v);
  }
  GYRE_THROW(InvalidArgument, "unknown pipeline schedule");
}

double idealBubble(PipelineSchedule schedule, int p, int m, int v) {
  const double virtualStages = schedule == PipelineSchedule::kInterleaved ? v : 1;
  return (p - 1) / (virtualStages * m + p - 1);
}

std::vector<int> balanceEvenly(int layers, int stages) {
  GYRE_ARG_CHECK(stages >= 1 && layers >= stages, "a model of ", layers, " layers cannot be cut into ", stages,
                 " pipeline stages: each needs at least one layer");
  std::vector<int> balance(static_cast<std::size_t>(stages), layers / stages);
  for (int i = 0; i < layers % stages; ++i) ++balance[static_cast<std::size_t>(i)];
  return balance;
}

std::vector<int> balanceByCost(const std::vector<double>& cost, int stages) {
  const int layers = static_cast<int>(cost.size());
  GYRE_ARG_CHECK(stages >= 1 && layers >= stages, "a model of ", layers, " layers cannot be cut into ", stages,
                 " pipeline stages: each needs at least one layer");
  for (std::size_t i = 0; i < cost.size(); ++i)
    GYRE_ARG_CHECK(std::isfinite(cost[i]) && cost[i] >= 0, "layer ", i, "'s cost ", cost[i],
                   " is not a finite number of at least 0");
  // Dynamic programming over prefixes: best[k][i] = the least largest stage of the first i layers
  // in k stages; cut[k][i] the start of the last of those stages.
  std::vector<double> prefix(cost.size() + 1, 0.0);
  for (std::size_t i = 0; i < cost.size(); ++i) prefix[i + 1] = prefix[i] + cost[i];
  const double kInf = std::numeric_limits<double>::infinity();
  const auto n = static_cast<std::size_t>(layers), s = static_cast<std::size_t>(stages);
  std::vector<std::vector<double>> best(s + 1, std::vector<double>(n + 1, kInf));
  std::vector<std::vector<std::size_t>> cut(s + 1, std::vector<std::size_t>(n + 1, 0));
  best[0][0] = 0;
  for (std::size_t k = 1; k <= s; ++k)
    for (std::size_t i = k; i <= n; ++i)
      for (std::size_t j = k - 1; j < i; ++j) {
        const double worst = std::max(best[k - 1][j], prefix[i] - prefix[j]);
        if (worst < best[k][i]) best[k][i] = worst, cut[k][i] = j;
      }
  std::vector<int> balance(s);
  for (std::size_t k = s, i = n; k >= 1; --k) {
    balance[k - 1] = static_cast<int>(i - cut[k][i]);
    i = cut[k][i];
  }
  return balance;
}

namespace pipeline {

namespace {

// What an action receives before it runs and sends once it has run.
struct Traffic {
  std::optional<Message> in, out;
};

Traffic trafficOf(const PipelineAction& a, int rank, int p, int stages) {
  const int g = globalStage(a.chunk, rank, p);
  Traffic t;
  if (a.kind == Kind::kForward) {
    if (g > 0) t.in = Message{false, a.microBatch, g - 1, g};
    if (g < stages - 1) t.out = Message{false, a.microBatch, g, g + 1};
  } else if (a.kind != Kind::kBackwardWeight) {
    if (g < stages - 1) t.in = Message{true, a.microBatch, g + 1, g};
    if (g > 0) t.out = Message{true, a.microBatch, g, g - 1};
  }
  return t;
}

std::string describe(const Message& msg) {
  return std::string(msg.gradient ? "gradient" : "activation") + " of micro-batch " +
         std::to_string(msg.microBatch) + " from stage " + std::to_string(msg.fromStage) + " to " +
         std::to_string(msg.toStage);
}

}  // namespace

std::vector<PlanStep> planOf(PipelineSchedule schedule, int rank, int p, int m, int v) {
  return planOfActions(pipelineActions(schedule, rank, p, m, v), rank, p, v);
}

std::vector<PlanStep> planOfActions(const std::vector<PipelineAction>& actions, int rank, int p, int v) {
  const int stages = p * v;
  std::vector<PlanStep> plan;
  std::optional<Message> pending;  // produced, not yet sent
  for (std::size_t i = 0; i < actions.size(); ++i) {
    const PipelineAction& a = actions[i];
    const Traffic t = trafficOf(a, rank, p, stages);
    if (t.in) {
      plan.push_back(PlanStep{pending, t.in, std::nullopt});
      pending.reset();
    } else if (t.out && pending) {
      plan.push_back(PlanStep{pending, std::nullopt, std::nullopt});  // one waiting message at most
      pending.reset();
    }
    plan.push_back(PlanStep{std::nullopt, std::nullopt, a});
    if (t.out) pending = t.out;
    // Zero-bubble: the stage before waits for an input gradient; the weight gradients after it
    // wait for nobody, so it goes out first.
    if (pending && a.kind == PipelineAction::Kind::kBackwardInput && i + 1 < actions.size() &&
        actions[i + 1].kind == PipelineAction::Kind::kBackwardWeight) {
      plan.push_back(PlanStep{pending, std::nullopt, std::nullopt});
      pending.reset();
    }
  }
  if (pending) plan.push_back(PlanStep{pending, std::nullopt, std::nullopt});
  return plan;
}

std::string findDeadlock(PipelineSchedule schedule, int p, int m, int v) {
  struct Walker {
    std::vector<PlanStep> plan;
    std::size_t at = 0;
    bool sent = false, received = false;  // the halves of the exchange at `at`
  };
  std::vector<Walker> ranks(static_cast<std::size_t>(p));
  for (int r = 0; r < p; ++r) ranks[static_cast<std::size_t>(r)].plan = planOf(schedule, r, p, m, v);
  const auto current = [](Walker& w) -> PlanStep* { return w.at < w.plan.size() ? &w.plan[w.at] : nullptr; };
  for (;;) {
    bool moved = false, done = true;
    for (int r = 0; r < p; ++r) {
      Walker& w = ranks[static_cast<std::size_t>(r)];
      PlanStep* step = current(w);
      if (step == nullptr) continue;
      done = false;
      if (step->action) {  // compute needs nobody
        ++w.at, moved = true;
        continue;
      }
      if (step->send && !w.sent) {
        // Delivered once the receiver's current exchange takes it (a stage on this rank: at once).
        const Message& msg = *step->send;
        Walker& to = ranks[static_cast<std::size_t>(rankOfStage(msg.toStage, p))];
        if (&to == &w) {
          w.sent = true, moved = true;
        } else if (PlanStep* there = current(to); there != nullptr && there->recv && *there->recv == msg &&
                                                  !to.received) {
          w.sent = true, to.received = true, moved = true;
        }
      }
      if (step->recv && !w.received && rankOfStage(step->recv->fromStage, p) == r) w.received = true, moved = true;
      if ((!step->send || w.sent) && (!step->recv || w.received)) {
        ++w.at, w.sent = false, w.received = false, moved = true;
      }
    }
    if (done) return "";
    if (!moved) break;
  }
  std::ostringstream why;
  for (int r = 0; r < p; ++r) {
    Walker& w = ranks[static_cast<std::size_t>(r)];
    const PlanStep* step = current(w);
    if (step == nullptr) continue;
    why << "rank " << r << " waits to";
    if (step->send && !w.sent) why << " send the " << describe(*step->send);
    if (step->recv && !w.received) why << (step->send && !w.sent ? " and" : "") << " receive the " << describe(*step->recv);
    why << "; ";
  }
  return why.str();
}

}  // namespace pipeline

}  // namespace gyre::torch
