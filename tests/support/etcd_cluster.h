// A real etcd cluster for a test (tests/etcd/etcd.sh: Debian's etcd-server, one or three members
// on free loopback ports, data in a temporary directory), stopped when the object goes. A test
// skips, saying why, only when etcd cannot be installed (skipReason()), and fails when the cluster
// did not start (failure()).
#pragma once

#include <string>

#include "support/ranks.h"

namespace gyre::test {

class EtcdCluster {
 public:
  explicit EtcdCluster(int members);
  ~EtcdCluster();
  EtcdCluster(const EtcdCluster&) = delete;
  EtcdCluster& operator=(const EtcdCluster&) = delete;

  const std::string& skipReason() const { return skip_; }
  const std::string& failure() const { return failed_; }
  // The members' client endpoints, "127.0.0.1:P1,127.0.0.1:P2,...", in member order.
  const std::string& endpoints() const { return endpoints_; }
  // "etcd://<endpoints>/<path>".
  std::string url(const std::string& path) const { return "etcd://" + endpoints_ + "/" + path; }
  // SIGKILLs member `index`: a host lost.
  void kill(int index);

 private:
  TempDir dir_;
  std::string skip_;
  std::string failed_;
  std::string endpoints_;
};

}  // namespace gyre::test
