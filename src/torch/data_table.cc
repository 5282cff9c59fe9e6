// gyre::data::loadTable: a CSV or JSON-lines table (data/table.h) as tensors.
#include "common/check.h"
#include "data/table.h"
#include "gyre/errors.h"
#include "gyre/torch/data_files.h"

namespace gyre::data {

Table loadTable(const std::string& path, const TableOptions& options) {
  GYRE_USAGE_CHECK(options.skipBadRecords >= 0, "loadTable: skipBadRecords must not be negative, not ",
                   options.skipBadRecords);
  detail::TableRows rows = detail::readTable(path, options.labelColumn, options.skipBadRecords);
  Table table;
  table.classes = options.classes.empty() ? detail::classesOf(rows.labels) : options.classes;
  const std::vector<std::int64_t> labels = detail::labelIndices(rows, table.classes, path);
  const auto n = rows.rows();
  const auto f = static_cast<std::int64_t>(rows.columns.size());
  ::torch::Tensor features = ::torch::from_blob(rows.values.data(), {n, f}, ::torch::kFloat32).clone();
  if (options.standardize) {
    table.mean = options.mean;
    table.std = options.std;
    if (table.mean.empty()) {
      const ::torch::Tensor m = features.to(::torch::kFloat64).mean(0);
      for (std::int64_t c = 0; c < f; ++c) table.mean.push_back(m[c].item<double>());
    }
    if (table.std.empty()) {
      const ::torch::Tensor s = features.to(::torch::kFloat64).std(0, false);
      for (std::int64_t c = 0; c < f; ++c) table.std.push_back(s[c].item<double>() > 0 ? s[c].item<double>() : 1.0);
    }
    GYRE_USAGE_CHECK(static_cast<std::int64_t>(table.mean.size()) == f && static_cast<std::int64_t>(table.std.size()) == f,
                     "loadTable: ", table.mean.size(), " means and ", table.std.size(), " standard deviations for ",
                     f, " feature(s) of ", path);
    const ::torch::Tensor mean = ::torch::tensor(table.mean, ::torch::kFloat64).to(::torch::kFloat32);
    const ::torch::Tensor sd = ::torch::tensor(table.std, ::torch::kFloat64).to(::torch::kFloat32);
    GYRE_USAGE_CHECK((sd > 0).all().item<bool>(), "loadTable: a standard deviation of 0 for ", path);
    features.sub_(mean).div_(sd);
  }
  table.data.images = features;
  table.data.labels = ::torch::tensor(labels, ::torch::kInt64);
  table.columns = std::move(rows.columns);
  table.skipped = std::move(rows.skipped);
  return table;
}

}  // namespace gyre::data
