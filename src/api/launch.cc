// detectLaunch: where this process sits in its job, from the variables its launcher set.
// Precedence: GYRE_* > torchrun's agent (TORCHELASTIC_RUN_ID: it is the innermost launcher when
// torchrun runs inside srun or mpirun) > OpenMPI > Slurm > plain RANK/WORLD_SIZE > none. GYRE_STORE_ADDR, GYRE_SECRET,
// GYRE_JOB_ID and GYRE_HOST_STORE override what a launcher implies. See docs/launching.md.
// Under mpirun with GYRE_TRANSPORT=mpi and no store address, the store's address (and secret)
// come over MPI at init() instead (LaunchInfo::storeOverMpi).
#include <unistd.h>

#include <charconv>
#include <optional>

#include "api/launch_env.h"
#include "common/check.h"
#include "common/config.h"
#include "common/logging.h"
#include "common/socket.h"
#include "gyre/init.h"

namespace gyre {
namespace {

using Env = std::map<std::string, std::string>;

std::optional<std::string> lookup(const Env& env, const std::string& name) {
  auto it = env.find(name);
  if (it == env.end() || it->second.empty()) return std::nullopt;
  return it->second;
}

bool has(const Env& env, const std::string& name) {
  return lookup(env, name).has_value();
}

// An integer launcher variable; throws InvalidArgument naming it.
std::optional<int> intVar(const Env& env, const std::string& name, int min) {
  auto text = lookup(env, name);
  if (!text) return std::nullopt;
  int value = 0;
  const auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), value);
  GYRE_ARG_CHECK(ec == std::errc() && end == text->data() + text->size(), name, "='", *text,
                 "' is not an integer");
  GYRE_ARG_CHECK(value >= min, name, "=", value, " must be at least ", min);
  return value;
}

int requireInt(const Env& env, const std::string& name, int min, const std::string& why) {
  auto value = intVar(env, name, min);
  GYRE_ARG_CHECK(value.has_value(), name, " is not set (", why, ")");
  return *value;
}

int portVar(const Env& env, const std::string& name) {
  auto value = intVar(env, name, 1);
  GYRE_ARG_CHECK(value.has_value(), name, " is not set");
  GYRE_ARG_CHECK(*value <= 65535, name, "=", *value, " is not a TCP port");
  return *value;
}

std::string hostPort(const std::string& host, int port) {
  return net::joinHostPort(host, static_cast<std::uint16_t>(port));
}

// The variables a launcher's place came from, for messages that name what to fix.
struct PlaceNames {
  std::string rank, size, localRank, localSize;
};

void readGyre(const Env& env, LaunchInfo& info, PlaceNames& names) {
  info.launcher = "gyre";
  names = {"GYRE_RANK", "GYRE_WORLD_SIZE", "GYRE_LOCAL_RANK", "GYRE_LOCAL_SIZE"};
  info.rank = static_cast<int>(config::getOptionalInt(env, "GYRE_RANK").value_or(-1));
  GYRE_ARG_CHECK(info.rank >= 0, "GYRE_RANK is not set (GYRE_WORLD_SIZE is)");
  auto size = config::getOptionalInt(env, "GYRE_WORLD_SIZE");
  GYRE_ARG_CHECK(size.has_value(), "GYRE_WORLD_SIZE is not set (GYRE_RANK is)");
  info.size = static_cast<int>(*size);
  info.localRank = static_cast<int>(config::getInt(env, "GYRE_LOCAL_RANK"));
  info.localSize = static_cast<int>(config::getInt(env, "GYRE_LOCAL_SIZE"));
  info.jobId = "gyre";
}

void readOpenMpi(const Env& env, LaunchInfo& info, PlaceNames& names) {
  info.launcher = "mpirun";
  names = {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
           "OMPI_COMM_WORLD_LOCAL_SIZE"};
  const std::string why = "expected under mpirun";
  info.rank = requireInt(env, "OMPI_COMM_WORLD_RANK", 0, why);
  info.size = requireInt(env, "OMPI_COMM_WORLD_SIZE", 1, why);
  info.localRank = intVar(env, "OMPI_COMM_WORLD_LOCAL_RANK", 0).value_or(0);
  info.localSize = intVar(env, "OMPI_COMM_WORLD_LOCAL_SIZE", 1).value_or(1);
  info.jobId = lookup(env, "OMPI_MCA_ess_base_jobid").value_or(lookup(env, "PMIX_NAMESPACE").value_or(""));
  if (info.size == 1 || config::isSet(env, "GYRE_STORE_ADDR")) return;
  if (has(env, "MASTER_ADDR")) {
    info.storeAddress = hostPort(*lookup(env, "MASTER_ADDR"), portVar(env, "MASTER_PORT"));
  } else if (config::getChoice(env, "GYRE_TRANSPORT") == "mpi") {
    // MPI is about to carry the data anyway: it carries the store's address first, on one host
    // or many, with no file and no port to choose.
    info.storeOverMpi = true;
  } else {
    GYRE_ARG_CHECK(info.localSize == info.size,
                   "under mpirun across several hosts gyre needs a rendezvous store: set GYRE_TRANSPORT=mpi "
                   "(rank 0 then hosts one and tells the others over MPI), or MASTER_ADDR and MASTER_PORT "
                   "(rank 0's host and a free port), or GYRE_STORE_ADDR");
    GYRE_ARG_CHECK(
        !info.jobId.empty(),
        "under mpirun, neither OMPI_MCA_ess_base_jobid nor PMIX_NAMESPACE is set; set GYRE_STORE_ADDR "
        "(e.g. file:/tmp/job.store) or MASTER_ADDR and MASTER_PORT");
    info.storeAddress = "file:/tmp/gyre-" + std::to_string(::getuid()) + "-" +
                        launch::sanitizeForFileName(info.jobId) + ".store";
  }
}

void readSlurm(const Env& env, LaunchInfo& info, PlaceNames& names) {
  info.launcher = "slurm";
  names = {"SLURM_PROCID", has(env, "SLURM_NTASKS") ? "SLURM_NTASKS" : "SLURM_NPROCS", "SLURM_LOCALID",
           "the tasks per node of SLURM_NODEID"};
  const std::string why = "expected from srun";
  info.rank = requireInt(env, "SLURM_PROCID", 0, why);
  info.size = has(env, "SLURM_NTASKS") ? requireInt(env, "SLURM_NTASKS", 1, why)
                                       : requireInt(env, "SLURM_NPROCS", 1, why);
  info.localRank = intVar(env, "SLURM_LOCALID", 0).value_or(0);
  const int node = intVar(env, "SLURM_NODEID", 0).value_or(0);
  info.localSize = 1;
  for (const char* name : {"SLURM_STEP_TASKS_PER_NODE", "SLURM_NTASKS_PER_NODE", "SLURM_TASKS_PER_NODE"}) {
    if (auto spec = lookup(env, name)) {
      names.localSize = std::string(name) + "[SLURM_NODEID]";
      const auto perNode = launch::expandTasksPerNode(*spec, name);
      info.localSize =
          perNode.size() == 1 ? perNode[0] : perNode.at(std::min<std::size_t>(node, perNode.size() - 1));
      break;
    }
  }
  const std::string job = lookup(env, "SLURM_JOB_ID").value_or(lookup(env, "SLURM_JOBID").value_or(""));
  const auto step = lookup(env, "SLURM_STEP_ID").value_or(lookup(env, "SLURM_STEPID").value_or(""));
  info.jobId = step.empty() ? job : job + "." + step;
  if (info.size == 1 || config::isSet(env, "GYRE_STORE_ADDR")) return;
  std::string host;
  if (auto addr = lookup(env, "MASTER_ADDR")) {
    host = *addr;
  } else {
    const char* listName = has(env, "SLURM_STEP_NODELIST")  ? "SLURM_STEP_NODELIST"
                           : has(env, "SLURM_JOB_NODELIST") ? "SLURM_JOB_NODELIST"
                                                            : "SLURM_NODELIST";
    auto list = lookup(env, listName);
    GYRE_ARG_CHECK(list.has_value(),
                   "under Slurm, neither SLURM_STEP_NODELIST nor SLURM_JOB_NODELIST is set; "
                   "set MASTER_ADDR or GYRE_STORE_ADDR");
    host = launch::expandNodelist(*list, listName).front();
  }
  int port = 0;
  if (has(env, "MASTER_PORT")) {
    port = portVar(env, "MASTER_PORT");
  } else {
    GYRE_ARG_CHECK(!job.empty(), "under Slurm, SLURM_JOB_ID is not set; set MASTER_PORT or GYRE_STORE_ADDR");
    port = launch::derivePort(info.jobId);
  }
  info.storeAddress = hostPort(host, port);
}

void readTorchrun(const Env& env, LaunchInfo& info, PlaceNames& names) {
  info.launcher = "torchrun";
  names = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"};
  const std::string why = "RANK and WORLD_SIZE come together";
  info.rank = requireInt(env, "RANK", 0, why);
  info.size = requireInt(env, "WORLD_SIZE", 1, why);
  info.localRank = intVar(env, "LOCAL_RANK", 0).value_or(0);
  info.localSize = intVar(env, "LOCAL_WORLD_SIZE", 1).value_or(1);
  if (info.size == 1 || config::isSet(env, "GYRE_STORE_ADDR")) return;
  auto addr = lookup(env, "MASTER_ADDR");
  GYRE_ARG_CHECK(addr.has_value(), "MASTER_ADDR is not set (RANK and WORLD_SIZE are)");
  int port = portVar(env, "MASTER_PORT");
  // torchrun's agent serves its own store on MASTER_PORT; gyre's store takes the next port.
  const auto agentStore = config::parseBool(lookup(env, "TORCHELASTIC_USE_AGENT_STORE").value_or("0"));
  if (agentStore.value_or(false)) {
    GYRE_ARG_CHECK(port < 65535, "MASTER_PORT=65535 leaves no port for gyre's store; set GYRE_STORE_ADDR");
    ++port;
  }
  info.storeAddress = hostPort(*addr, port);
  info.jobId = lookup(env, "TORCHELASTIC_RUN_ID").value_or("torchrun-" + info.storeAddress);
}

// "RANK=2 is not below WORLD_SIZE=2 (torchrun)": the variables, as docs/launching.md promises.
void checkPlace(const LaunchInfo& info, const PlaceNames& n) {
  GYRE_USAGE_CHECK(info.rank < info.size, n.rank, "=", info.rank, " is not below ", n.size, "=", info.size, " (",
                   info.launcher, ")");
  GYRE_USAGE_CHECK(info.localRank < info.localSize, n.localRank, "=", info.localRank, " is not below ",
                   n.localSize, "=", info.localSize, " (", info.launcher, ")");
  GYRE_USAGE_CHECK(info.localSize <= info.size, n.localSize, "=", info.localSize, " exceeds ", n.size, "=",
                   info.size, " (", info.launcher, ")");
}

}  // namespace

std::map<std::string, std::string> processEnvironment() {
  return config::processEnvironment();
}

LaunchInfo detectLaunch(const std::map<std::string, std::string>& env) {
  LaunchInfo info;
  PlaceNames names{"rank", "world size", "local rank", "local size"};
  if (config::isSet(env, "GYRE_RANK") || config::isSet(env, "GYRE_WORLD_SIZE")) {
    readGyre(env, info, names);
  } else if (has(env, "TORCHELASTIC_RUN_ID") && (has(env, "RANK") || has(env, "WORLD_SIZE"))) {
    readTorchrun(env, info, names);  // torchrun started inside srun or mpirun: its workers inherit theirs
  } else if (has(env, "OMPI_COMM_WORLD_RANK") || has(env, "OMPI_COMM_WORLD_SIZE")) {
    readOpenMpi(env, info, names);
  } else if (has(env, "SLURM_PROCID")) {
    readSlurm(env, info, names);
  } else if (has(env, "RANK") || has(env, "WORLD_SIZE")) {
    readTorchrun(env, info, names);
  } else {
    info.launcher = "none";
  }
  checkPlace(info, names);

  if (config::isSet(env, "GYRE_JOB_ID")) info.jobId = config::getString(env, "GYRE_JOB_ID");
  if (info.size == 1) info.storeAddress.clear();  // a world of one meets nobody, unless told to
  if (config::isSet(env, "GYRE_STORE_ADDR")) info.storeAddress = config::getString(env, "GYRE_STORE_ADDR");
  const bool tcpStore = !info.storeAddress.empty() && !info.storeAddress.starts_with("file:");
  try {
    if (tcpStore) net::splitHostPort(info.storeAddress);
    GYRE_ARG_CHECK(info.storeAddress != "file:", "empty file path");
  } catch (const InvalidArgument& e) {
    GYRE_THROW(InvalidArgument, "store address '", info.storeAddress, "' (from ",
               config::isSet(env, "GYRE_STORE_ADDR") ? "GYRE_STORE_ADDR" : info.launcher,
               ") is malformed: ", e.what());
  }
  // `gyre run` hosts the store itself; under other launchers rank 0 does.
  const std::string hostChoice = config::getChoice(env, "GYRE_HOST_STORE");
  info.hostStore = hostChoice == "auto"
                       ? tcpStore && info.rank == 0 && info.launcher != "gyre" && info.launcher != "none"
                       : hostChoice == "1";
  if (info.storeOverMpi) info.hostStore = info.rank == 0;  // on a port it picks, so nobody else can
  GYRE_ARG_CHECK(!(info.hostStore && info.storeAddress.starts_with("file:")),
                 "GYRE_HOST_STORE=1 needs a TCP store address, not ", info.storeAddress);
  GYRE_ARG_CHECK(info.size == 1 || !info.storeAddress.empty() || info.storeOverMpi, info.launcher,
                 ": a world of ", info.size,
                 " needs a rendezvous store; set GYRE_STORE_ADDR (host:port or file:PATH)");

  if (config::isSet(env, "GYRE_SECRET")) {
    info.secret = config::getString(env, "GYRE_SECRET");
  } else if (info.storeOverMpi) {
    // init() generates one on rank 0 and broadcasts it with the store's address.
  } else if (info.launcher != "none") {
    GYRE_ARG_CHECK(
        info.size == 1 || info.launcher != "gyre" || config::isSet(env, "GYRE_JOB_ID"),
        "GYRE_SECRET is not set: `gyre run` sets it; when starting ranks by hand, give every rank the "
        "same GYRE_SECRET (e.g. from `openssl rand -hex 32`)");
    // Launchers' own per-job random keys, where they have one, make the derived secret harder to guess.
    const std::string material = info.launcher + "/" + info.jobId + "/" +
                                 lookup(env, "OMPI_MCA_orte_precondition_transports").value_or("");
    info.secret = launch::deriveSecret(material);
    if (info.size > 1)
      log::warn("GYRE_SECRET is not set: store and transport connections are only authenticated against the ",
                info.launcher, " job id '", info.jobId,
                "'; set GYRE_SECRET to the same random string on every rank");
  }
  return info;
}

}  // namespace gyre
