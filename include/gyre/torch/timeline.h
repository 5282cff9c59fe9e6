// A Chrome-trace / Perfetto timeline of training: one track group per rank, with the backward
// pass, each bucket's allreduce, the wait for it and the optimizer step, plus spans the program
// adds. Open the file at https://ui.perfetto.dev or chrome://tracing.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gyre/communicator.h"

namespace gyre::torch {

class Timeline {
 public:
  using Clock = std::chrono::steady_clock;

  // The timeline the GYRE_TIMELINE variable asks for (a file path), or null when it is unset.
  static std::shared_ptr<Timeline> fromEnvironment(std::shared_ptr<Communicator> comm);

  // Events are kept in memory (at most maxEvents per rank; later ones are counted and dropped)
  // and written by write(). `comm` may be null for a single process.
  Timeline(std::string path, std::shared_ptr<Communicator> comm, std::size_t maxEvents = 1u << 20);
  ~Timeline();
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  // Tracks within a rank.
  enum class Track { kCompute, kCommunication };

  // Records a finished span [begin, end) on a track. Thread-safe.
  void span(Track track, std::string name, Clock::time_point begin, Clock::time_point end,
            std::string args = {});

  // Records the span from its construction to its destruction.
  class Scope {
   public:
    Scope(Timeline* timeline, std::string name, Track track = Track::kCompute);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    Timeline* timeline_;
    std::string name_;
    Track track_;
    Clock::time_point begin_;
  };

  // Collective when there is a communicator: gathers every rank's events on rank 0, which
  // writes the file (JSON, Chrome trace event format) atomically. It may be called again: each
  // call writes every event recorded so far. Throws Error naming the path when it cannot write.
  void write();

  const std::string& path() const { return path_; }
  std::size_t droppedEvents() const;

 private:
  std::string path_;
  std::shared_ptr<Communicator> comm_;
  std::size_t maxEvents_;
  Clock::time_point origin_;
  // Guards the three below. A plain std::mutex, unannotated: this public header stays free of
  // gyre's internal thread-safety annotations (src/common/mutex.h).
  mutable std::mutex mu_;
  std::string events_;  // JSON objects, one per line, each followed by ",\n"
  std::size_t count_ = 0;
  std::size_t dropped_ = 0;
};

}  // namespace gyre::torch
