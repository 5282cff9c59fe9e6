// The forms a gradient compression is named by: none, fp16 (half, float16), bf16 (bfloat16),
// topk[:RATIO] and powersgd[:RANK]. Libtorch-free: `gyre train`'s flag check (train/options.cc)
// and gyre::torch::setCompression read it with the same rules and messages.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace gyre {

struct CompressionSpec {
  std::string kind;             // none, fp16, bf16, topk or powersgd (aliases folded)
  std::optional<double> ratio;  // topk:RATIO, in (0, 1]
  std::optional<int> rank;      // powersgd:RANK, at least 1
};

// Throws InvalidArgument "<what> '<spec>': ..." (no file and line: it is what a user typed),
// naming what is wrong.
CompressionSpec parseCompressionSpec(std::string_view spec, std::string_view what = "compression");

}  // namespace gyre
