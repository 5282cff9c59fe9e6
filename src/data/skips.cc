#include "data/skips.h"

#include "gyre/errors.h"

namespace gyre::data::detail {

void SkipBudget::skip(const std::string& where) {
  if (left() <= 0)
    throw Error(where + (limit_ > 0 ? " (and " + std::to_string(skipped_.size()) + " bad " + noun_ +
                                          " before it, more than the " + std::to_string(limit_) + " to skip)"
                                    : ""));
  skipped_.push_back(where);
}

}  // namespace gyre::data::detail
