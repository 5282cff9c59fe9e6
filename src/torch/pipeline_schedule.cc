// Pipeline schedules (what each rank does, in order), stage balancing, and each rank's plan of
// exchanges with the check that the plans of all ranks cannot deadlock.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
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

double stageTimesBubble(const std::vector<double>& secondsPerMicroBatch, int m, int v) {
  GYRE_ARG_CHECK(!secondsPerMicroBatch.empty() && m >= 1 && v >= 1, "stage times of ", secondsPerMicroBatch.size(),
                 " ranks, ", m, " micro-batches, ", v, " stages per rank");
  double sum = 0, slowest = 0;
  for (const double t : secondsPerMicroBatch) {
    GYRE_ARG_CHECK(std::isfinite(t) && t >= 0, "a stage time must be finite and not negative; got ", t);
    sum += t;
    slowest = std::max(slowest, t);
  }
  const double step = m * slowest + (sum - slowest) / v;
  if (step <= 0) return 0;
  const double p = static_cast<double>(secondsPerMicroBatch.size());
  return 1.0 - m * sum / (p * step);
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

namespace {

// One message a step at most: before an action that needs a message, an exchange that receives
// it and sends what the actions before produced.
std::vector<PlanStep> planOneByOne(const std::vector<PipelineAction>& actions, int rank, int p, int stages) {
  std::vector<PlanStep> plan;
  std::optional<Message> pending;  // produced, not yet sent
  auto exchange = [&](std::optional<Message> in) {
    PlanStep step;
    if (pending) step.sends.push_back(*pending);
    if (in) step.recvs.push_back(*in);
    plan.push_back(std::move(step));
    pending.reset();
  };
  for (std::size_t i = 0; i < actions.size(); ++i) {
    const PipelineAction& a = actions[i];
    const Traffic t = trafficOf(a, rank, p, stages);
    if (t.in) {
      exchange(t.in);
    } else if (t.out && pending) {
      exchange(std::nullopt);  // one waiting message at most
    }
    plan.push_back(PlanStep{{}, {}, a});
    if (t.out) pending = t.out;
    // Zero-bubble: the stage before waits for an input gradient; the weight gradients after it
    // wait for nobody, so it goes out first.
    if (pending && a.kind == Kind::kBackwardInput && i + 1 < actions.size() &&
        actions[i + 1].kind == Kind::kBackwardWeight)
      exchange(std::nullopt);
  }
  if (pending) exchange(std::nullopt);
  return plan;
}

using SendOrder = std::map<std::tuple<bool, int, int>, std::size_t>;  // a message: its producer's index

SendOrder sendOrderOf(const std::vector<std::vector<PipelineAction>>& actions, int p, int stages) {
  SendOrder order;
  for (int r = 0; r < p; ++r)
    for (std::size_t i = 0; i < actions[static_cast<std::size_t>(r)].size(); ++i)
      if (const Traffic t = trafficOf(actions[static_cast<std::size_t>(r)][i], r, p, stages); t.out)
        order[{t.out->gradient, t.out->microBatch, t.out->fromStage}] = i;
  return order;
}

// Batched: before an action whose message has not come, one exchange that sends every message
// produced since the last and receives that one and the messages `extra` lists for that exchange
// (by the action's index), receives from one rank in the order `order` says it sends them.
std::vector<PlanStep> planBatched(const std::vector<PipelineAction>& actions, int rank, int p, int stages,
                                  const std::map<std::size_t, std::vector<Message>>& extra,
                                  const SendOrder& order) {
  std::vector<PlanStep> plan;
  std::vector<Message> pending;
  std::vector<Message> received;
  const auto has = [&](const Message& m) { return std::find(received.begin(), received.end(), m) != received.end(); };
  const auto fromSelf = [&](const Message& m) { return rankOfStage(m.fromStage, p) == rank; };
  for (std::size_t i = 0; i < actions.size(); ++i) {
    const Traffic t = trafficOf(actions[i], rank, p, stages);
    if (t.in && fromSelf(*t.in)) {  // one pipeline rank (p = 1): handed over, once it has gone out
      if (std::find(pending.begin(), pending.end(), *t.in) != pending.end()) {
        plan.push_back(PlanStep{std::move(pending), {}, std::nullopt});
        pending.clear();
      }
    } else if (t.in && !has(*t.in)) {
      PlanStep step;
      step.sends = std::move(pending);
      pending.clear();
      step.recvs.push_back(*t.in);
      step.before = static_cast<int>(i);
      if (const auto it = extra.find(i); it != extra.end())
        for (const Message& m : it->second)
          if (!has(m) && std::find(step.recvs.begin(), step.recvs.end(), m) == step.recvs.end())
            step.recvs.push_back(m);
      // Messages from one rank come in the order it sends them: the order it produced them.
      const auto seq = [&](const Message& m) {
        const auto it = order.find({m.gradient, m.microBatch, m.fromStage});
        return std::pair{rankOfStage(m.fromStage, p), it == order.end() ? std::size_t{0} : it->second};
      };
      std::stable_sort(step.recvs.begin(), step.recvs.end(),
                       [&](const Message& a, const Message& b) { return seq(a) < seq(b); });
      received.insert(received.end(), step.recvs.begin(), step.recvs.end());
      plan.push_back(std::move(step));
    }
    plan.push_back(PlanStep{{}, {}, actions[i]});
    if (t.out) pending.push_back(*t.out);
  }
  if (!pending.empty()) plan.push_back(PlanStep{std::move(pending), {}, std::nullopt});
  return plan;
}

// Every rank's plan walked together with sends that wait for their receiver (no buffering),
// messages between two ranks taken in the order they were sent and received in the order the
// receiver lists them. Per rank, the step where it is stuck (plan size when it finished) and
// which receives of it have come.
struct Walk {
  std::vector<std::size_t> at;
  std::vector<std::vector<bool>> sent, received;
  bool finished = false;
};

Walk walk(const std::vector<std::vector<PlanStep>>& plans) {
  const int p = static_cast<int>(plans.size());
  Walk w;
  w.at.assign(plans.size(), 0);
  w.sent.resize(plans.size());
  w.received.resize(plans.size());
  const auto current = [&](int r) -> const PlanStep* {
    const auto& plan = plans[static_cast<std::size_t>(r)];
    const std::size_t at = w.at[static_cast<std::size_t>(r)];
    return at < plan.size() ? &plan[at] : nullptr;
  };
  const auto arrive = [&](int r) {
    const auto i = static_cast<std::size_t>(r);
    w.sent[i].clear(), w.received[i].clear();
    if (const PlanStep* step = current(r)) {
      w.sent[i].assign(step->sends.size(), false);
      w.received[i].assign(step->recvs.size(), false);
    }
  };
  const auto peerOf = [p](const Message& msg, bool sending) {
    return rankOfStage(sending ? msg.toStage : msg.fromStage, p);
  };
  for (int r = 0; r < p; ++r) arrive(r);
  for (;;) {
    bool moved = false, done = true;
    for (int r = 0; r < p; ++r) {
      const auto ri = static_cast<std::size_t>(r);
      const PlanStep* step = current(r);
      if (step == nullptr) continue;
      done = false;
      if (step->action) {  // compute needs nobody
        ++w.at[ri], moved = true;
        arrive(r);
        continue;
      }
      for (std::size_t i = 0; i < step->sends.size(); ++i) {
        if (w.sent[ri][i]) continue;
        const Message& msg = step->sends[i];
        const int to = peerOf(msg, true);
        bool earlierPending = false;  // in order with this exchange's earlier sends to that rank
        for (std::size_t k = 0; k < i; ++k)
          if (!w.sent[ri][k] && peerOf(step->sends[k], true) == to) earlierPending = true;
        if (earlierPending) continue;
        if (to == r) {  // a stage of this rank: handed over
          w.sent[ri][i] = true, moved = true;
          continue;
        }
        const PlanStep* theirs = current(to);
        if (theirs == nullptr || theirs->action) continue;
        const auto ti = static_cast<std::size_t>(to);
        // The receiver takes it only as its first receive from this rank not yet done.
        for (std::size_t k = 0; k < theirs->recvs.size(); ++k) {
          if (w.received[ti][k] || peerOf(theirs->recvs[k], false) != r) continue;
          if (theirs->recvs[k] == msg) w.sent[ri][i] = true, w.received[ti][k] = true, moved = true;
          break;
        }
      }
      for (std::size_t k = 0; k < step->recvs.size(); ++k)
        if (!w.received[ri][k] && peerOf(step->recvs[k], false) == r) w.received[ri][k] = true, moved = true;
      const auto all = [](const std::vector<bool>& v) { return std::all_of(v.begin(), v.end(), [](bool b) { return b; }); };
      if (all(w.sent[ri]) && all(w.received[ri])) {
        ++w.at[ri], moved = true;
        arrive(r);
      }
    }
    if (done) {
      w.finished = true;
      return w;
    }
    if (!moved) return w;
  }
}

// Batched plans for every rank, walked together: where a rank is stuck sending a message its
// receiver's current exchange does not take (both sending, each to the other), that exchange
// receives it too, and the plans are walked again. An exchange thus waits for a second message
// only where it must, not wherever a schedule's steady state would pair them.
std::vector<std::vector<PlanStep>> batchedPlans(PipelineSchedule schedule, int p, int m, int v) {
  std::vector<std::vector<PipelineAction>> actions;
  for (int r = 0; r < p; ++r) actions.push_back(pipelineActions(schedule, r, p, m, v));
  std::vector<std::map<std::size_t, std::vector<Message>>> extra(static_cast<std::size_t>(p));
  const SendOrder order = sendOrderOf(actions, p, p * v);
  for (;;) {
    std::vector<std::vector<PlanStep>> plans;
    for (int r = 0; r < p; ++r)
      plans.push_back(
          planBatched(actions[static_cast<std::size_t>(r)], r, p, p * v, extra[static_cast<std::size_t>(r)], order));
    const Walk w = walk(plans);
    if (w.finished) return plans;
    bool added = false;
    for (int r = 0; r < p; ++r) {
      const auto ri = static_cast<std::size_t>(r);
      if (w.at[ri] >= plans[ri].size()) continue;
      const PlanStep& step = plans[ri][w.at[ri]];
      std::set<int> seen;  // the first unsent message to each rank: the next in that pair's order
      for (std::size_t i = 0; i < step.sends.size(); ++i) {
        const int to = rankOfStage(step.sends[i].toStage, p);
        if (w.sent[ri][i] || !seen.insert(to).second || to == r) continue;
        const auto ti = static_cast<std::size_t>(to);
        if (w.at[ti] >= plans[ti].size()) continue;
        const PlanStep& theirs = plans[ti][w.at[ti]];
        if (theirs.action || theirs.before < 0) continue;
        if (std::find(theirs.recvs.begin(), theirs.recvs.end(), step.sends[i]) != theirs.recvs.end()) continue;
        extra[ti][static_cast<std::size_t>(theirs.before)].push_back(step.sends[i]);
        added = true;
      }
    }
    if (!added) return plans;  // stuck for another reason: findDeadlock reports it
  }
}

// Every rank's plan.
std::vector<std::vector<PlanStep>> plansOf(PipelineSchedule schedule, int p, int m, int v) {
  if (v > 1) return batchedPlans(schedule, p, m, v);
  std::vector<std::vector<PlanStep>> plans;
  for (int r = 0; r < p; ++r) plans.push_back(planOneByOne(pipelineActions(schedule, r, p, m, v), r, p, p));
  return plans;
}

}  // namespace

std::vector<PlanStep> planOf(PipelineSchedule schedule, int rank, int p, int m, int v) {
  if (v > 1) return batchedPlans(schedule, p, m, v)[static_cast<std::size_t>(rank)];
  return planOneByOne(pipelineActions(schedule, rank, p, m, v), rank, p, p);
}

std::vector<PlanStep> planOfActions(const std::vector<PipelineAction>& actions, int rank, int p, int v) {
  return v > 1 ? planBatched(actions, rank, p, p * v, {}, {}) : planOneByOne(actions, rank, p, p);
}

std::string findDeadlock(PipelineSchedule schedule, int p, int m, int v) {
  const std::vector<std::vector<PlanStep>> plans = plansOf(schedule, p, m, v);
  const Walk w = walk(plans);
  if (w.finished) return "";
  std::ostringstream why;
  for (int r = 0; r < p; ++r) {
    const auto ri = static_cast<std::size_t>(r);
    if (w.at[ri] >= plans[ri].size()) continue;
    const PlanStep& step = plans[ri][w.at[ri]];
    why << "rank " << r << " waits to";
    for (std::size_t i = 0; i < step.sends.size(); ++i)
      if (!w.sent[ri][i]) why << " send the " << describe(step.sends[i]) << ";";
    for (std::size_t k = 0; k < step.recvs.size(); ++k)
      if (!w.received[ri][k]) why << " receive the " << describe(step.recvs[k]) << ";";
    why << " ";
  }
  return why.str();
}

}  // namespace pipeline

}  // namespace gyre::torch
