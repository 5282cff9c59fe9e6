// CSV and JSON-lines tables: one pass over the file's lines, each row parsed on its own so a bad
// one is named by its line and, within the skip budget, left out.
#include "data/table.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "data/skips.h"
#include "gyre/errors.h"

namespace gyre::data::detail {
namespace {

using OrderedJson = nlohmann::ordered_json;

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

std::string trimmed(const std::string& text) {
  std::size_t begin = 0;
  std::size_t end = text.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(text[begin]))) ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(text[end - 1]))) --end;
  return text.substr(begin, end - begin);
}

bool blank(const std::string& line) { return trimmed(line).empty(); }

// A CSV line's fields, or nullopt with `why` set (an unterminated quote).
std::optional<std::vector<std::string>> splitCsv(const std::string& line, std::string& why) {
  std::vector<std::string> fields;
  std::string field;
  bool quoted = false;
  bool wasQuoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field += c;
      }
    } else if (c == '"' && trimmed(field).empty()) {
      quoted = wasQuoted = true;
      field.clear();
    } else if (c == ',') {
      fields.push_back(wasQuoted ? field : trimmed(field));
      field.clear();
      wasQuoted = false;
    } else {
      field += c;
    }
  }
  if (quoted) {
    why = "has a quote that is not closed";
    return std::nullopt;
  }
  fields.push_back(wasQuoted ? field : trimmed(field));
  return fields;
}

// A finite float, or why not.
std::string parseNumber(const std::string& text, float& value) {
  if (text.empty()) return "is empty";
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size()) return "is '" + text + "', not a number";
  if (!std::isfinite(v) || errno == ERANGE || std::fabs(v) > 3.4e38)
    return "is '" + text + "', not a finite number a float holds";
  value = static_cast<float>(v);
  return "";
}

// The label as text: an integer as "3", a name as itself.
std::string labelText(const OrderedJson& value, std::string& why) {
  if (value.is_number_integer()) return std::to_string(value.get<std::int64_t>());
  if (value.is_number_float()) {
    const double v = value.get<double>();
    if (std::floor(v) == v && std::fabs(v) < 1e15) return std::to_string(static_cast<std::int64_t>(v));
    return value.dump();
  }
  if (value.is_string()) return value.get<std::string>();
  why = "has a label that is neither a number nor a string";
  return "";
}

class Reader {
 public:
  Reader(std::string path, std::string labelColumn, std::int64_t skipBadRecords)
      : path_(std::move(path)), labelColumn_(std::move(labelColumn)), budget_(skipBadRecords, "rows") {}

  TableRows read() {
    const TableFormat format = tableFormatOf(path_);
    std::ifstream in(path_, std::ios::binary);
    if (!in) throw Error(path_ + " cannot be opened (" + std::strerror(errno) + ")");
    std::string line;
    std::int64_t number = 0;
    bool header = false;
    while (std::getline(in, line)) {
      ++number;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (blank(line)) continue;
      if (format == TableFormat::kCsv && !header) {
        readCsvHeader(line, number);
        header = true;
        continue;
      }
      std::string why = format == TableFormat::kCsv ? csvRow(line) : jsonRow(line);
      if (why.empty()) {
        rows_.lines.push_back(number);
        continue;
      }
      bad(number, why);
    }
    if (in.bad()) throw Error(path_ + " cannot be read (" + std::strerror(errno) + ")");
    if (format == TableFormat::kCsv && !header) throw Error(path_ + " is empty: a CSV table needs a header line");
    rows_.skipped = std::move(budget_.skipped());
    if (rows_.labels.empty())
      throw Error(path_ + " has no rows" + (rows_.skipped.empty() ? "" : " that could be read"));
    return std::move(rows_);
  }

 private:
  void bad(std::int64_t line, const std::string& why) {
    budget_.skip(path_ + ":" + std::to_string(line) + ": " + why);
  }

  void readCsvHeader(const std::string& line, std::int64_t number) {
    std::string why;
    const std::optional<std::vector<std::string>> names = splitCsv(line, why);
    if (!names) throw Error(path_ + ":" + std::to_string(number) + ": the header " + why);
    std::set<std::string> seen;
    for (std::size_t i = 0; i < names->size(); ++i) {
      const std::string& name = (*names)[i];
      if (!seen.insert(name).second)
        throw Error(path_ + ":" + std::to_string(number) + ": the header names column '" + name + "' twice");
      if (name == labelColumn_) {
        labelAt_ = i;
      } else {
        rows_.columns.push_back(name);
      }
    }
    width_ = names->size();
    if (labelAt_ == std::string::npos) throw Error(noLabelColumn(*names));
    if (rows_.columns.empty())
      throw Error(path_ + " has no feature columns: only the label column '" + labelColumn_ + "'");
  }

  std::string noLabelColumn(const std::vector<std::string>& names) const {
    std::string list;
    for (const std::string& n : names) list += (list.empty() ? "'" : ", '") + n + "'";
    return path_ + " has no label column '" + labelColumn_ + "' (its columns: " + list +
           "); name the label column with --label-column";
  }

  std::string csvRow(const std::string& line) {
    std::string why;
    const std::optional<std::vector<std::string>> fields = splitCsv(line, why);
    if (!fields) return why;
    if (fields->size() != width_)
      return "has " + std::to_string(fields->size()) + " fields where the header has " + std::to_string(width_) +
             " columns";
    std::vector<float> row;
    row.reserve(width_ - 1);
    for (std::size_t i = 0; i < width_; ++i) {
      if (i == labelAt_) continue;
      float v = 0;
      if (std::string w = parseNumber((*fields)[i], v); !w.empty())
        return "column '" + rows_.columns[row.size()] + "' " + w;
      row.push_back(v);
    }
    const std::string& label = (*fields)[labelAt_];
    if (label.empty()) return "has an empty label";
    rows_.values.insert(rows_.values.end(), row.begin(), row.end());
    rows_.labels.push_back(label);
    return "";
  }

  std::string jsonRow(const std::string& line) {
    OrderedJson object;
    try {
      object = OrderedJson::parse(line);
    } catch (const OrderedJson::exception& e) {
      return std::string("is not valid JSON (") + e.what() + ")";
    }
    if (!object.is_object()) return "is not a JSON object";
    if (!object.contains(labelColumn_)) return "has no label '" + labelColumn_ + "'";
    if (keys_.empty()) {  // the first good row names the columns
      for (const auto& [key, value] : object.items()) {
        if (key == labelColumn_) continue;
        const std::size_t n = value.is_array() ? value.size() : 1;
        if (value.is_array() && n == 0) return "has an empty array '" + key + "'";
        keys_.emplace_back(key, value.is_array() ? n : 0);
      }
      if (keys_.empty()) return "has no feature besides the label '" + labelColumn_ + "'";
    }
    std::vector<float> row;
    for (const auto& [key, length] : keys_) {
      if (!object.contains(key)) return "has no '" + key + "', which the first row has";
      const OrderedJson& value = object[key];
      const auto number = [&](const OrderedJson& v, const std::string& name) -> std::string {
        if (!v.is_number()) return "'" + name + "' is " + v.dump() + ", not a number";
        const double d = v.get<double>();
        if (!std::isfinite(d) || std::fabs(d) > 3.4e38) return "'" + name + "' is not a finite number a float holds";
        row.push_back(static_cast<float>(d));
        return "";
      };
      if (length == 0) {
        if (std::string w = number(value, key); !w.empty()) return w;
        continue;
      }
      if (!value.is_array() || value.size() != length)
        return "'" + key + "' is not an array of " + std::to_string(length) + " numbers as in the first row";
      for (std::size_t i = 0; i < length; ++i)
        if (std::string w = number(value[i], key + "[" + std::to_string(i) + "]"); !w.empty()) return w;
    }
    if (object.size() != keys_.size() + 1) {
      for (const auto& item : object.items()) {
        const std::string& key = item.key();
        if (key != labelColumn_ &&
            std::none_of(keys_.begin(), keys_.end(), [&](const auto& k) { return k.first == key; }))
          return "has '" + key + "', which the first row has not";
      }
    }
    std::string why;
    std::string label = labelText(object[labelColumn_], why);
    if (!why.empty()) return why;
    if (label.empty()) return "has an empty label";
    if (rows_.columns.empty())
      for (const auto& [key, length] : keys_) {
        if (length == 0) rows_.columns.push_back(key);
        for (std::size_t i = 0; i < length; ++i) rows_.columns.push_back(key + "[" + std::to_string(i) + "]");
      }
    rows_.values.insert(rows_.values.end(), row.begin(), row.end());
    rows_.labels.push_back(std::move(label));
    return "";
  }

  const std::string path_;
  const std::string labelColumn_;
  SkipBudget budget_;
  TableRows rows_;
  // CSV: the header's width and where the label is.
  std::size_t width_ = 0;
  std::size_t labelAt_ = std::string::npos;
  // JSON lines: the first row's keys, each with its array length (0: a number).
  std::vector<std::pair<std::string, std::size_t>> keys_;
};

bool wholeNumber(const std::string& text, std::int64_t& value) {
  if (text.empty() || text.size() > 15 || !std::all_of(text.begin(), text.end(), [](unsigned char c) {
        return std::isdigit(c);
      }))
    return false;
  value = std::stoll(text);
  return true;
}

}  // namespace

bool isTableName(const std::string& path) {
  const std::string name = lower(path);
  for (const char* ext : {".csv", ".jsonl", ".ndjson"}) {
    const std::size_t n = std::strlen(ext);
    if (name.size() > n && name.compare(name.size() - n, n, ext) == 0) return true;
  }
  return false;
}

TableFormat tableFormatOf(const std::string& path) {
  if (!isTableName(path))
    throw Error(path + " is not a table gyre reads: CSV files end in .csv, JSON lines in .jsonl or .ndjson");
  const std::string name = lower(path);
  return name.size() > 4 && name.compare(name.size() - 4, 4, ".csv") == 0 ? TableFormat::kCsv
                                                                        : TableFormat::kJsonLines;
}

TableRows readTable(const std::string& path, const std::string& labelColumn, std::int64_t skipBadRecords) {
  if (labelColumn.empty()) throw InvalidArgument("readTable: the label column needs a name");
  if (skipBadRecords < 0) throw InvalidArgument("readTable: skipBadRecords must not be negative");
  return Reader(path, labelColumn, skipBadRecords).read();
}

std::vector<std::string> classesOf(const std::vector<std::string>& labels) {
  std::int64_t most = -1;
  bool numbers = true;
  std::set<std::string> names;
  for (const std::string& label : labels) {
    std::int64_t v = 0;
    if (numbers && wholeNumber(label, v)) {
      most = std::max(most, v);
    } else {
      numbers = false;
    }
    names.insert(label);
  }
  if (!numbers) return {names.begin(), names.end()};
  std::vector<std::string> classes;
  for (std::int64_t k = 0; k <= most; ++k) classes.push_back(std::to_string(k));
  return classes;
}

std::vector<std::int64_t> labelIndices(const TableRows& table, const std::vector<std::string>& classes,
                                       const std::string& path) {
  std::map<std::string, std::int64_t> index;
  for (std::size_t k = 0; k < classes.size(); ++k) index.emplace(classes[k], static_cast<std::int64_t>(k));
  std::vector<std::int64_t> out;
  out.reserve(table.labels.size());
  for (std::size_t r = 0; r < table.labels.size(); ++r) {
    std::string label = table.labels[r];
    // "007" and "7" are one class when the classes are numbers.
    std::int64_t v = 0;
    if (wholeNumber(label, v)) label = std::to_string(v);
    const auto it = index.find(label);
    if (it == index.end())
      throw Error(path + ":" + std::to_string(table.lines[r]) + ": label '" + table.labels[r] + "' is not one of the " +
                  std::to_string(classes.size()) + " classes of the training split");
    out.push_back(it->second);
  }
  return out;
}

}  // namespace gyre::data::detail
