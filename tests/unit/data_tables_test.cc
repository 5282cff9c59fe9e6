// CSV and JSON-lines tables (src/data/table.h): values, columns and labels in file order, quoted
// fields, classes from whole numbers or names, and every bad row named by its file and line (or,
// within --skip-bad-records, left out and listed).
#include "data/table.h"

#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "gyre/errors.h"
#include "support/ranks.h"

namespace gyre::data::detail {
namespace {

class TableTest : public ::testing::Test {
 protected:
  std::string write(const std::string& name, const std::string& text) const {
    const std::string path = dir_.path() + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
  static std::string errorOf(const std::function<void()>& f) {
    try {
      f();
    } catch (const Error& e) {
      return e.what();
    }
    return "(no error)";
  }
  test::TempDir dir_;
};

TEST_F(TableTest, CsvRowsInFileOrderWithTheLabelAnywhere) {
  const std::string path = write("t.csv", "a,label,\"b, quoted\"\r\n1.5,cat,2\n\n -3 ,dog,\"4e2\"\n");
  const TableRows t = readTable(path, "label", 0);
  EXPECT_EQ(t.columns, (std::vector<std::string>{"a", "b, quoted"}));
  EXPECT_EQ(t.values, (std::vector<float>{1.5F, 2.0F, -3.0F, 400.0F}));
  EXPECT_EQ(t.labels, (std::vector<std::string>{"cat", "dog"}));
  EXPECT_EQ(t.lines, (std::vector<std::int64_t>{2, 4}));  // the blank line 3 is no row
  EXPECT_TRUE(t.skipped.empty());
}

TEST_F(TableTest, JsonLinesWithNumbersAndArrays) {
  const std::string path = write("t.jsonl",
                                 "{\"x\": [1, 2], \"y\": 0.5, \"label\": 2}\n"
                                 "{\"label\": 0, \"y\": -1, \"x\": [3, 4]}\n");
  const TableRows t = readTable(path, "label", 0);
  EXPECT_EQ(t.columns, (std::vector<std::string>{"x[0]", "x[1]", "y"}));
  EXPECT_EQ(t.values, (std::vector<float>{1, 2, 0.5F, 3, 4, -1}));  // the first row's key order
  EXPECT_EQ(t.labels, (std::vector<std::string>{"2", "0"}));
}

TEST_F(TableTest, ClassesFromWholeNumbersOrNames) {
  EXPECT_EQ(classesOf({"2", "0", "2"}), (std::vector<std::string>{"0", "1", "2"}));
  EXPECT_EQ(classesOf({"dog", "cat", "dog"}), (std::vector<std::string>{"cat", "dog"}));
  EXPECT_EQ(classesOf({"1", "x"}), (std::vector<std::string>{"1", "x"}));
  TableRows t;
  t.labels = {"dog", "cat", "bird"};
  t.lines = {2, 3, 7};
  EXPECT_EQ(labelIndices(t, {"cat", "dog", "bird"}, "f.csv"), (std::vector<std::int64_t>{1, 0, 2}));
  EXPECT_EQ(errorOf([&] { labelIndices(t, {"cat", "dog"}, "f.csv"); }),
            "f.csv:7: label 'bird' is not one of the 2 classes of the training split");
  t.labels = {"007"};
  t.lines = {2};
  EXPECT_EQ(labelIndices(t, classesOf({"9"}), "f.csv"), (std::vector<std::int64_t>{7}));
}

TEST_F(TableTest, BadRowsAreNamedByFileAndLine) {
  const auto error = [&](const std::string& text, const std::string& name = "t.csv") {
    const std::string path = write(name, text);
    return errorOf([&] { readTable(path, "label", 0); });
  };
  const std::string csv = dir_.path() + "/t.csv";
  EXPECT_EQ(error("a,b,label\n1,2,0\n1,0\n"), csv + ":3: has 2 fields where the header has 3 columns");
  EXPECT_EQ(error("a,b,label\n1,x2,0\n"), csv + ":2: column 'b' is 'x2', not a number");
  EXPECT_EQ(error("a,b,label\n1,,0\n"), csv + ":2: column 'b' is empty");
  EXPECT_EQ(error("a,b,label\n1,nan,0\n"), csv + ":2: column 'b' is 'nan', not a finite number a float holds");
  EXPECT_EQ(error("a,b,label\n1,2,\n"), csv + ":2: has an empty label");
  EXPECT_EQ(error("a,b,label\n1,\"2,0\n"), csv + ":2: has a quote that is not closed");
  EXPECT_EQ(error("a,b\n1,2\n"),
            csv + " has no label column 'label' (its columns: 'a', 'b'); name the label column with --label-column");
  EXPECT_EQ(error("a,a,label\n"), csv + ":1: the header names column 'a' twice");
  EXPECT_EQ(error(""), csv + " is empty: a CSV table needs a header line");
  EXPECT_EQ(error("a,label\n"), csv + " has no rows");
  const std::string jsonl = dir_.path() + "/t.jsonl";
  EXPECT_EQ(error("{\"a\": 1, \"label\": 0}\n[1, 2]\n", "t.jsonl"), jsonl + ":2: is not a JSON object");
  EXPECT_EQ(error("{\"a\": 1, \"label\": 0}\n{\"a\": \"x\", \"label\": 0}\n", "t.jsonl"),
            jsonl + ":2: 'a' is \"x\", not a number");
  EXPECT_EQ(error("{\"a\": 1, \"label\": 0}\n{\"label\": 0}\n", "t.jsonl"),
            jsonl + ":2: has no 'a', which the first row has");
  EXPECT_EQ(error("{\"a\": 1, \"label\": 0}\n{\"a\": 1, \"b\": 2, \"label\": 0}\n", "t.jsonl"),
            jsonl + ":2: has 'b', which the first row has not");
  EXPECT_EQ(error("{\"a\": [1, 2], \"label\": 0}\n{\"a\": [1], \"label\": 0}\n", "t.jsonl"),
            jsonl + ":2: 'a' is not an array of 2 numbers as in the first row");
  EXPECT_NE(error("{\"a\": 1, \"label\": 0}\n{\"a\": 1,\n", "t.jsonl").find(jsonl + ":2: is not valid JSON"),
            std::string::npos);
  EXPECT_EQ(errorOf([&] { readTable(write("t.txt", "a,label\n1,0\n"), "label", 0); }),
            dir_.path() + "/t.txt is not a table gyre reads: CSV files end in .csv, JSON lines in .jsonl or .ndjson");
  EXPECT_EQ(errorOf([&] { readTable(dir_.path() + "/missing.csv", "label", 0); }),
            dir_.path() + "/missing.csv cannot be opened (No such file or directory)");
}

TEST_F(TableTest, BadRowsWithinTheBudgetAreLeftOutAndListed) {
  const std::string path = write("t.csv", "a,label\n1,0\nx,1\n2,1\n3\n4,0\n");
  const TableRows t = readTable(path, "label", 2);
  EXPECT_EQ(t.values, (std::vector<float>{1, 2, 4}));
  EXPECT_EQ(t.lines, (std::vector<std::int64_t>{2, 4, 6}));
  EXPECT_EQ(t.skipped, (std::vector<std::string>{path + ":3: column 'a' is 'x', not a number",
                                                 path + ":5: has 1 fields where the header has 2 columns"}));
  EXPECT_EQ(errorOf([&] { readTable(path, "label", 1); }),
            path + ":5: has 1 fields where the header has 2 columns (and 1 bad rows before it, more than the 1 to skip)");
}

}  // namespace
}  // namespace gyre::data::detail
