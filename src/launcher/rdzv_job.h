// `gyre run --rdzv etcd://host:port[,host:port...]/JOB --elastic`: an elastic job whose state
// lives in an etcd cluster, so it survives the loss of any one host, the one that started it
// included (docs/elastic.md, "Rendezvous in etcd").
//
// Every host runs its own `gyre run --rdzv` with the same address: a launcher (a "node") that
// registers its slots under a lease of its own and starts the workers assigned to it on this
// host. One node at a time leads, holding the leader key under its lease: it runs the elastic
// policy (elastic_policy.h) over the live nodes as its hosts, assigns workers to nodes, and
// publishes the memberships that the workers meet in (the same keys as elastic/membership.h). A
// node that dies takes its workers with it (their agents stop them when its pipes close) and its
// lease expires: the leader counts its workers as lost, and when it was the leader, another node
// takes the key, reads the job back from etcd and goes on leading it.
//
// Keys, under the address's path (JOB/), besides the workers' elastic/ keys:
//   launch/secret, launch/job-id  the job's secret and id, written once by the first node
//   launch/leader                 the leading node (under its lease)
//   launch/nodes/<node>           a live node's slots (under its lease); <node> is host:pid
//   launch/start/<id>             the node worker <id> was assigned to
//   launch/alive/<id>             the node running worker <id> (under that node's lease)
//   launch/exit/<id>              how worker <id> ended: "<ok> <code> <by-signal> <what>"
//   launch/stop/<id>              the leader asks worker <id>'s node to stop it
//   launch/policy                 the leader's counts, for the next leader (ElasticCounters)
//   launch/end                    "<exit code> <why>": the job is over; every node exits with it
// The leader deletes every key of the job once the other nodes have gone, so the path can name a
// new job. etcd is not authenticated by gyre: the secret is readable by whoever reaches etcd.
#pragma once

#include "launcher/job.h"

namespace gyre::launcher {

// Runs this host's part of the job; returns gyre run's exit code: the job's outcome as its
// leader reported it (0 when it finished), 130/143 for an interrupt of this node, 1 when this
// node lost its lease or cannot reach etcd.
int runRdzvJob(const RunOptions& options);

}  // namespace gyre::launcher
