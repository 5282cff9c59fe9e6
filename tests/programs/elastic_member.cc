// gyre_elastic_member: a worker for `gyre run --elastic` tests that speaks the elastic store
// protocol itself (elastic/membership.h), without the gyre::elastic library: it reaches the
// job's store (GYRE_STORE_ADDR, GYRE_SECRET), announces that worker GYRE_ELASTIC_ID is ready,
// waits (bounded) until a published membership holds it, and from then on prints every new
// membership it sees:
//
//   member <id> epoch <E> rank <r> size <n>      (r is -1 in a membership without it)
//
// on stdout and appends the same line to DIR/member.<id>. At the start it writes what the launcher
// set to DIR/env.<id>: `rank R world W min A max B timeout T threads N`.
//
//   gyre_elastic_member DIR [--done-at-epoch E] [--exit-after S] [--stop-file PATH]
//                           [--kill ID@S] [--exit ID@S:CODE] [--join-timeout S]
//
// It exits 0 once it has seen epoch E or later (after joining), when PATH exists, or S seconds
// after it started (default 60); `--kill ID@S` makes worker ID send itself SIGKILL, and
// `--exit ID@S:CODE` exit with CODE, S seconds after it joined. When the launcher publishes the
// job's failure it prints `worker <id> saw the job fail: <reason>` on stderr and exits 3; never
// admitted within the join time-out (default 60 s): exit 4; bad arguments or environment: 2.
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>

#include "elastic/membership.h"
#include "gyre/store.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Trigger {
  int id = -1;
  double seconds = 0;
  int code = 0;
};

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

// "ID@S" or "ID@S:CODE".
bool parseTrigger(const std::string& text, Trigger& t) {
  return std::sscanf(text.c_str(), "%d@%lf:%d", &t.id, &t.seconds, &t.code) >= 2;
}

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: gyre_elastic_member DIR [options]\n");
    return 2;
  }
  const std::string dir = argv[1];
  long doneAtEpoch = 0;
  double exitAfter = 60, joinTimeout = 60;
  std::string stopFile;
  Trigger kill, exit;
  for (int i = 2; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "gyre_elastic_member: %s needs a value\n", flag.c_str());
      return 2;
    }
    const std::string value = argv[i + 1];
    bool ok = true;
    if (flag == "--done-at-epoch")
      doneAtEpoch = std::atol(value.c_str());
    else if (flag == "--exit-after")
      exitAfter = std::atof(value.c_str());
    else if (flag == "--join-timeout")
      joinTimeout = std::atof(value.c_str());
    else if (flag == "--stop-file")
      stopFile = value;
    else if (flag == "--kill")
      ok = parseTrigger(value, kill);
    else if (flag == "--exit")
      ok = parseTrigger(value, exit);
    else
      ok = false;
    if (!ok) {
      std::fprintf(stderr, "gyre_elastic_member: bad option %s %s\n", flag.c_str(), value.c_str());
      return 2;
    }
  }
  if (env("GYRE_ELASTIC") != "1" || env("GYRE_ELASTIC_ID").empty()) {
    std::fprintf(stderr, "gyre_elastic_member: GYRE_ELASTIC=1 and GYRE_ELASTIC_ID are not set\n");
    return 2;
  }
  const int id = std::atoi(env("GYRE_ELASTIC_ID").c_str());
  const auto start = Clock::now();
  std::ofstream(dir + "/env." + std::to_string(id))
      << "rank " << env("GYRE_RANK") << " world " << env("GYRE_WORLD_SIZE") << " min " << env("GYRE_MIN_NP")
      << " max " << env("GYRE_MAX_NP") << " timeout " << env("GYRE_ELASTIC_TIMEOUT_MS") << " threads "
      << env("GYRE_NUM_THREADS") << "\n";
  try {
    auto store = gyre::connectTcpStore(env("GYRE_STORE_ADDR"), env("GYRE_SECRET"), std::chrono::seconds(30));
    store->setTimeout(std::chrono::seconds(30));
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    gyre::elastic::announceReady(*store, id, host);
    std::int64_t seen = 0;
    std::optional<Clock::time_point> joined;
    while (true) {
      if (const auto failure = gyre::elastic::publishedFailure(*store)) {
        std::fprintf(stderr, "worker %d saw the job fail: %s\n", id, failure->c_str());
        return 3;
      }
      if (gyre::elastic::latestEpoch(*store) > seen) {
        const auto m = gyre::elastic::latestMembership(*store);
        seen = m->epoch;
        const int rank = m->rankOf(id);
        if (rank >= 0 && !joined) joined = Clock::now();
        if (joined) {
          char line[128];
          std::snprintf(line, sizeof line, "member %d epoch %lld rank %d size %zu\n", id,
                        static_cast<long long>(m->epoch), rank, m->members.size());
          std::fputs(line, stdout);
          std::fflush(stdout);
          std::ofstream(dir + "/member." + std::to_string(id), std::ios::app) << line;
        }
      }
      if (joined && doneAtEpoch > 0 && seen >= doneAtEpoch) return 0;
      if (!stopFile.empty() && std::filesystem::exists(stopFile)) return 0;
      if (since(start) >= exitAfter) return 0;
      if (!joined && since(start) >= joinTimeout) {
        std::fprintf(stderr, "worker %d was not admitted within %.0f s\n", id, joinTimeout);
        return 4;
      }
      if (joined && kill.id == id && since(*joined) >= kill.seconds) std::raise(SIGKILL);
      if (joined && exit.id == id && since(*joined) >= exit.seconds) return exit.code;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "worker %d: %s\n", id, e.what());
    return 1;
  }
}
