#include "support/etcd_cluster.h"

#include <chrono>

#include "support/jobs.h"
#include "support/programs.h"

namespace gyre::test {
namespace {

ProgramRun etcdScript(std::vector<std::string> args) {
  std::vector<std::string> argv = {"/bin/bash", sourceDir() + "/tests/etcd/etcd.sh"};
  argv.insert(argv.end(), args.begin(), args.end());
  return runProgram({argv, cleanEnvironment()}, std::chrono::seconds(300));
}

}  // namespace

EtcdCluster::EtcdCluster(int members) {
  const ProgramRun start = etcdScript({"start", dir_.path() + "/etcd", std::to_string(members)});
  if (start.exitCode == 77) {
    skip_ = "etcd cannot be installed here: " + start.err;
  } else if (start.exitCode != 0) {
    failed_ = "tests/etcd/etcd.sh start " + start.describe();
  } else {
    endpoints_ = start.out.substr(0, start.out.find('\n'));
  }
}

EtcdCluster::~EtcdCluster() {
  etcdScript({"stop", dir_.path() + "/etcd"});
}

void EtcdCluster::kill(int index) {
  etcdScript({"kill", dir_.path() + "/etcd", std::to_string(index)});
}

}  // namespace gyre::test
