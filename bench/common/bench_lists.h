// The lists a bench takes on its command line ("--np 1,2,4", "--model mlp,cnn"): split in one
// place, and counts read and refused with the same words by every bench.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace gyre::app {

// Workers, threads or servers a bench may ask for: a guard against typos, not a limit of gyre.
inline constexpr int kMaxBenchCount = 64;

// "a,b,c" -> {"a", "b", "c"} (empty parts kept).
std::vector<std::string> splitCommas(const std::string& text);

// A whole decimal integer in [1, max], or nullopt.
std::optional<int> parseCount(const std::string& text, int max);

// "1,2,4" -> {1, 2, 4}. Throws InvalidArgument unless every entry is an integer in [1, max] and
// none repeats: "FLAG 'TEXT': expected WHAT between 1 and MAX separated by commas, like EXAMPLE",
// or "FLAG 'TEXT': N is given twice".
std::vector<int> parseCountList(const std::string& text, const std::string& flag,
                                const std::string& what = "counts", int max = kMaxBenchCount,
                                const std::string& example = "1,2,4");

}  // namespace gyre::app
