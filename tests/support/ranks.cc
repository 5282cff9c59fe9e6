#include "support/ranks.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <thread>
#include <vector>

namespace gyre::test {

std::shared_ptr<Communicator> makeComm(std::shared_ptr<Store> store, int rank, int size) {
  CommunicatorOptions o;
  o.secret = "test-secret";
  o.timeout = std::chrono::seconds(60);
  return Communicator::create(std::move(store), rank, size, o);
}

void runThreads(int size, const std::function<void(int rank)>& fn) {
  std::vector<std::thread> threads;
  threads.reserve(size);
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&fn, rank] {
      try {
        fn(rank);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "rank " << rank << " threw: " << e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
}

void runProcesses(int size, const std::function<void(int rank)>& fn, std::chrono::seconds timeout,
                  std::vector<int> killedRanks) {
  auto expectKilled = [&](std::size_t rank) {
    return std::find(killedRanks.begin(), killedRanks.end(), static_cast<int>(rank)) != killedRanks.end();
  };
  std::vector<pid_t> pids;
  for (int rank = 0; rank < size; ++rank) {
    pid_t pid = fork();
    if (pid < 0) {
      ADD_FAILURE() << "fork failed";
      break;
    }
    if (pid == 0) {
      int code = 0;
      try {
        fn(rank);
        if (::testing::Test::HasFailure()) code = 1;
      } catch (const std::exception& e) {
        fprintf(stderr, "rank %d threw: %s\n", rank, e.what());
        code = 1;
      }
      fflush(stdout);
      fflush(stderr);
      _exit(code);
    }
    pids.push_back(pid);
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<bool> done(pids.size(), false);
  std::size_t remaining = pids.size();
  while (remaining > 0) {
    for (std::size_t i = 0; i < pids.size(); ++i) {
      if (done[i]) continue;
      int status = 0;
      pid_t r = waitpid(pids[i], &status, WNOHANG);
      if (r == 0) continue;
      done[i] = true;
      --remaining;
      if (r < 0) {
        ADD_FAILURE() << "waitpid failed for rank " << i;
      } else if (expectKilled(i)) {
        if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL) ADD_FAILURE() << "rank " << i << " was not killed";
      } else if (WIFSIGNALED(status)) {
        ADD_FAILURE() << "rank " << i << " died with signal " << WTERMSIG(status);
      } else if (WEXITSTATUS(status) != 0) {
        ADD_FAILURE() << "rank " << i << " exited with " << WEXITSTATUS(status);
      }
    }
    if (remaining == 0) break;
    if (std::chrono::steady_clock::now() > deadline) {
      for (std::size_t i = 0; i < pids.size(); ++i) {
        if (!done[i]) {
          kill(pids[i], SIGKILL);
          waitpid(pids[i], nullptr, 0);
          ADD_FAILURE() << "rank " << i << " still running after " << timeout.count() << " s: killed";
        }
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

TempDir::TempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "gyre-test-XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

}  // namespace gyre::test
