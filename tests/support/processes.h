// Finding the processes a job left behind: tests of launchers (`gyre run`) give the workers'
// children a `sleep` of a duration no other process uses, and look for it once the job is over.
//
//   const std::string sleep = uniqueSleep();
//   ... run a job whose workers start `sleep <sleep>` ...
//   EXPECT_EQ(processesWith(sleep), std::vector<std::string>{});
#pragma once

#include <string>
#include <vector>

namespace gyre::test {

// The processes whose command line contains `marker`, each as "PID: ARGV" (arguments joined by
// spaces). Reads /proc; empty where there is none.
std::vector<std::string> processesWith(const std::string& marker);

// A `sleep` duration (in seconds, long enough to outlive any test) that no other process uses:
// different on each call and in each test process.
std::string uniqueSleep();

}  // namespace gyre::test
