// elastic::State: commit, restore, sync; and run(), the loop that survives membership changes.
#include <cstring>

#include "common/check.h"
#include "common/logging.h"
#include "gyre/elastic.h"
#include "gyre/init.h"

namespace gyre::elastic {
namespace {

// The user values as bytes: for each entry, the key's length (8 bytes), the key, the value.
template <typename T>
void pack(const std::map<std::string, T>& values, std::vector<std::uint8_t>& out) {
  const auto put = [&](const void* p, std::size_t n) {
    const auto* b = static_cast<const std::uint8_t*>(p);
    out.insert(out.end(), b, b + n);
  };
  const std::uint64_t count = values.size();
  put(&count, sizeof count);
  for (const auto& [key, value] : values) {
    const std::uint64_t length = key.size();
    put(&length, sizeof length);
    put(key.data(), key.size());
    put(&value, sizeof value);
  }
}

template <typename T>
std::map<std::string, T> unpack(const std::vector<std::uint8_t>& in, std::size_t& at) {
  const auto take = [&](void* p, std::size_t n) {
    if (at + n > in.size()) GYRE_THROW(ProtocolError, "elastic state bytes end early");
    std::memcpy(p, in.data() + at, n);
    at += n;
  };
  std::map<std::string, T> values;
  std::uint64_t count = 0;
  take(&count, sizeof count);
  for (std::uint64_t i = 0; i < count; ++i) {
    std::uint64_t length = 0;
    take(&length, sizeof length);
    if (length > in.size() - at) GYRE_THROW(ProtocolError, "elastic state bytes end early");
    std::string key(length, '\0');
    take(key.data(), length);
    T value{};
    take(&value, sizeof value);
    values.emplace(std::move(key), value);
  }
  return values;
}

}  // namespace

void State::snapshot() {
  captureValues();
  saveState();
  committedValues_ = values;
  committedReals_ = reals;
  saved_ = true;
}

void State::commit() {
  snapshot();
  ++commits_;
  if (rendezvous_ != nullptr && comm_ != nullptr && rendezvous_->membershipChanged(*comm_))
    throw MembershipChanged("the launcher published a new membership (commit " + std::to_string(commits_) + ")");
}

void State::restore() {
  if (!saved_) return;
  values = committedValues_;
  reals = committedReals_;
  restoreState();
}

void State::sync(Communicator& comm) {
  std::int64_t best = commits_;
  comm.allreduce(&best, &best, 1, {DataType::kInt64, ReduceOp::kMax});
  std::int64_t root = commits_ == best ? comm.rank() : comm.size();
  comm.allreduce(&root, &root, 1, {DataType::kInt64, ReduceOp::kMin});
  const int from = static_cast<int>(root);

  std::vector<std::uint8_t> bytes;
  if (comm.rank() == from) {
    captureValues();
    pack(values, bytes);
    pack(reals, bytes);
  }
  std::int64_t size = static_cast<std::int64_t>(bytes.size());
  comm.broadcast(&size, 1, {DataType::kInt64, from});
  bytes.resize(static_cast<std::size_t>(size));
  comm.broadcast(bytes.data(), bytes.size(), {DataType::kUInt8, from});
  if (comm.rank() != from) {
    std::size_t at = 0;
    values = unpack<std::int64_t>(bytes, at);
    reals = unpack<double>(bytes, at);
  }
  broadcastState(comm, from);
  commits_ = best;
  snapshot();
}

void State::onReset(std::function<void(Communicator&)> callback) {
  resetCallbacks_.push_back(std::move(callback));
}

void State::meet(Communicator& comm) {
  sync(comm);
  for (const auto& callback : resetCallbacks_) callback(comm);
}

void run(State& state, const TrainFunction& train, Options options) {
  Rendezvous rendezvous(std::move(options));
  const int id = rendezvous.workerId();
  // The state checks for new memberships only while it trains in one, however that ends.
  struct Attached {
    State& state;
    Attached(State& s, Rendezvous& r, Communicator& c) : state(s) {
      state.rendezvous_ = &r;
      state.comm_ = &c;
    }
    ~Attached() {
      state.rendezvous_ = nullptr;
      state.comm_ = nullptr;
    }
  };
  while (true) {
    std::shared_ptr<Communicator> comm = rendezvous.join();
    const auto rollBack = [&](const char* what, const Error& e) {
      log::warn("elastic: worker ", id, " (rank ", comm->rank(), " of ", comm->size(), ") ", what, ": ", e.what(),
                "; rolling back to commit ", state.commits(), " and waiting for the next membership");
      rendezvous.left(std::string(what) + ": " + e.what());
      state.restore();
    };
    try {
      Attached attached(state, rendezvous, *comm);
      state.meet(*comm);
      train(comm);
      return;
    } catch (const MembershipChanged&) {
      log::warn("elastic: worker ", id, " (rank ", comm->rank(), " of ", comm->size(),
                ") sees a new membership at commit ", state.commits(), "; meeting it");
    } catch (const PeerLostError& e) {
      rollBack("lost a peer", e);
    } catch (const TimeoutError& e) {
      rollBack("timed out", e);
    }
  }
}

void run(State& state, const TrainFunction& train) {
  if (std::optional<Options> options = Options::fromEnvironment()) return run(state, train, std::move(*options));
  auto comm = init();
  state.meet(*comm);
  train(comm);
}

}  // namespace gyre::elastic
