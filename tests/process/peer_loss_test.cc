// A peer process killed with SIGKILL in the middle of collectives: every survivor's pending and
// later operations fail with PeerLostError naming it, within 2 seconds, on every transport.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>

#include "gyre/gyre.h"
#include "support/ranks.h"

namespace gyre {
namespace {

using Clock = std::chrono::steady_clock;

std::int64_t nowNs() { return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count(); }

struct LossCase {
  Transport transport;
  int size;
  int victim;
  bool victimIdle;  // killed while the others wait for it (not in the middle of a transfer)
};

class PeerLossTest : public ::testing::TestWithParam<LossCase> {};

TEST_P(PeerLossTest, SurvivorsFailFastNamingTheLostRank) {
  const LossCase c = GetParam();
  test::TempDir dir;
  const std::string path = dir.path() + "/store";
  test::runProcesses(
      c.size,
      [&](int rank) {
        auto store = createFileStore(path);
        CommunicatorOptions o;
        o.transport = c.transport;
        o.secret = "loss";
        o.timeout = std::chrono::seconds(30);  // detection must not rely on the time-out
        auto comm = Communicator::create(store, rank, c.size, o);
        std::vector<float> buf(1 << 20, 1.0f);
        for (int step = 0;; ++step) {
          if (rank == c.victim && step == 5) {
            if (c.victimIdle) usleep(200 * 1000);  // the others are now blocked on us
            store->setString("killed_at", std::to_string(nowNs()));
            raise(SIGKILL);
          }
          try {
            comm->allreduce(buf.data(), buf.data(), buf.size(), AllreduceOptions{DataType::kFloat32, ReduceOp::kMax});
          } catch (const PeerLostError& e) {
            const double seconds = (nowNs() - std::stoll(store->getString("killed_at"))) / 1e9;
            EXPECT_EQ(e.rank(), c.victim) << e.what();
            EXPECT_LT(seconds, 2.0) << "detected after " << seconds << " s";
            EXPECT_NE(std::string(e.what()).find("rank " + std::to_string(c.victim)), std::string::npos) << e.what();
            // Later operations fail at once, too.
            const auto start = Clock::now();
            EXPECT_THROW(comm->barrier(), PeerLostError);
            EXPECT_LT(Clock::now() - start, std::chrono::seconds(1));
            return;
          }
          ASSERT_LT(step, 1000) << "no failure seen";
        }
      },
      std::chrono::seconds(60), {c.victim});
}

INSTANTIATE_TEST_SUITE_P(Transports, PeerLossTest,
                         ::testing::Values(LossCase{Transport::kTcp, 4, 2, false}, LossCase{Transport::kTcp, 4, 0, true},
                                           LossCase{Transport::kShm, 4, 2, false}, LossCase{Transport::kShm, 4, 0, true},
                                           LossCase{Transport::kShm, 8, 5, false}),
                         [](const auto& param_info) {
                           return std::string(toString(param_info.param.transport)) + "_np" + std::to_string(param_info.param.size) +
                                  "_victim" + std::to_string(param_info.param.victim) +
                                  (param_info.param.victimIdle ? "_idle" : "_busy");
                         });

}  // namespace
}  // namespace gyre
