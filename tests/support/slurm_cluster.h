// A real one-node Slurm cluster for a test suite: tests/slurm/cluster.sh starts munged, slurmctld
// and slurmd (Debian's packages) with every file in a temporary directory and every port on
// loopback, once for the suite, and stops them at its end. Suites derive their fixture from
// SlurmTest; a test is skipped, saying why, only when the packages cannot be installed, and fails
// when the cluster did not start.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "support/jobs.h"
#include "support/programs.h"
#include "support/ranks.h"

namespace gyre::test {

class SlurmTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite();
  static void TearDownTestSuite();
  void SetUp() override;

  // A clean environment (cleanEnvironment) with SLURM_CONF naming the cluster.
  static Environment env();
  // Runs a Slurm client (srun, sbatch, squeue, scancel...) found in /usr/bin, in env().
  static ProgramRun slurm(const std::string& tool, std::vector<std::string> args,
                          std::chrono::seconds timeout = std::chrono::seconds(180));
  // The jobs in the queue, a line each: "ID NAME STATE"; empty when none.
  static std::string squeue();
  // A directory of the suite's, kept until its end.
  static std::string dir();
  static std::string conf();

 private:
  static TempDir* dir_;
  static std::string conf_;
  static std::string skip_;
  static std::string failed_;
  static std::string path_;  // dir_'s
};

}  // namespace gyre::test
