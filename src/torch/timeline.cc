#include "gyre/torch/timeline.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string_view>

#include "common/config.h"
#include "common/files.h"
#include "common/json_string.h"
#include "gyre/errors.h"
#include "gyre/init.h"

namespace gyre::torch {

std::shared_ptr<Timeline> Timeline::fromEnvironment(std::shared_ptr<Communicator> comm) {
  const std::string path = config::getString(config::processEnvironment(), "GYRE_TIMELINE");
  if (path.empty()) return nullptr;
  return std::make_shared<Timeline>(path, std::move(comm));
}

Timeline::Timeline(std::string path, std::shared_ptr<Communicator> comm, std::size_t maxEvents)
    : path_(std::move(path)), comm_(std::move(comm)), maxEvents_(maxEvents), origin_(Clock::now()) {
  if (path_.empty()) throw InvalidArgument("Timeline: the file path is empty");
}

Timeline::~Timeline() = default;

void Timeline::span(Track track, std::string name, Clock::time_point begin, Clock::time_point end,
                    std::string args) {
  const auto us = [&](Clock::time_point t) {
    return std::chrono::duration<double, std::micro>(t - origin_).count();
  };
  const int rank = comm_ ? comm_->rank() : 0;
  char times[96];
  std::snprintf(times, sizeof times, "\"ts\":%.1f,\"dur\":%.1f", us(begin), us(end) - us(begin));
  std::string event = "{\"name\":" + jsonString(name) + ",\"ph\":\"X\",\"pid\":" + std::to_string(rank) +
                      ",\"tid\":" + std::to_string(track == Track::kCompute ? 0 : 1) + "," + times;
  if (!args.empty()) event += ",\"args\":{" + args + "}";
  event += "},\n";
  std::lock_guard<std::mutex> lock(mu_);
  if (count_ >= maxEvents_) {
    ++dropped_;
    return;
  }
  ++count_;
  events_ += event;
}

Timeline::Scope::Scope(Timeline* timeline, std::string name, Track track)
    : timeline_(timeline), name_(std::move(name)), track_(track), begin_(Clock::now()) {}

Timeline::Scope::~Scope() {
  if (timeline_) timeline_->span(track_, std::move(name_), begin_, Clock::now());
}

std::size_t Timeline::droppedEvents() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dropped_;
}

void Timeline::write() {
  std::string mine;
  {
    std::lock_guard<std::mutex> lock(mu_);
    mine = events_;
  }
  const int rank = comm_ ? comm_->rank() : 0;
  const int size = comm_ ? comm_->size() : 1;
  // Track names first, so the viewer labels each rank and its two threads.
  std::string meta = "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" + std::to_string(rank) +
                     ",\"args\":{\"name\":\"rank " + std::to_string(rank) + "\"}},\n";
  for (int tid = 0; tid < 2; ++tid)
    meta += "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" + std::to_string(rank) +
            ",\"tid\":" + std::to_string(tid) +
            ",\"args\":{\"name\":" + (tid == 0 ? "\"compute\"" : "\"communication\"") + "}},\n";
  mine = meta + mine;

  std::string all = mine;
  if (size > 1) {
    static_assert(sizeof(std::size_t) == sizeof(std::int64_t));
    const std::size_t length = mine.size();
    std::vector<std::size_t> counts(static_cast<std::size_t>(size));
    comm_->allgather(&length, counts.data(), 1, {DataType::kInt64});
    std::size_t total = 0;
    for (std::size_t count : counts) total += count;
    // Every rank receives every rank's events: simpler than a gatherv, and timelines are small.
    all.assign(total, '\0');
    comm_->allgatherv(mine.data(), all.data(), counts, {DataType::kUInt8});
  }
  if (rank != 0) return;
  // The array format; the trailing comma of the last event is dropped.
  while (!all.empty() && (all.back() == '\n' || all.back() == ',')) all.pop_back();
  files::writeAtomically(path_, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n" + all + "\n]}\n");
}

}  // namespace gyre::torch
