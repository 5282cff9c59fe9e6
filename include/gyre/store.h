// Rendezvous key-value stores: how ranks find each other before any connection exists.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace gyre {

// A key-value store shared by the ranks of a job.
//
// Thread-safety: every method may be called concurrently from several threads.
// Blocking: get() and wait() block until the keys exist or the time-out passes (TimeoutError).
// Time-outs of zero mean the store's default (see setTimeout; 60 s unless changed).
class Store {
 public:
  using Bytes = std::vector<std::uint8_t>;
  using Duration = std::chrono::milliseconds;

  virtual ~Store() = default;

  virtual void set(const std::string& key, const Bytes& value) = 0;
  // Waits for the key, then returns its value.
  virtual Bytes get(const std::string& key, Duration timeout = Duration::zero()) = 0;
  // Adds delta to the integer stored at key (absent counts as 0) and returns the new value.
  virtual std::int64_t add(const std::string& key, std::int64_t delta) = 0;
  // Sets key to desired if its value equals expected (an empty expected means "absent"), and
  // returns the value now stored.
  virtual Bytes compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) = 0;
  // Returns true if the key existed.
  virtual bool deleteKey(const std::string& key) = 0;
  // Returns true if every key exists now, without waiting.
  virtual bool check(const std::vector<std::string>& keys) = 0;
  // Waits until every key exists.
  virtual void wait(const std::vector<std::string>& keys, Duration timeout = Duration::zero()) = 0;

  // Safe to call while other threads use the store.
  void setTimeout(Duration timeout) { timeoutMs_.store(timeout.count(), std::memory_order_relaxed); }
  Duration timeout() const { return Duration(timeoutMs_.load(std::memory_order_relaxed)); }

  // Convenience for text values.
  void setString(const std::string& key, const std::string& value);
  std::string getString(const std::string& key, Duration timeout = Duration::zero());

 protected:
  Duration resolve(Duration timeout) const { return timeout == Duration::zero() ? this->timeout() : timeout; }

 private:
  std::atomic<Duration::rep> timeoutMs_{60000};
};

// A store inside this process: ranks that are threads of one process share it.
std::shared_ptr<Store> createMemoryStore();

// A store in a file on a file system every rank can reach (a local disk for one host, a shared
// file system otherwise). Access is serialised with flock(2); the file is created with mode 0600.
std::shared_ptr<Store> createFileStore(const std::string& path);

// The server of a TCP store. It runs a thread that serves clients until destroyed.
// Every client must prove it knows `secret` (HMAC-SHA256 over a nonce) before the server reads
// anything else; other clients are dropped and logged, and the server keeps serving the rest.
class TcpStoreServer {
 public:
  virtual ~TcpStoreServer() = default;
  virtual std::uint16_t port() const = 0;
  // The address clients should use, as "host:port" ("[v6]:port" for IPv6).
  virtual std::string address() const = 0;
  // How many connections were refused (failed authentication or malformed frames).
  virtual std::uint64_t refusedConnections() const = 0;
};

// Listens on bindAddress:port (port 0 picks a free one). bindAddress is an IPv4 or IPv6 literal
// or a host name; the default is loopback, never all interfaces.
std::unique_ptr<TcpStoreServer> createTcpStoreServer(const std::string& secret,
                                                     const std::string& bindAddress = "127.0.0.1",
                                                     std::uint16_t port = 0);

// A client of a TCP store at "host:port" or "[v6]:port". Retries the connection until the
// time-out passes (the server may start after the client).
std::shared_ptr<Store> connectTcpStore(const std::string& address, const std::string& secret,
                                       std::chrono::milliseconds timeout = std::chrono::seconds(60));

// A client of an etcd cluster (etcd 3.4 or later, its v3 API through the JSON gateway every
// member serves on its client port): "etcd://host:port[,host:port...][/path]". Keys go under
// "/path/" ("/gyre/" without a path). A call that cannot reach a member tries the next, until
// `timeout`; the first call (here) must reach one within it or throws Error naming each endpoint
// and why. Values are limited by the cluster's --max-request-bytes (1.5 MiB by default): etcd's
// refusal is an InvalidArgument. Nothing is authenticated: run etcd where only the job reaches it
// (loopback, a private network) or behind its own TLS and auth.
std::shared_ptr<Store> connectEtcdStore(const std::string& url,
                                        std::chrono::milliseconds timeout = std::chrono::seconds(60));

// A view of another store in which every key is prefixed with `prefix`.
std::shared_ptr<Store> createPrefixStore(std::string prefix, std::shared_ptr<Store> inner);

}  // namespace gyre
