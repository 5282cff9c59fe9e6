#include "metrics/exposition.h"

#include <fmt/format.h>

#include <cmath>

#include "common/check.h"

namespace gyre::metrics {
namespace {

bool validName(const std::string& name, bool colons) {
  if (name.empty()) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colons && c == ':');
    if (!letter && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

// Backslash and newline escaped, and the double quote too in a label value (not in HELP text).
std::string escape(const std::string& text, bool quote) {
  std::string out;
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '"' && quote) {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

Family& Family::add(double value, Labels labels) {
  samples.push_back({std::move(labels), value, ""});
  return *this;
}

Family& Family::histogram(const std::vector<double>& bounds, const std::vector<double>& counts, double sum,
                          const Labels& labels) {
  double cumulative = 0;
  for (std::size_t i = 0; i < bounds.size(); ++i) {
    cumulative += i < counts.size() ? counts[i] : 0;
    Labels l = labels;
    l.emplace_back("le", formatValue(bounds[i]));
    samples.push_back({std::move(l), cumulative, "_bucket"});
  }
  for (std::size_t i = bounds.size(); i < counts.size(); ++i) cumulative += counts[i];
  Labels inf = labels;
  inf.emplace_back("le", "+Inf");
  samples.push_back({std::move(inf), cumulative, "_bucket"});
  samples.push_back({labels, sum, "_sum"});
  samples.push_back({labels, cumulative, "_count"});
  return *this;
}

Family& Family::integerHistogram(const std::vector<double>& counts, const Labels& labels) {
  std::vector<double> bounds;
  double sum = 0;
  for (std::size_t k = 0; k < counts.size(); ++k) {
    sum += counts[k] * static_cast<double>(k);
    if (k + 1 < counts.size()) bounds.push_back(static_cast<double>(k));
  }
  return histogram(bounds, counts, sum, labels);
}

std::string formatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", v);
}

std::string escapeLabelValue(const std::string& value) {
  return escape(value, true);
}

std::string render(const std::vector<Family>& families) {
  std::string out;
  for (const Family& f : families) {
    GYRE_ARG_CHECK(validName(f.name, true), "metric name '", f.name, "' is not [a-zA-Z_:][a-zA-Z0-9_:]*");
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", f.name, escape(f.help, false), f.name,
                       f.type.empty() ? "untyped" : f.type);
    for (const Sample& s : f.samples) {
      out += f.name + s.suffix;
      if (!s.labels.empty()) {
        out += '{';
        for (std::size_t i = 0; i < s.labels.size(); ++i) {
          GYRE_ARG_CHECK(validName(s.labels[i].first, false) && !s.labels[i].first.starts_with("__"),
                         "label name '", s.labels[i].first, "' of ", f.name,
                         " is not [a-zA-Z_][a-zA-Z0-9_]*");
          out += fmt::format("{}{}=\"{}\"", i ? "," : "", s.labels[i].first,
                             escapeLabelValue(s.labels[i].second));
        }
        out += '}';
      }
      out += fmt::format(" {}\n", formatValue(s.value));
    }
  }
  return out;
}

}  // namespace gyre::metrics
