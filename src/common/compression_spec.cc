#include "common/compression_spec.h"

#include <cmath>
#include <cstdlib>

#include "common/check.h"

namespace gyre {

CompressionSpec parseCompressionSpec(std::string_view spec, std::string_view what) {
  const std::size_t colon = spec.find(':');
  const std::string_view name = spec.substr(0, colon);
  const bool valued = colon != std::string_view::npos;
  const std::string value = valued ? std::string(spec.substr(colon + 1)) : "";
  CompressionSpec out;
  if (name == "none") out.kind = "none";
  if (name == "fp16" || name == "half" || name == "float16") out.kind = "fp16";
  if (name == "bf16" || name == "bfloat16") out.kind = "bf16";
  if (name == "topk" || name == "powersgd") out.kind = std::string(name);
  GYRE_USAGE_CHECK(!out.kind.empty() && (!valued || out.kind == "topk" || out.kind == "powersgd"), what, " '",
                   spec, "': expected none, fp16, half, bf16, topk:RATIO or powersgd:RANK");
  if (!valued) return out;
  char* end = nullptr;
  if (out.kind == "topk") {
    const double ratio = std::strtod(value.c_str(), &end);
    GYRE_USAGE_CHECK(!value.empty() && *end == '\0' && std::isfinite(ratio) && ratio > 0 && ratio <= 1, what,
                     " '", spec, "': the top-k ratio must be a number in (0, 1]");
    out.ratio = ratio;
  } else {
    const long rank = std::strtol(value.c_str(), &end, 10);
    GYRE_USAGE_CHECK(!value.empty() && *end == '\0' && rank >= 1 && rank <= 1 << 20, what, " '", spec,
                     "': the PowerSGD rank must be an integer of at least 1");
    out.rank = static_cast<int>(rank);
  }
  return out;
}

}  // namespace gyre
