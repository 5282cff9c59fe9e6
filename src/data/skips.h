// --skip-bad-records, once for every reader of samples (image folders, tables, record shards, the
// packer): up to `limit` bad samples are listed as "WHERE: why"; one more is an error naming it
// and how many came before. Internal to gyre::data.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gyre::data::detail {

class SkipBudget {
 public:
  // `noun`: what the samples are in the error ("rows", "images", "records", "samples").
  SkipBudget(std::int64_t limit, std::string noun) : limit_(limit), noun_(std::move(noun)) {}

  // Lists `where` as skipped, or throws gyre::Error "WHERE (and N bad rows before it, more than
  // the M to skip)" (just "WHERE" with a limit of 0) once the limit is spent.
  void skip(const std::string& where);

  std::int64_t left() const { return limit_ - static_cast<std::int64_t>(skipped_.size()); }
  std::vector<std::string>& skipped() { return skipped_; }
  const std::vector<std::string>& skipped() const { return skipped_; }

 private:
  std::int64_t limit_;
  std::string noun_;
  std::vector<std::string> skipped_;
};

}  // namespace gyre::data::detail
