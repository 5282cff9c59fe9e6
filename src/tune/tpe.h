// The Tree-structured Parzen Estimator searcher (searcher.h), univariate as HyperOpt's default.
#pragma once

#include <memory>

#include "tune/searcher.h"

namespace gyre::tune {

std::unique_ptr<Searcher> makeTpe(const SearcherOptions& o, const Space& space);

}  // namespace gyre::tune
