// Prometheus's text exposition format (version 0.0.4), written by hand since Debian 12 packages no
// Prometheus client library: families with # HELP and # TYPE lines, samples with labels, label
// values escaped (\\, \", \n), HELP text escaped (\\, \n), numbers as Go's ParseFloat reads them
// (NaN, +Inf, -Inf). Pure; a Family is filled by whoever owns the figures, then rendered.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace gyre::metrics {

using Labels = std::vector<std::pair<std::string, std::string>>;

struct Sample {
  Labels labels;
  double value = 0;
  std::string suffix;  // "_bucket", "_sum", "_count" in a histogram; empty otherwise
};

struct Family {
  std::string name;  // [a-zA-Z_:][a-zA-Z0-9_:]*
  std::string help;
  std::string type;  // counter, gauge, histogram, untyped
  std::vector<Sample> samples;

  Family& add(double value, Labels labels = {});
  // A histogram from counts per bucket: counts[i] observations of value `bounds[i]` or less (and
  // above bounds[i - 1]); the last count may be for values above every bound (+Inf). `sum` is the
  // observations' sum. Writes the cumulative _bucket samples, _sum and _count.
  Family& histogram(const std::vector<double>& bounds, const std::vector<double>& counts, double sum,
                    const Labels& labels = {});
  // A histogram of small whole numbers: counts[k] observations of k, the last entry also counting
  // every larger value (a staleness histogram). Buckets le="0", "1", ... up to the one before last.
  Family& integerHistogram(const std::vector<double>& counts, const Labels& labels = {});
};

// The families as the exposition text. Throws InvalidArgument for a malformed metric or label name
// (a bug of the caller's, caught by the tests).
std::string render(const std::vector<Family>& families);

// A number as the format writes it: shortest round-trip, NaN, +Inf, -Inf.
std::string formatValue(double value);
std::string escapeLabelValue(const std::string& value);

}  // namespace gyre::metrics
