// The schedulers' factories, one file each (scheduler.h describes them).
#pragma once

#include <memory>

#include "tune/scheduler.h"

namespace gyre::tune {

std::unique_ptr<Scheduler> makeAsha(const SchedulerOptions& o);
std::unique_ptr<Scheduler> makeAshaStop(const SchedulerOptions& o);
std::unique_ptr<Scheduler> makeHyperBand(const SchedulerOptions& o);
std::unique_ptr<Scheduler> makeMedianStopping(const SchedulerOptions& o);
std::unique_ptr<Scheduler> makePbt(const SchedulerOptions& o, const Space& space);

// The trial's first result at or after `iteration`, or nullptr.
const Result* firstAtOrAfter(const Trial& t, int iteration);

}  // namespace gyre::tune
