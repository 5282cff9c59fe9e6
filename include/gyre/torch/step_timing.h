// Where a data-parallel step's time goes.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gyre::torch {

// Seconds. compute + wait = step. communicate - wait is the communication the overlap hid
// behind the backward pass (it can exceed compute when the communication thread competes with
// the training thread for cores).
struct StepTiming {
  std::int64_t steps = 0;   // 1 for lastStep(), the count for totals()
  double step = 0;          // from the end of the previous step() (or zeroGrad) to the end of this one
  // step - wait: forward, backward and optimizer, with the hidden communication, and whatever else
  // the loop does between two steps (waiting for its next batch: gyre::data::Loader::waitSeconds())
  double compute = 0;
  double communicate = 0;   // time the step's allreduces ran on the communicator's thread
  double wait = 0;          // time step() blocked on allreduces still running: the exposed communication
  std::size_t bytes = 0;    // bytes allreduced (after compression)
  std::size_t buckets = 0;  // allreduces issued

  double hidden() const { return communicate > wait ? communicate - wait : 0; }
  StepTiming& operator+=(const StepTiming& other);
};

}  // namespace gyre::torch
