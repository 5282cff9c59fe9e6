// A client of an etcd cluster's v3 API through its JSON gateway (POST /v3/kv/range and friends,
// served by every etcd member on its client port), for the etcd store (createEtcdStore) and the
// launchers of a `gyre run --rdzv etcd://...` job (leases, prefixes).
//
// Why the JSON gateway and not gRPC: every etcd 3.4 member serves it, the calls gyre needs are a
// handful of small requests (no watch streams: waits poll), and it needs only an HTTP client
// (cpp-httplib, which the metrics endpoint already uses) instead of gRPC's code generator and
// runtime in the core library.
//
// Endpoints are members of one cluster: a client starts at a random member, sticks to the one
// that answered last and, when it cannot be reached (2 s at most per try) or has no leader, tries
// the next one, until the call's deadline. A write whose answer was lost (the member died, or
// etcd answered "request timed out" while the write was still being agreed) is sent again: puts
// and deletes are idempotent; a compare-and-swap sent twice may have taken effect the first time
// and then report that it did not (gyre run --rdzv reads the leader key back after a failed
// take), and the etcd store's add() could then count twice. A known limit: etcd makes such
// answers rare (a member lost in the middle of a write).
//
// Thread-safe: calls are serialised (one HTTP request at a time per client).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/mutex.h"

namespace httplib {
class Client;
}

namespace gyre::rendezvous {

struct EtcdUrl {
  std::vector<std::string> endpoints;  // "host:port", at least one
  std::string prefix;                  // every key's prefix, "/gyre/" when the URL has no path
  bool hasPath = false;
};

// "etcd://host:port[,host:port...][/path]": keys go under "/path/" (under "/gyre/" without a
// path). Throws InvalidArgument naming what is wrong.
EtcdUrl parseEtcdUrl(const std::string& url);
std::string formatEtcdUrl(const EtcdUrl& url);

struct EtcdKeyValue {
  std::string key;
  std::vector<std::uint8_t> value;
  std::int64_t modRevision = 0;
  std::int64_t lease = 0;
};

class EtcdClient {
 public:
  using Bytes = std::vector<std::uint8_t>;

  // Reaches a member within `timeout` (throws Error naming every endpoint and why otherwise);
  // every later call gives up after `timeout` too.
  EtcdClient(std::vector<std::string> endpoints, std::chrono::milliseconds timeout);
  ~EtcdClient();
  EtcdClient(const EtcdClient&) = delete;
  EtcdClient& operator=(const EtcdClient&) = delete;

  // The local address of the connection to the member that answered first.
  const std::string& localAddress() const { return localAddress_; }
  const std::vector<std::string>& endpoints() const { return endpoints_; }

  void put(const std::string& key, const Bytes& value, std::int64_t lease = 0);
  std::optional<EtcdKeyValue> get(const std::string& key);
  // As get(key), giving up at `deadline` (when it comes before the client's time-out).
  std::optional<EtcdKeyValue> get(const std::string& key, const Deadline& deadline);
  // Every key that starts with `prefix`, in key order.
  std::vector<EtcdKeyValue> list(const std::string& prefix);
  // Whether the key existed.
  bool erase(const std::string& key);
  // Deletes every key that starts with `prefix`.
  void erasePrefix(const std::string& prefix);
  // Puts `desired` when the key's modification revision is `modRevision` (0: the key is absent).
  // Returns whether it did.
  bool putIfRevision(const std::string& key, std::int64_t modRevision, const Bytes& desired,
                     std::int64_t lease = 0);
  // Puts `desired` when the key holds `expected`. Returns whether it did.
  bool putIfValue(const std::string& key, const Bytes& expected, const Bytes& desired);

  // A lease of `ttl` seconds; keys put with it are deleted when it expires or is revoked.
  std::int64_t grantLease(std::chrono::seconds ttl);
  // Renews the lease; false when it has expired (its keys are gone).
  bool keepAlive(std::int64_t lease);
  void revokeLease(std::int64_t lease);

 private:
  std::string call(const std::string& path, const std::string& body);
  std::string call(const std::string& path, const std::string& body, const Deadline& deadline);
  std::string callOnce(std::size_t endpoint, const std::string& path, const std::string& body,
                       std::string& why) GYRE_REQUIRES(mutex_);

  std::vector<std::string> endpoints_;
  std::chrono::milliseconds timeout_;
  std::string localAddress_;
  Mutex mutex_;
  std::vector<std::unique_ptr<httplib::Client>> clients_ GYRE_GUARDED_BY(mutex_);
  std::size_t current_ GYRE_GUARDED_BY(mutex_) = 0;
};

}  // namespace gyre::rendezvous
