#include "python/process_group.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <pybind11/chrono.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/utils/pybind.h>

#include <algorithm>
#include <utility>

#include "api/open_store.h"
#include "api/options_env.h"
#include "common/auth.h"
#include "common/config.h"
#include "common/socket.h"
#include "gyre/errors.h"
#include "python/c10d_store.h"

namespace py = pybind11;

namespace gyre::python {

namespace {

// The address this host uses to reach `host` (a UDP "connection" sends nothing), or empty.
std::string localAddressToward(const std::string& host) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), "9", &hints, &found) != 0) return "";
  std::string local;
  for (addrinfo* a = found; a && local.empty(); a = a->ai_next) {
    const int fd = ::socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) local = net::localHost(fd);
    ::close(fd);
  }
  ::freeaddrinfo(found);
  return local;
}

// The host of the TCPStore under torch's prefix stores (init_method tcp:// or env://), or empty.
std::string tcpStoreHost(const c10d::Store& store) {
  const c10d::Store* s = &store;
  while (const auto* prefix = dynamic_cast<const c10d::PrefixStore*>(s))
    s = const_cast<c10d::PrefixStore*>(prefix)->getUnderlyingStore().get();
  const auto* tcp = dynamic_cast<const c10d::TCPStore*>(s);
  return tcp ? tcp->getHost() : "";
}

CommunicatorOptions optionsFor(Store& store, const c10d::Store& torchStore, int rank,
                               std::chrono::milliseconds timeout) {
  const config::Env env = config::processEnvironment();
  CommunicatorOptions o;
  o.name = "c10d";
  if (timeout.count() > 0) o.timeout = o.startTimeout = timeout;
  applyKnobs(env, o);  // GYRE_TIMEOUT_MS and the other knobs win over torch's time-out
  // The secret: gyre run's, or one rank 0 makes and hands over through torch's store (whoever
  // reaches that store is already inside the job, as with gloo).
  if (config::isSet(env, "GYRE_SECRET")) {
    o.secret = config::getString(env, "GYRE_SECRET");
  } else {
    if (rank == 0) store.setString("gyre/secret", auth::generateSecret());
    o.secret = store.getString("gyre/secret");
  }
  // Where to listen: GYRE_IFACE, else the address that reaches torch's TCPStore (tcp://,
  // env://) or MASTER_ADDR, else loopback (one host, file://).
  if (o.interface.empty()) {
    std::string host = tcpStoreHost(torchStore);
    if (host.empty() && config::isSet(env, "MASTER_ADDR")) host = env.at("MASTER_ADDR");
    if (!host.empty()) o.interface = localAddressToward(host);
  }
  return o;
}

}  // namespace

ProcessGroupGyre::ProcessGroupGyre(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                   std::chrono::milliseconds timeout)
    : ProcessGroup(rank, size) {
  std::shared_ptr<Store> gyreStore = wrapC10dStore(store);
  if (timeout.count() > 0) gyreStore->setTimeout(timeout);  // ranks may start as far apart as torch lets them
  comm_ = Communicator::create(gyreStore, rank, size, optionsFor(*gyreStore, *store, rank, timeout));
  queue_ = std::make_unique<OpQueue>(comm_);
}

// Out of line: the queue (which runs what is still queued) goes before the communicator.
ProcessGroupGyre::~ProcessGroupGyre() = default;

c10::intrusive_ptr<c10d::Work> ProcessGroupGyre::enqueue(c10d::OpType type, ops::Op op) {
  auto work =
      c10::make_intrusive<GyreWork>(queue_.get(), getRank(), type, std::move(op.outputs), std::move(op.run));
  queue_->push(work, /*urgent=*/false);
  return work;
}

// ---- the operations (their checks and runs are c10d_ops.cc's) ----

c10::intrusive_ptr<c10d::Work> ProcessGroupGyre::broadcast(std::vector<at::Tensor>& tensors,
                                                           const c10d::BroadcastOptions& opts) {
  return enqueue(c10d::OpType::BROADCAST, ops::broadcast(tensors, opts, getSize()));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupGyre::allreduce(std::vector<at::Tensor>& tensors,
                                                           const c10d::AllreduceOptions& opts) {
  return enqueue(c10d::OpType::ALLREDUCE, ops::allreduce(tensors, opts));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupGyre::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                                     const c10d::AllreduceCoalescedOptions& opts) {
  return enqueue(c10d::OpType::ALLREDUCE_COALESCED, ops::allreduceCoalesced(tensors, opts));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupGyre::reduce(std::vector<at::Tensor>& tensors,
                                                        const c10d::ReduceOptions& opts) {
  return enqueue(c10d::OpType::REDUCE, ops::reduce(tensors, opts, getRank(), getSize()));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupGyre::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                           std::vector<at::Tensor>& inputs,
                                                           const c10d::AllgatherOptions& opts) {
  return enqueue(c10d::OpType::ALLGATHER, ops::allgather(outputs, inputs, opts, getSize()));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupGyre::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                 const c10d::AllgatherOptions& opts) {
  return enqueue(c10d::OpType::_ALLGATHER_BASE, ops::allgatherBase(output, input, opts, getSize()));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupGyre::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                                     std::vector<at::Tensor>& inputs,
                                                                     const c10d::AllgatherOptions& opts) {
  return enqueue(c10d::OpType::ALLGATHER_COALESCED, ops::allgatherCoalesced(outputs, inputs, opts, getSize()));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupGyre::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                        std::vector<at::Tensor>& inputs,
                                                        const c10d::GatherOptions& opts) {
  return enqueue(c10d::OpType::GATHER, ops::gather(outputs, inputs, opts, getRank(), getSize()));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupGyre::scatter(std::vector<at::Tensor>& outputs,
                                                         std::vector<std::vector<at::Tensor>>& inputs,
                                                         const c10d::ScatterOptions& opts) {
  return enqueue(c10d::OpType::SCATTER, ops::scatter(outputs, inputs, opts, getRank(), getSize()));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupGyre::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                                const c10d::ReduceScatterOptions& opts) {
  return enqueue(c10d::OpType::REDUCE_SCATTER, ops::reduceScatter(outputs, inputs, opts, getSize()));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupGyre::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                      const c10d::ReduceScatterOptions& opts) {
  return enqueue(c10d::OpType::_REDUCE_SCATTER_BASE, ops::reduceScatterBase(output, input, opts, getSize()));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupGyre::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                               std::vector<int64_t>& outputSplitSizes,
                                                               std::vector<int64_t>& inputSplitSizes,
                                                               const c10d::AllToAllOptions& opts) {
  return enqueue(c10d::OpType::ALLTOALL_BASE,
                 ops::alltoallBase(output, input, outputSplitSizes, inputSplitSizes, opts, getSize()));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupGyre::alltoall(std::vector<at::Tensor>& outputs,
                                                          std::vector<at::Tensor>& inputs,
                                                          const c10d::AllToAllOptions& opts) {
  return enqueue(c10d::OpType::ALLTOALL, ops::alltoall(outputs, inputs, opts, getSize()));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupGyre::barrier(const c10d::BarrierOptions& opts) {
  return enqueue(c10d::OpType::BARRIER, ops::barrier(opts));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupGyre::send(std::vector<at::Tensor>& tensors, int dstRank, int tag) {
  return p2p(c10d::OpType::SEND, ops::singleTensor(tensors, "send"), dstRank, tag);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupGyre::recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) {
  return p2p(c10d::OpType::RECV, ops::singleTensor(tensors, "recv"), srcRank, tag);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupGyre::recvAnysource(std::vector<at::Tensor>&, int) {
  TORCH_CHECK(false,
              "gyre backend: recv without a source rank (recv from any source) is not supported; name the "
              "sender: dist.recv(tensor, src=RANK)");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupGyre::p2p(c10d::OpType type, at::Tensor tensor, int peer, int tag) {
  const bool isSend = type == c10d::OpType::SEND;
  const char* call = isSend ? "send" : "recv";
  std::lock_guard lock(coalesceMu_);
  try {
    ops::checkPeer(peer, getRank(), getSize(), call);
    P2PPart part{isSend, peer, tag, ops::stage(tensor, call, /*copyIn=*/isSend, /*copyOut=*/!isSend)};
    std::vector<at::Tensor> outputs;
    if (!isSend) outputs.push_back(tensor);
    if (!coalescing_) {
      auto work = c10::make_intrusive<GyreWork>(queue_.get(), getRank(), type, std::move(outputs), nullptr,
                                                std::move(part));
      queue_->push(work, /*urgent=*/false);
      return work;
    }
    // batch_isend_irecv: runs with the rest at endCoalescing
    TORCH_CHECK(coalescedParts_.empty() || coalescedParts_.front().tag == tag, "gyre backend: batch_isend_irecv: ",
                "every operation of a batch needs the same tag (", tag, " after ", coalescedParts_.front().tag, ")");
    auto work = c10::make_intrusive<GyreWork>(queue_.get(), getRank(), type, std::move(outputs), nullptr);
    coalesced_.push_back(work);
    coalescedParts_.push_back(std::move(part));
    return work;
  } catch (...) {
    if (coalescing_) coalesceFailed_ = true;  // the rest of the batch must not run without it
    throw;
  }
}

void ProcessGroupGyre::startCoalescing() {
  std::lock_guard lock(coalesceMu_);
  TORCH_CHECK(!coalescing_, "gyre backend: batch_isend_irecv inside another batch");
  coalescing_ = true;
  coalesceFailed_ = false;
}

void ProcessGroupGyre::endCoalescing(std::vector<c10::intrusive_ptr<c10d::Work>>& reqs) {
  (void)reqs;  // the works of coalesced_
  std::vector<c10::intrusive_ptr<GyreWork>> followers;
  std::vector<P2PPart> parts;
  bool failed = false;
  {
    std::lock_guard lock(coalesceMu_);
    coalescing_ = false;
    followers.swap(coalesced_);
    parts.swap(coalescedParts_);
    failed = coalesceFailed_;
  }
  if (followers.empty()) return;
  ops::Run run = [parts = std::move(parts)](Communicator& c) mutable {
    std::vector<P2PPart*> pointers;
    for (auto& p : parts) pointers.push_back(&p);
    runP2P(c, pointers);
  };
  if (failed)  // a refused operation raised already; its batch fails as a whole, sending nothing
    run = [](Communicator&) {
      throw std::runtime_error("gyre backend: batch_isend_irecv: an operation of the batch was refused (its "
                               "error was raised); the batch did not run");
    };
  auto leader = c10::make_intrusive<GyreWork>(queue_.get(), getRank(), c10d::OpType::UNKNOWN,
                                              std::vector<at::Tensor>{}, std::move(run));
  for (auto& f : followers) {
    f->follow(leader);
    leader->addFollower(f);
  }
  queue_->push(leader, /*urgent=*/true);  // a peer may wait for it whatever this rank does next
}

namespace {

// Sets `key` in the store of the job this process was launched in (gyre run's, Slurm's, ...)
// when `value` is not empty, then waits for the key and returns its value: how the ranks of a
// launcher that does not set torch's env:// variables agree on a TCPStore address.
std::string launchStoreExchange(const std::string& key, const std::string& value) {
  static std::mutex mu;
  // Kept (under Slurm rank 0 hosts it) and never destroyed: exit must not wait for its thread.
  static auto& store = *new std::shared_ptr<Store>;
  std::lock_guard lock(mu);
  if (!store) {
    const config::Env env = config::processEnvironment();
    LaunchInfo info = detectLaunch(env);
    CommunicatorOptions o;
    applyKnobs(env, o);
    o.secret = info.secret;
    store = openLaunchStore(info, env, o);
  }
  if (!value.empty()) store->setString(key, value);
  return store->getString(key);
}

}  // namespace

void bindProcessGroup(py::module_& m) {
  m.def("_launch_place", [] {
    const LaunchInfo info = detectLaunch(config::processEnvironment());
    py::dict place;
    place["launcher"] = info.launcher;
    place["rank"] = info.rank;
    place["size"] = info.size;
    place["local_rank"] = info.localRank;
    place["local_size"] = info.localSize;
    place["store_address"] = info.storeAddress;
    return place;
  }, "Where the launcher's variables put this process (gyre::detectLaunch).");
  m.def("_launch_store_exchange", &launchStoreExchange, py::arg("key"), py::arg("value"),
        py::call_guard<py::gil_scoped_release>());
  py::object base;
  try {
    base = py::module_::import("torch.distributed").attr("ProcessGroup");
  } catch (const py::error_already_set&) {
    return;  // a torch built without torch.distributed: no backend to register
  }
  py::class_<ProcessGroupGyre, c10::intrusive_ptr<ProcessGroupGyre>>(
      m, "ProcessGroupGyre", base, "torch.distributed's backend \"gyre\": a process group on gyre's collectives")
      .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                       std::chrono::milliseconds timeout) {
             return c10::make_intrusive<ProcessGroupGyre>(store, rank, size, timeout);
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
           py::call_guard<py::gil_scoped_release>());
}

}  // namespace gyre::python
