// A worker's side of the elastic membership protocol (membership.h): wait to be admitted, meet
// the other members of the newest membership, build its communicator.
#include <chrono>
#include <thread>
#include <utility>

#include "api/options_env.h"
#include "common/check.h"
#include "common/clock.h"
#include "common/config.h"
#include "common/logging.h"
#include "common/socket.h"
#include "elastic/membership.h"
#include "gyre/elastic.h"
#include "gyre/init.h"
#include "rendezvous/connect.h"

namespace gyre::elastic {
namespace {

using Ms = std::chrono::milliseconds;

// How often a waiting worker looks at the store again.
constexpr Ms kPollInterval{10};

const Store::Bytes kGo = {'g', 'o'};
const Store::Bytes kAbandon = {'a', 'b', 'a', 'n', 'd', 'o', 'n'};

std::string arrivedKey(std::int64_t epoch) {
  return "elastic/arrived/" + std::to_string(epoch);
}

std::string outcomeKey(std::int64_t epoch) {
  return "elastic/outcome/" + std::to_string(epoch);
}

}  // namespace

std::optional<Options> Options::fromEnvironment(CommunicatorOptions communicator) {
  config::Env env = config::processEnvironment();
  if (!config::getBool(env, "GYRE_ELASTIC")) return std::nullopt;
  Options o;
  o.communicator = std::move(communicator);
  const auto id = config::getOptionalInt(env, "GYRE_ELASTIC_ID");
  GYRE_ARG_CHECK(id.has_value(), "GYRE_ELASTIC_ID is not set (GYRE_ELASTIC is)");
  o.workerId = static_cast<int>(*id);
  o.timeout = Ms(config::getInt(env, "GYRE_ELASTIC_TIMEOUT_MS"));
  applyKnobs(env, o.communicator);
  const auto address = env.find("GYRE_STORE_ADDR");
  GYRE_ARG_CHECK(address != env.end() && !address->second.empty(), "GYRE_STORE_ADDR is not set (GYRE_ELASTIC is)");
  const auto secret = env.find("GYRE_SECRET");
  if (secret != env.end() && !secret->second.empty()) o.communicator.secret = secret->second;
  const Timeout reach =
      o.communicator.startTimeout.count() > 0 ? o.communicator.startTimeout : o.communicator.timeout;
  o.store = rendezvous::connectStore(address->second, o.communicator.secret, reach);
  o.host = net::hostName();
  return o;
}

Rendezvous::Rendezvous(Options options) : options_(std::move(options)) {
  GYRE_ARG_CHECK(options_.store != nullptr, "elastic::Rendezvous needs the job's store");
  GYRE_ARG_CHECK(options_.workerId >= 0, "worker ids are not negative (got ", options_.workerId, ")");
  if (options_.host.empty()) options_.host = net::hostName();
}

std::shared_ptr<Communicator> Rendezvous::join() {
  Store& store = *options_.store;
  abandoned_ = std::max(abandoned_, epoch_);  // the membership this worker was in is over
  announceReady(store, options_.workerId, options_.host);
  // Where this worker is, for the launcher: a member that never says it left (or arrived) while
  // the others did has stopped answering (src/launcher/elastic_policy.h).
  const std::int64_t timeoutMs = options_.communicator.timeout.count();
  const auto waiting = [&](std::int64_t left, std::string why) {
    recordPlace(store, options_.workerId, Place{Place::Kind::kWaiting, left, timeoutMs, std::move(why)});
  };
  waiting(epoch_, std::exchange(leftBecause_, {}));
  const Deadline deadline = Deadline::after(options_.timeout);
  const auto checkTime = [&](const char* what) {
    if (const auto reason = publishedFailure(store))
      GYRE_THROW(Error, "worker ", options_.workerId, ": the launcher gave up: ", *reason);
    if (deadline.expired())
      GYRE_THROW(TimeoutError, "worker ", options_.workerId, " waited ", options_.timeout.count(), " ms ", what,
                 " (GYRE_ELASTIC_TIMEOUT_MS)");
  };
  while (true) {
    const std::optional<Membership> m = latestMembership(store);
    const int rank = m && m->epoch > abandoned_ ? m->rankOf(options_.workerId) : -1;
    if (rank < 0) {
      checkTime("for a membership that includes it");
      std::this_thread::sleep_for(kPollInterval);
      continue;
    }
    const std::int64_t epoch = m->epoch;
    const int size = static_cast<int>(m->members.size());
    recordPlace(store, options_.workerId, Place{Place::Kind::kArrived, epoch, timeoutMs, {}});
    if (store.add(arrivedKey(epoch), 1) == size) store.compareSet(outcomeKey(epoch), {}, kGo);
    while (true) {
      const Store::Bytes outcome =
          store.check({outcomeKey(epoch)}) ? store.get(outcomeKey(epoch)) : Store::Bytes{};
      if (outcome == kGo) break;
      if (outcome == kAbandon) {
        abandoned_ = epoch;
        break;
      }
      // A newer membership before everyone arrived: whoever sees it first settles it for all.
      if (latestEpoch(store) > epoch) {
        store.compareSet(outcomeKey(epoch), {}, kAbandon);
        continue;
      }
      checkTime(("for the other members of membership " + std::to_string(epoch)).c_str());
      std::this_thread::sleep_for(kPollInterval);
    }
    if (abandoned_ == epoch) continue;
    CommunicatorOptions o = options_.communicator;
    o.name = "elastic-" + std::to_string(epoch);
    try {
      auto comm = Communicator::create(options_.store, rank, size, o);
      epoch_ = epoch;
      log::info("elastic: worker ", options_.workerId, " is rank ", rank, " of ", size, " in membership ", epoch);
      return comm;
    } catch (const InvalidArgument&) {
      throw;
    } catch (const Error& e) {  // a peer lost, a time-out, a refused connection
      log::warn("elastic: worker ", options_.workerId, " could not connect membership ", epoch, ": ", e.what());
      waiting(epoch, std::string("could not connect: ") + e.what());
    }
    abandoned_ = epoch;  // a member died or stopped in between: the launcher publishes the next one
  }
}

void Rendezvous::left(std::string why) {
  leftBecause_ = std::move(why);
}

bool Rendezvous::membershipChanged(Communicator& comm) {
  std::int64_t newer = 0;
  if (comm.rank() == 0) newer = latestEpoch(*options_.store) > epoch_ ? 1 : 0;
  comm.broadcast(&newer, 1, {DataType::kInt64, 0});
  return newer != 0;
}

}  // namespace gyre::elastic
