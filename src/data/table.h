// Tables of numeric features and a label: CSV and JSON-lines files read into rows of floats,
// libtorch-free (gyre::data::loadTable makes tensors of them; gyre data pack writes them as
// records). Internal to gyre::data.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gyre::data::detail {

enum class TableFormat : std::uint8_t { kCsv, kJsonLines };

// By the name: .csv, or .jsonl / .ndjson (any case); nullopt-like false for anything else.
bool isTableName(const std::string& path);
// Throws gyre::Error naming the file when it is neither.
TableFormat tableFormatOf(const std::string& path);

struct TableRows {
  std::vector<std::string> columns;  // the features' names, in file order
  std::vector<float> values;         // rows x columns, row by row
  std::vector<std::string> labels;   // each row's label as written (integers as "3")
  std::vector<std::int64_t> lines;   // each row's line in the file, from 1
  std::vector<std::string> skipped;  // "FILE:LINE: why", for each row left out
  std::int64_t rows() const { return static_cast<std::int64_t>(labels.size()); }
};

// Every row of `path`.
//   CSV: a header line naming the columns, then one row per line; fields separated by commas,
//        optionally in double quotes ("" for a quote inside); blank lines ignored.
//   JSON lines: one object per line, {"label": 3, "x1": 0.5, "pixels": [0, 1, ...]}: every key
//        but the label a number or an array of numbers (column NAME[i]); the first row's keys
//        are the columns, in its order, and every row has the same keys (in any order).
// The label column (`labelColumn`) holds integers or names; every other column a finite number.
// A row with another number of fields, a field that is not a finite number, an empty label, or
// a line that is not a JSON object is bad: up to `skipBadRecords` of them are left out and
// listed; one more is an error. Throws gyre::Error naming the file and line, or the file when it
// cannot be read, is empty or has no column `labelColumn`.
TableRows readTable(const std::string& path, const std::string& labelColumn, std::int64_t skipBadRecords);

// The classes of a set of labels, in label order: "0" .. "MAX" when every label is a whole number
// >= 0 (so label k is class k), the distinct names in sorted order otherwise.
std::vector<std::string> classesOf(const std::vector<std::string>& labels);

// Each row's class index in `classes`. Throws gyre::Error naming `path` and the row's line for a
// label that is not one of them.
std::vector<std::int64_t> labelIndices(const TableRows& table, const std::vector<std::string>& classes,
                                       const std::string& path);

}  // namespace gyre::data::detail
