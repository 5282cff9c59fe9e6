#include "launcher/elastic_workers.h"

#include <utility>

#include "common/check.h"
#include "launcher/elastic_job.h"  // lostAgentText
#include "launcher/run_metrics.h"

namespace gyre::launcher {

ElasticWorkers::ElasticWorkers(const RunOptions& options, OnEnd onEnd)
    : o_(options),
      onEnd_(std::move(onEnd)),
      agents_(
          o_, [this](AgentHandle& a, const Event& e) { onEvent(a, e); },
          [this](AgentHandle& a, const std::string& why) {
            // An agent that sends what it should not: stopped; its worker counts as lost.
            agents_.stop(a);
            end(a.place.firstRank, WorkerEnd{false, "was lost: its agent failed: " + why, 1, false});
          }) {}

void ElasticWorkers::start(int id, const HostPlacement& place, const AgentSpec& spec) {
  Worker& w = workers_[id];
  try {
    w.agent = &agents_.start(place, spec);
  } catch (const Error& e) {
    end(id, WorkerEnd{false, "could not be started: " + std::string(e.what()), 1, false});
  }
}

void ElasticWorkers::stop(int id) {
  const auto it = workers_.find(id);
  if (it != workers_.end() && it->second.agent != nullptr && !it->second.ended) agents_.stop(*it->second.agent);
}

void ElasticWorkers::end(int id, const WorkerEnd& end) {
  Worker& w = workers_[id];
  if (std::exchange(w.ended, true)) return;
  if (std::exchange(w.running, false)) RunMetrics::get().workerExited(!end.ok);
  onEnd_(id, end);
}

bool ElasticWorkers::ended(int id) const {
  const auto it = workers_.find(id);
  return it != workers_.end() && it->second.ended;
}

std::vector<int> ElasticWorkers::ids() const {
  std::vector<int> ids;
  for (const auto& [id, w] : workers_) ids.push_back(id);
  return ids;
}

void ElasticWorkers::onEvent(AgentHandle& a, const Event& e) {
  const int id = a.place.firstRank;
  if (e.rank != -1 && e.rank != id)
    GYRE_THROW(ProtocolError, "the agent of worker ", id, " on ", a.place.host, " reported worker ", e.rank);
  Worker& w = workers_[id];
  switch (e.kind) {
    case Event::Kind::kStore:
      break;
    case Event::Kind::kStarted:
      w.running = true;
      RunMetrics::get().workerStarted();
      break;
    case Event::Kind::kDone:
      a.done = true;
      break;
    case Event::Kind::kOutput:
      output_->line(id, e.fromStderr, e.text, e.terminator);
      break;
    case Event::Kind::kFailed:
      w.failedText = e.text;
      break;
    case Event::Kind::kExit:
      end(id, endOf(e));
      break;
  }
}

void ElasticWorkers::turn() {
  agents_.read(AgentPool::kPollMs);
  for (const auto& [a, e] : agents_.reap()) {
    const int id = a->place.firstRank;
    if (!ended(id)) end(id, WorkerEnd{false, lostAgentText(workers_[id].failedText, a->command, e), 1, false});
  }
  if (stopping_ && std::chrono::steady_clock::now() >= killAt_) agents_.killAll();
}

void ElasticWorkers::stopAll() {
  if (std::exchange(stopping_, true)) return;
  killAt_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(o_.stopGraceMs + 500);
  agents_.stopAll();
}

}  // namespace gyre::launcher
