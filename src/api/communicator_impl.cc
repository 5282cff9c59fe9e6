#include "api/communicator_impl.h"

#include <algorithm>

#include "collectives/dispatch.h"
#include "collectives/fingerprint.h"
#include "common/check.h"
#include "common/socket.h"
#include "rendezvous/network_store.h"

namespace gyre {
namespace {

std::string bindAddressFor(const Store& store, const CommunicatorOptions& options) {
  if (!options.interface.empty()) return net::resolveInterface(options.interface);
  if (const auto* network = dynamic_cast<const rendezvous::NetworkStore*>(&store)) return network->localAddress();
  return "127.0.0.1";
}

// Re-raises the current exception with the call's description in front, keeping its type.
[[noreturn]] void rethrowWithContext(const collectives::OpDesc& desc) {
  const std::string prefix = desc.describe() + ": ";
  try {
    throw;
  } catch (const PeerLostError& e) {
    throw PeerLostError(prefix + e.what(), e.rank());
  } catch (const TimeoutError& e) {
    throw TimeoutError(prefix + e.what());
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(prefix + e.what());
  } catch (const ProtocolError& e) {
    throw ProtocolError(prefix + e.what());
  }
}

}  // namespace

Communicator::Impl::Impl(std::shared_ptr<Store> store, int rank, int size, CommunicatorOptions options)
    : store_(std::move(store)), rank_(rank), size_(size), options_(std::move(options)) {
  GYRE_ARG_CHECK(store_ != nullptr, "Communicator::create needs a store");
  GYRE_ARG_CHECK(size >= 1 && rank >= 0 && rank < size, "rank ", rank, " is not in a world of ", size);
  GYRE_ARG_CHECK(options_.timeout.count() > 0, "time-out must be positive, got ", options_.timeout.count(), " ms");
  GYRE_ARG_CHECK(options_.spinMicros >= 0, "spin time must not be negative");
  if (!options_.costModel.empty()) cost_ = collectives::parseCostModel(options_.costModel);
  transport::MeshOptions m;
  m.rank = rank;
  m.size = size;
  m.transport = options_.transport;
  m.bindAddress = size > 1 ? bindAddressFor(*store_, options_) : "127.0.0.1";
  m.secret = options_.secret;
  m.name = options_.name;
  m.connectTimeout = options_.startTimeout.count() > 0 ? options_.startTimeout : options_.timeout;
  m.spinMicros = options_.spinMicros;
  m.shmRingBytes = options_.shmRingBytes;
  mesh_ = transport::Mesh::connect(*store_, m);
  topology_ = collectives::Topology::of(mesh_->hostIndices(), rank);
  // GYRE_COST_MODEL's terms stand for the links across hosts too: nothing is calibrated.
  if (!options_.costModel.empty()) topology_.acrossCost = cost_;
}

void Communicator::Impl::execute(const collectives::OpDesc& desc) {
  const Deadline deadline = Deadline::after(desc.timeout.count() > 0 ? desc.timeout : options_.timeout);
  try {
    const bool collective = !collectives::isPointToPoint(desc.type);
    if (collective && options_.debugCollectives)
      collectives::checkFingerprint(*mesh_, deadline, sequence_, desc);
    if (collective) ++sequence_;
    collectives::Context context{*mesh_, deadline, scratch_, cost_};
    context.topology = &topology_;
    const collectives::CallGuard guard = collectives::guardOf(desc);
    if (collective) {
      context.guard = &guard;
      context.book = &guardBook_;
      std::fill(guardBook_.guarded.begin(), guardBook_.guarded.end(), 0);
    }
    collectives::execute(context, desc);
  } catch (const Error&) {
    rethrowWithContext(desc);
  }
}

void Communicator::Impl::runBlocking(collectives::OpDesc desc) {
  executor_.runBlocking([this, &desc] { execute(desc); });
}

std::shared_ptr<Work> Communicator::Impl::submit(collectives::OpDesc desc) {
  return executor_.submit([this, d = std::move(desc)] { execute(d); });
}

}  // namespace gyre
