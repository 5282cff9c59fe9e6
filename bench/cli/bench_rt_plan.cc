#include "bench_rt_plan.h"

#include "gyre/errors.h"

namespace gyre::app {

std::string rolloutRowName(int actors) {
  return "cartpole env steps, " + std::to_string(actors) + " actor" + (actors > 1 ? "s" : "");
}

std::string readerWhere(int rank, bool rankZerosHost, bool hostSeen) {
  return "rank " + std::to_string(rank) + ", " +
         (rankZerosHost ? "this host"
          : hostSeen    ? "another host, its copy"
                        : "another host, fetched");
}

void checkAcrossHostsJob(int size) {
  if (size < 2)
    throw InvalidArgument(
        "--across-hosts runs as the ranks of a job of 2 or more (gyre run -H a:1,b:2 -- gyre bench rt "
        "--across-hosts)");
}

}  // namespace gyre::app
