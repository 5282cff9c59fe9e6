// File and TCP stores shared by real processes (fork), including one that dies mid-wait.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <thread>

#include "common/socket.h"
#include "gyre/errors.h"
#include "gyre/store.h"
#include "rendezvous/host_store.h"
#include "support/ranks.h"

namespace gyre {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr int kStoreRanks = 4;
constexpr int kAdds = 200;

// What every rank does against a shared store: count, publish, wait for all, read all.
void exercise(Store& store, int rank) {
  // Start the adds together, so that they contend.
  store.setString("ready/" + std::to_string(rank), "1");
  std::vector<std::string> ready;
  for (int r = 0; r < kStoreRanks; ++r) ready.push_back("ready/" + std::to_string(r));
  store.wait(ready, seconds(30));
  for (int i = 0; i < kAdds; ++i) store.add("counter", 1);
  store.setString("rank/" + std::to_string(rank), "pid " + std::to_string(getpid()));
  store.add("arrived", 1);
  std::vector<std::string> keys;
  for (int r = 0; r < kStoreRanks; ++r) keys.push_back("rank/" + std::to_string(r));
  store.wait(keys, seconds(30));
  for (int r = 0; r < kStoreRanks; ++r)
    EXPECT_EQ(store.getString("rank/" + std::to_string(r), seconds(1)).substr(0, 4), "pid ");
  // Each rank adds only after publishing, so once every rank is visible, "arrived" keeps rising
  // to kStoreRanks; the counter total is checked once every rank has finished its adds.
  while (store.add("arrived", 0) < kStoreRanks) std::this_thread::sleep_for(milliseconds(5));
  EXPECT_EQ(store.add("counter", 0), kStoreRanks * kAdds);
  EXPECT_EQ(store.compareSet("leader", {}, Store::Bytes{static_cast<std::uint8_t>(rank)}).size(), 1u);
}

TEST(StoreProcesses, FileStoreAcrossProcesses) {
  test::TempDir dir;
  const std::string path = dir.path() + "/job.store";
  test::runProcesses(
      kStoreRanks,
      [&](int rank) {
        auto store = createFileStore(path);  // opened after fork: each process has its own lock
        exercise(*store, rank);
      },
      seconds(120));
  auto store = createFileStore(path);
  EXPECT_EQ(store->add("counter", 0), kStoreRanks * kAdds);
  EXPECT_EQ(store->getString("leader", seconds(1)).size(), 1u);
}

TEST(StoreProcesses, TcpStoreHostedByRankZero) {
  std::uint16_t port = 0;
  {
    net::Fd probe = net::listenOn("127.0.0.1", 0);
    port = net::localPort(probe.get());
  }
  const std::string address = "127.0.0.1:" + std::to_string(port);
  test::runProcesses(
      kStoreRanks,
      [&](int rank) {
        std::shared_ptr<Store> store;
        if (rank == 0) {
          store = rendezvous::hostTcpStore("process-secret", "127.0.0.1", port);
        } else {
          store = connectTcpStore(address, "process-secret", seconds(30));  // may start before the server
        }
        exercise(*store, rank);
        store->add("done", 1);
        // The host keeps serving until every rank is done with the store.
        if (rank == 0)
          while (store->add("done", 0) < kStoreRanks) std::this_thread::sleep_for(milliseconds(5));
      },
      seconds(120));
}

// Waits for pid until the deadline; kills it past the deadline. Returns the wait status.
int reap(pid_t pid, std::chrono::seconds within) {
  const auto deadline = std::chrono::steady_clock::now() + within;
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      ADD_FAILURE() << "process " << pid << " overran " << within.count() << " s and was killed";
      return status;
    }
    std::this_thread::sleep_for(milliseconds(5));
  }
  return status;
}

// Kills and reaps a child the test did not reap itself (when an assertion ended it early).
struct ChildGuard {
  pid_t pid = -1;
  ~ChildGuard() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
};

TEST(StoreProcesses, AClientKilledMidWaitDoesNotDisturbTheServer) {
  std::uint16_t port = 0;
  {
    net::Fd probe = net::listenOn("127.0.0.1", 0);
    port = net::localPort(probe.get());
  }
  const std::string address = "127.0.0.1:" + std::to_string(port);
  // This process stays single-threaded (a client has no threads) so that forking is safe.
  const pid_t host = ::fork();
  ASSERT_GE(host, 0);
  if (host == 0) {
    int code = 1;
    try {
      auto store = rendezvous::hostTcpStore("kill-secret", "127.0.0.1", port);
      store->wait({"finished"}, seconds(60));
      code = 0;
    } catch (const std::exception& e) {
      fprintf(stderr, "store host: %s\n", e.what());
    }
    _exit(code);
  }
  ChildGuard hostGuard{host};
  const pid_t victim = ::fork();
  ASSERT_GE(victim, 0);
  if (victim == 0) {
    try {
      auto store = connectTcpStore(address, "kill-secret", seconds(30));
      store->setString("victim-ready", "1");
      store->get("never-set", seconds(60));
    } catch (...) {
    }
    _exit(3);
  }
  ChildGuard victimGuard{victim};
  auto store = connectTcpStore(address, "kill-secret", seconds(30));
  store->wait({"victim-ready"}, seconds(30));
  std::this_thread::sleep_for(milliseconds(100));  // the victim is parked in its get
  ::kill(victim, SIGKILL);
  const int victimStatus = reap(victim, seconds(10));
  victimGuard.pid = -1;
  EXPECT_TRUE(WIFSIGNALED(victimStatus));
  store->setString("survivor", "ok");
  EXPECT_EQ(store->getString("survivor", seconds(5)), "ok");
  EXPECT_FALSE(store->check({"never-set"}));
  auto another = connectTcpStore(address, "kill-secret", seconds(5));
  EXPECT_EQ(another->getString("survivor", seconds(5)), "ok");
  store->setString("finished", "1");
  const int hostStatus = reap(host, seconds(30));
  hostGuard.pid = -1;
  EXPECT_TRUE(WIFEXITED(hostStatus) && WEXITSTATUS(hostStatus) == 0) << "store host status " << hostStatus;
}

}  // namespace
}  // namespace gyre
