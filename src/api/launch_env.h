// Helpers for reading launchers' environments (detectLaunch): Slurm's compressed host and task
// lists, and the fallbacks used when a launcher does not provide a secret or a store port.
// Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gyre::launch {

// Expands a Slurm host list: "node[01-04,07],gpu5" -> node01 node02 node03 node04 node07 gpu5.
// Zero padding follows the range's first bound; several bracket groups in one name expand to
// their product ("r[1-2]n[1-2]"). Throws InvalidArgument naming `variable` when the list is
// malformed or expands to more than maxHosts names.
std::vector<std::string> expandNodelist(std::string_view list, std::string_view variable,
                                        std::size_t maxHosts = 1 << 16);

// Expands a Slurm tasks-per-node list: "2(x3),1" -> 2 2 2 1; "4" -> 4. Throws InvalidArgument
// naming `variable`.
std::vector<int> expandTasksPerNode(std::string_view spec, std::string_view variable,
                                    std::size_t maxNodes = 1 << 16);

// A secret derived from what every rank of a job can see (launcher, job id, launcher keys): it
// only keeps out clients that do not know the job id. Hex-encoded HMAC-SHA256.
std::string deriveSecret(std::string_view material);

// A store port derived from a job id, in [10000, 32000) (below Linux's ephemeral range), so
// every rank of one job picks the same one without talking.
std::uint16_t derivePort(std::string_view jobId);

// Keeps [A-Za-z0-9._-] and replaces anything else with '_', for file names.
std::string sanitizeForFileName(std::string_view text);

}  // namespace gyre::launch
