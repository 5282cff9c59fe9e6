// A rank's step of a pipeline schedule as compute and exchanges: which message goes out and
// which comes in before each action. The runtime (pipeline.cc) follows it; the tests walk every
// rank's plan together to show that it cannot deadlock.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "gyre/torch/pipeline.h"

namespace gyre::torch::pipeline {

// An activation (forward) or its gradient (backward) crossing the boundary between global stages.
struct Message {
  bool gradient = false;
  int microBatch = 0;
  int fromStage = 0;  // the global stage that sends it
  int toStage = 0;
  bool operator==(const Message&) const = default;
};

// One thing to do: an exchange (sends and receives, progressed together), or an action.
struct PlanStep {
  std::vector<Message> sends, recvs;  // an exchange when there is no action
  std::optional<PipelineAction> action;
  int before = -1;  // a batched exchange: the index of the action it receives for
};

// The global stage of `chunk` on `rank` of p ranks, and the rank that holds global stage g.
inline int globalStage(int chunk, int rank, int p) { return chunk * p + rank; }
inline int rankOfStage(int stage, int p) { return stage % p; }

// Rank `rank`'s plan. With one stage per rank: before an action that needs a message, one
// exchange that receives it and sends what the actions before produced (at most one message
// waits: a second one to send goes out in an exchange of its own before the next action); after
// the last action, the last send. An input gradient (zero-bubble's I) followed by weight
// gradients goes out at once, in an exchange of its own: the stage before waits for it, the
// weight gradients for nobody. With v > 1 stages per rank (interleaved), exchanges are batched:
// before an action whose message has not come, every message produced since the last exchange
// goes out and that message comes in; every rank's batched plans are walked together, and where
// two ranks would each wait to send to the other, the receiver's exchange takes the message too
// (as Megatron-LM's send_forward_backward_recv_forward_backward pairs them), receives from one
// rank listed in the order it sends them.
// Messages to a stage on this same rank are in the plan too (the runtime hands them over).
std::vector<PlanStep> planOf(PipelineSchedule schedule, int rank, int p, int m, int v);
// The same for any list of actions (forward-only evaluation: every F in micro-batch order).
std::vector<PlanStep> planOfActions(const std::vector<PipelineAction>& actions, int rank, int p, int v);

// Walks every rank's plan with sends that wait for their receiver (no buffering: the strictest
// transport), messages between two ranks taken in order. Empty when every rank finishes;
// otherwise what each stuck rank waits for.
std::string findDeadlock(PipelineSchedule schedule, int p, int m, int v);

}  // namespace gyre::torch::pipeline
