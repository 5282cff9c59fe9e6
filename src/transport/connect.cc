// Mesh::connect: publish this rank's listener in the store, connect to lower ranks and accept
// higher ones (no cycle, so no deadlock), authenticate every connection, map the shared-memory
// segments of peers on this host, and meet every peer once more before the segment names are
// unlinked. With the MPI transport only control connections are made, and once every peer has
// answered, the members create the communicator's MPI communicator together.
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/auth.h"
#include "common/auth_gate.h"
#include "common/mutex.h"
#include "common/check.h"
#include "common/logging.h"
#include "transport/mesh_impl.h"
#include "transport/mpi/mpi_transport.h"
#include "transport/shm/shm_channel.h"
#include "transport/tcp/tcp_channel.h"

namespace gyre::transport {
namespace {

constexpr std::uint32_t kHelloMagic = 0x48525947;  // "GYRH"
constexpr auto kHandshakeLimit = std::chrono::seconds(5);
// A counter in the store, shared by every communicator of the job, that hands out the tags of
// MPI_Comm_create_group calls (mpi/mpi_group.cc).
constexpr const char* kMpiGroupCounter = "gyre/mpi-group-tags";

enum class Link : std::uint32_t { kControl = 0, kData = 1 };

// Sent by both ends right after authentication.
struct Hello {
  std::uint32_t magic = kHelloMagic;
  std::uint32_t rank = 0;
  std::uint32_t link = 0;
  char shmName[64] = {};
};

std::string readFirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// Ranks with the same identity share a kernel, /dev/shm and a network namespace.
std::string hostIdentity() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  char ns[128] = {};
  ssize_t n = readlink("/proc/self/ns/net", ns, sizeof(ns) - 1);
  return std::string(name) + "/" + readFirstLine("/proc/sys/kernel/random/boot_id") + "/" +
         (n > 0 ? std::string(ns, n) : "");
}

// address|hostname|hostId|pid|MPI_COMM_WORLD rank (-1 without the MPI transport)
std::string encodeRecord(const std::string& address, const std::string& hostname, const std::string& hostId,
                         int mpiRank) {
  return address + "|" + hostname + "|" + hostId + "|" + std::to_string(getpid()) + "|" +
         std::to_string(mpiRank);
}

PeerInfo decodeRecord(const std::string& record, int rank) {
  std::vector<std::string> parts;
  std::stringstream in(record);
  for (std::string part; std::getline(in, part, '|');) parts.push_back(part);
  if (parts.size() != 5)
    GYRE_THROW(ProtocolError, "rank ", rank, " published a malformed address '", record, "'");
  PeerInfo info;
  info.address = parts[0];
  info.hostname = parts[1];
  info.hostId = parts[2];
  info.pid = std::atoi(parts[3].c_str());
  info.mpiRank = std::atoi(parts[4].c_str());
  return info;
}

std::string segmentName() {
  std::uint8_t random[8];
  auth::randomBytes(random, sizeof(random));
  std::ostringstream name;
  name << "/gyre-" << getpid() << "-" << std::hex;
  for (auto b : random) name << static_cast<int>(b);
  return name.str();
}

void sendHello(int fd, int rank, Link link, const std::string& shmName, Deadline deadline) {
  Hello h;
  h.rank = static_cast<std::uint32_t>(rank);
  h.link = static_cast<std::uint32_t>(link);
  std::strncpy(h.shmName, shmName.c_str(), sizeof(h.shmName) - 1);
  net::writeAll(fd, &h, sizeof(h), deadline);
}

Hello readHello(int fd, Deadline deadline) {
  Hello h;
  net::readAll(fd, &h, sizeof(h), deadline);
  h.shmName[sizeof(h.shmName) - 1] = '\0';
  if (h.magic != kHelloMagic) GYRE_THROW(ProtocolError, "bad hello magic ", h.magic);
  return h;
}

// Ranks started with different world sizes would each wait for peers that never come. The first
// rank to arrive records its size; one with another size records the disagreement and fails at
// once, and every rank still waiting watches for that record, so all of them fail with it.
constexpr auto kWaitSlice = std::chrono::milliseconds(200);

void checkWorldSize(Store& store, const std::string& prefix, const MeshOptions& o) {
  const std::string mine = std::to_string(o.size) + "|" + std::to_string(o.rank);
  const Store::Bytes desired(mine.begin(), mine.end());
  const Store::Bytes now = store.compareSet(prefix + "size", {}, desired);
  const std::string first(now.begin(), now.end());
  const auto bar = first.find('|');
  if (first.substr(0, bar) == std::to_string(o.size)) return;
  const std::string message = "the ranks disagree on the world size: rank " + std::to_string(o.rank) +
                              " was started in a world of " + std::to_string(o.size) + ", rank " +
                              first.substr(bar + 1) + " in a world of " + first.substr(0, bar) +
                              " (check every rank's GYRE_WORLD_SIZE, WORLD_SIZE, OMPI_COMM_WORLD_SIZE or "
                              "SLURM_NTASKS)";
  store.setString(prefix + "size-mismatch", message);
  GYRE_THROW(InvalidArgument, message);
}

// store.wait(keys) until the deadline, failing at once when a rank has recorded a size mismatch.
void waitForRecords(Store& store, const std::vector<std::string>& keys, const std::string& prefix,
                    Deadline deadline) {
  const std::string mismatch = prefix + "size-mismatch";
  for (;;) {
    const auto slice = std::min<std::int64_t>(kWaitSlice.count(), std::max(1, deadline.remainingMs()));
    try {
      store.wait(keys, std::chrono::milliseconds(slice));
      return;
    } catch (const TimeoutError&) {
      if (store.check({mismatch})) GYRE_THROW(InvalidArgument, store.getString(mismatch));
      if (deadline.expired()) throw;
    }
  }
}

// Authenticated connections from the gate's thread to Mesh::connect's.
class Inbox {
 public:
  void put(net::Fd fd, const std::string& peer) {
    {
      MutexLock lock(mutex_);
      queue_.emplace_back(std::move(fd), peer);
    }
    ready_.notifyOne();
  }
  std::pair<net::Fd, std::string> take(Deadline deadline) {
    UniqueLock lock(mutex_);
    while (queue_.empty()) {
      if (deadline.expired()) GYRE_THROW(TimeoutError, "timed out waiting for a connection from a higher rank");
      ready_.waitFor(mutex_, std::chrono::milliseconds(deadline.remainingMs(100)));
    }
    auto front = std::move(queue_.front());
    queue_.pop_front();
    return front;
  }

 private:
  Mutex mutex_;
  CondVar ready_;
  std::deque<std::pair<net::Fd, std::string>> queue_ GYRE_GUARDED_BY(mutex_);
};

Deadline handshakeDeadline(Deadline overall) {
  return Deadline(std::min(overall.at(), Clock::now() + kHandshakeLimit));
}

}  // namespace

std::unique_ptr<Mesh> Mesh::connect(Store& store, const MeshOptions& o) {
  GYRE_ARG_CHECK(o.size >= 1 && o.rank >= 0 && o.rank < o.size, "rank ", o.rank, " is not in a world of ",
                 o.size);
  const bool useMpi = o.transport == Transport::kMpi;
  if (useMpi) mpi::requireAvailable();
  auto mesh = std::make_unique<MeshImpl>(o);
  if (o.size == 1) return mesh;
  const Deadline deadline = Deadline::after(o.connectTimeout);
  const std::string context = "transport/" + o.name;

  net::Fd listener = net::listenOn(o.bindAddress, 0);
  // Higher ranks' connections, authenticated by the gate's thread (hostile or idle clients never
  // hold this thread up), wait here until the loop below takes them.
  Inbox authenticated;
  auto gate = std::make_unique<auth::AuthGate>(
      listener.get(),
      auth::GateOptions{.secret = o.secret,
                        .context = context,
                        .name = "communicator '" + o.name + "' rank " + std::to_string(o.rank)},
      [&authenticated](net::Fd fd, const std::string& peer) { authenticated.put(std::move(fd), peer); });
  const std::string self =
      net::joinHostPort(net::localHost(listener.get()), net::localPort(listener.get()));
  const std::string myId = hostIdentity();
  const std::string prefix = o.name + "/mesh/";
  const int myMpiRank = useMpi ? mpi::worldPlace().rank : -1;
  checkWorldSize(store, prefix, o);  // first: a rank that disagrees publishes no record to wait for
  store.setString(prefix + std::to_string(o.rank), encodeRecord(self, net::hostName(), myId, myMpiRank));
  std::vector<std::string> keys;
  for (int r = 0; r < o.size; ++r) keys.push_back(prefix + std::to_string(r));
  const std::string mpiTagKey = o.name + "/mpi-group-tag";
  if (useMpi) {
    if (o.rank == 0) store.setString(mpiTagKey, std::to_string(store.add(kMpiGroupCounter, 1)));
    keys.push_back(mpiTagKey);
  }
  waitForRecords(store, keys, prefix, deadline);

  std::vector<int> local;     // ranks on this host that use shared memory, in rank order
  std::vector<int> mpiRanks;  // MPI_COMM_WORLD rank of each rank (MPI transport)
  for (int r = 0; r < o.size; ++r) {
    if (r != o.rank) mesh->peers_[r].info = decodeRecord(store.getString(keys[r]), r);
    const bool sameHost = r == o.rank || mesh->peers_[r].info.hostId == myId;
    if (o.transport == Transport::kShm && !sameHost)
      GYRE_THROW(InvalidArgument, "transport shm was requested, but rank ", r, " runs on another host (",
                 mesh->peers_[r].info.hostname, ")");
    if (sameHost && (o.transport == Transport::kAuto || o.transport == Transport::kShm)) local.push_back(r);
    if (!useMpi) continue;
    mpiRanks.push_back(r == o.rank ? myMpiRank : mesh->peers_[r].info.mpiRank);
    GYRE_ARG_CHECK(mpiRanks.back() >= 0, "transport mpi was requested, but rank ", r,
                   " did not ask for it: every rank of a communicator must use the same transport");
  }
  std::vector<std::string> hostIds;  // by index
  for (int r = 0; r < o.size; ++r) {
    const std::string& id = r == o.rank ? myId : mesh->peers_[r].info.hostId;
    auto known = std::find(hostIds.begin(), hostIds.end(), id);
    mesh->hostIndices_.push_back(static_cast<int>(known - hostIds.begin()));
    if (known == hostIds.end()) hostIds.push_back(id);
  }
  const bool useShm = local.size() > 1;
  auto isLocal = [&](int r) { return useShm && std::find(local.begin(), local.end(), r) != local.end(); };
  // Peers whose bytes go over a TCP data connection (besides the control connection).
  auto needsDataLink = [&](int r) { return !useMpi && !isLocal(r); };
  // Index of `writer`'s ring in `owner`'s segment.
  auto ringIndex = [&](int owner, int writer) {
    std::uint32_t index = 0;
    for (int r : local) {
      if (r == writer) return index;
      if (r != owner) ++index;
    }
    GYRE_THROW(Error, "rank ", writer, " is not local");
  };
  std::string myShm;
  if (useShm) {
    myShm = segmentName();
    mesh->segment_ = std::make_unique<shm::Segment>(
        shm::Segment::create(myShm, static_cast<std::uint32_t>(local.size() - 1), o.shmRingBytes));
  }
  std::vector<std::string> peerShm(o.size);
  std::vector<net::Fd> dataFds(o.size);

  // Lower ranks: connect (control, then data for TCP pairs).
  for (int r = 0; r < o.rank; ++r) {
    auto [host, port] = net::splitHostPort(mesh->peers_[r].info.address);
    for (Link link : {Link::kControl, Link::kData}) {
      if (link == Link::kData && !needsDataLink(r)) continue;
      net::Fd fd = auth::connectAuthenticated(host, port, o.secret, context, deadline);
      sendHello(fd.get(), o.rank, link, myShm, deadline);
      Hello reply = readHello(fd.get(), deadline);
      GYRE_ENFORCE_EQ(static_cast<int>(reply.rank), r, "connected to the wrong rank at ", host, ":", port);
      if (link == Link::kControl) {
        peerShm[r] = reply.shmName;
        mesh->peers_[r].control = std::move(fd);
      } else {
        dataFds[r] = std::move(fd);
      }
    }
  }

  // Higher ranks: accept until each has its control (and, over TCP, data) connection.
  int expected = 0;
  for (int r = o.rank + 1; r < o.size; ++r) expected += needsDataLink(r) ? 2 : 1;
  while (expected > 0) {
    auto [fd, from] = authenticated.take(deadline);
    try {
      const Deadline limit = handshakeDeadline(deadline);
      Hello hello = readHello(fd.get(), limit);
      const int r = static_cast<int>(hello.rank);
      const auto link = static_cast<Link>(hello.link);
      if (r <= o.rank || r >= o.size || (link != Link::kControl && link != Link::kData) ||
          (link == Link::kData && !needsDataLink(r)) ||
          (link == Link::kControl ? mesh->peers_[r].control.valid() : dataFds[r].valid()))
        GYRE_THROW(ProtocolError, "unexpected hello from rank ", r, " link ", hello.link);
      sendHello(fd.get(), o.rank, link, myShm, limit);
      if (link == Link::kControl) {
        peerShm[r] = hello.shmName;
        mesh->peers_[r].control = std::move(fd);
      } else {
        dataFds[r] = std::move(fd);
      }
      --expected;
    } catch (const Error& e) {
      log::warn("communicator '", o.name, "' rank ", o.rank, " refused a connection from ", from, ": ",
                e.what());
    }
  }

  gate.reset();  // nobody else is expected

  for (int r = 0; r < o.size; ++r) {
    if (r == o.rank) continue;
    auto& peer = mesh->peers_[r];
    if (useMpi) continue;  // after every peer has answered, below
    if (isLocal(r)) {
      peer.segment = std::make_unique<shm::Segment>(shm::Segment::open(peerShm[r]));
      peer.channel = std::make_unique<shm::ShmChannel>(*mesh->segment_, ringIndex(o.rank, r), *peer.segment,
                                                       ringIndex(r, o.rank));
    } else {
      peer.channel = std::make_unique<tcp::TcpChannel>(std::move(dataFds[r]));
    }
  }

  // Every peer has mapped this rank's segment once it answers: the name can go.
  const char ready = 'R';
  for (int r = 0; r < o.size; ++r)
    if (r != o.rank) net::writeAll(mesh->peers_[r].control.get(), &ready, 1, deadline);
  for (int r = 0; r < o.size; ++r) {
    if (r == o.rank) continue;
    char answer = 0;
    net::readAll(mesh->peers_[r].control.get(), &answer, 1, deadline);
    if (answer != ready) GYRE_THROW(ProtocolError, "rank ", r, " sent ", int(answer), " instead of ready");
    net::setNonBlocking(mesh->peers_[r].control.get(), true);
  }
  if (mesh->segment_) mesh->segment_->unlink();
  if (useMpi) {
    // Every MPI library accepts tags up to 32767 (MPI_TAG_UB may be larger).
    const int tag = static_cast<int>(std::stoll(store.getString(mpiTagKey)) % 32768);
    auto group = mpi::createGroup(mpiRanks, tag);
    for (int r = 0; r < o.size; ++r)
      if (r != o.rank) mesh->peers_[r].channel = mpi::createChannel(group, r);
  }
  log::debug("communicator '", o.name, "' rank ", o.rank, " connected to ", o.size - 1, " peers (",
             useMpi ? "all over MPI"
                    : std::to_string(local.size() > 1 ? local.size() - 1 : 0) + " over shared memory",
             ")");
  return mesh;
}

}  // namespace gyre::transport
