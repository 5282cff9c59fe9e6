// gyre::numbers: the one range check of a number a user gives, and its conversion to a duration.
#include "common/numbers.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "gyre/errors.h"

namespace gyre::numbers {
namespace {

std::string refusal(double value, const Range& r) {
  try {
    check("--x", value, r);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

TEST(Numbers, NonFiniteValuesAreRefusedWhateverTheRange) {
  const double inf = std::numeric_limits<double>::infinity();
  for (double v : {inf, -inf, std::nan("")}) {
    EXPECT_NE(refusal(v, {}), "") << v;
    EXPECT_NE(refusal(v, {.min = 0, .max = kMaxSeconds}), "") << v;
  }
  EXPECT_EQ(refusal(inf, {.min = 0, .max = 10, .unit = "s", .note = "0: never"}),
            "--x must be a finite number in [0, 10] s (0: never); got inf");
}

TEST(Numbers, BoundsAreInclusiveUnlessMinIsExclusive) {
  EXPECT_EQ(refusal(0, {.min = 0, .max = 1}), "");
  EXPECT_EQ(refusal(1, {.min = 0, .max = 1}), "");
  EXPECT_EQ(refusal(1.0000001, {.min = 0, .max = 1}), "--x must be a finite number in [0, 1]; got 1.0000001");
  EXPECT_EQ(refusal(0, {.min = 0, .minExclusive = true}), "--x must be a finite number above 0; got 0");
  EXPECT_EQ(refusal(1e-300, {.min = 0, .minExclusive = true}), "");
  EXPECT_EQ(refusal(-1, {.min = 0}), "--x must be a finite number of at least 0; got -1");
  EXPECT_NE(refusal(1e300, {}), "");  // above what any bound can state
}

TEST(Numbers, IntegersNameTheirRangeAndNote) {
  EXPECT_NO_THROW(checkInt("-np", 0, 0, 4));
  EXPECT_NO_THROW(checkInt("-np", 4, 0, 4));
  try {
    checkInt("-np", 5, 0, 4, "0: every slot");
    FAIL() << "5 is above 4";
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(), "-np must be an integer in [0, 4] (0: every slot); got 5");
  }
  EXPECT_THROW(checkInt("--batch", 0, 1, std::numeric_limits<std::int64_t>::max()), InvalidArgument);
}

TEST(Numbers, MillisRoundsAndNeverTurnsAPositiveDurationIntoZero) {
  EXPECT_EQ(millis(0).count(), 0);
  EXPECT_EQ(millis(0.0001).count(), 1);
  EXPECT_EQ(millis(1.5).count(), 1500);
  EXPECT_EQ(millis(kMaxSeconds).count(), 2147483000);
  EXPECT_THROW(millis(kMaxSeconds + 1), InvalidArgument);
  EXPECT_THROW(millis(std::nan("")), InvalidArgument);
  EXPECT_THROW(millis(-1), InvalidArgument);
}

}  // namespace
}  // namespace gyre::numbers
