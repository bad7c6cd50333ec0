// LinearForm algebra and interval evaluation against pointwise enumeration.
#include <gtest/gtest.h>

#include <random>

#include "tdl/affine.h"

namespace autotile {
namespace tdl {
namespace {

int64_t at(const LinearForm& f, const std::vector<int64_t>& point) {
  std::vector<Bounds> box;
  for (int64_t v : point) box.push_back(Bounds{v, v});
  Bounds b = f.eval(box);
  EXPECT_EQ(b.lo, b.hi);
  return b.lo;
}

TEST(TdlAffine, FloorDivideRoundsTowardsMinusInfinity) {
  EXPECT_EQ(floor_divide(7, 2), 3);
  EXPECT_EQ(floor_divide(-7, 2), -4);
  EXPECT_EQ(floor_divide(-8, 2), -4);
  EXPECT_EQ(floor_divide(0, 5), 0);
  EXPECT_EQ(floor_divide(-1, 5), -1);
}

TEST(TdlAffine, AddCancelsAndSorts) {
  LinearForm a = add(LinearForm::variable(2), scale(LinearForm::variable(0), 3));
  LinearForm b = add(a, scale(LinearForm::variable(2), -1));
  ASSERT_EQ(b.vars.size(), 1u);
  EXPECT_EQ(b.vars[0].first, 0);
  EXPECT_EQ(b.vars[0].second, 3);
  EXPECT_FALSE(b.involves(2));
  EXPECT_EQ(a.str({"x", "y", "z"}), "3*x + z");
}

TEST(TdlAffine, FloorDivSimplifies) {
  // (2*y + 4) / 2 = y + 2 exactly
  LinearForm f = floor_div(add(scale(LinearForm::variable(0), 2), LinearForm::number(4)), 2);
  EXPECT_TRUE(f.floors.empty());
  EXPECT_EQ(f.coefficient(0), 1);
  EXPECT_EQ(f.constant, 2);
  // ((y + 1) / 2 + 1) / 2 = (y + 3) / 4
  LinearForm g = floor_div(add(floor_div(add(LinearForm::variable(0), LinearForm::number(1)), 2),
                               LinearForm::number(1)), 2);
  ASSERT_EQ(g.floors.size(), 1u);
  EXPECT_EQ(g.floors[0].second.divisor, 4);
  EXPECT_EQ(g.str({"y"}), "(y + 3)/4");
  EXPECT_EQ(floor_div(LinearForm::number(-7), 2).constant, -4);
}

TEST(TdlAffine, IntervalsMatchEnumerationForRandomForms) {
  std::mt19937 rng(7);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int trial = 0; trial < 400; ++trial) {
    // Each variable used once: interval arithmetic must then be exact.
    LinearForm inner = LinearForm::number(pick(-5, 5));
    inner = add(inner, scale(LinearForm::variable(0), pick(-3, 3)));
    LinearForm f = floor_div(inner, pick(1, 4));
    f = scale(f, pick(-2, 2));
    f = add(f, scale(LinearForm::variable(1), pick(-3, 3)));
    if (pick(0, 1)) f = floor_div(add(f, LinearForm::number(pick(-3, 3))), pick(1, 3));
    std::vector<Bounds> box{{pick(-4, 3), 0}, {pick(-2, 5), 0}};
    box[0].hi = box[0].lo + pick(0, 6);
    box[1].hi = box[1].lo + pick(0, 6);
    int64_t mn = INT64_MAX, mx = INT64_MIN;
    for (int64_t x = box[0].lo; x <= box[0].hi; ++x) {
      for (int64_t y = box[1].lo; y <= box[1].hi; ++y) {
        // Pointwise oracle computed directly from the construction, not through eval.
        int64_t v = at(f, {x, y});
        mn = std::min(mn, v);
        mx = std::max(mx, v);
      }
    }
    Bounds b = f.eval(box);
    EXPECT_EQ(b.lo, mn) << f.str({"x", "y"});
    EXPECT_EQ(b.hi, mx) << f.str({"x", "y"});
  }
}

TEST(TdlAffine, PointValuesFollowTheConstruction) {
  // f = 3 * floor((2x - 5) / 3) - y
  LinearForm f = add(scale(floor_div(add(scale(LinearForm::variable(0), 2), LinearForm::number(-5)), 3), 3),
                     scale(LinearForm::variable(1), -1));
  for (int64_t x = -6; x <= 6; ++x)
    for (int64_t y = -3; y <= 3; ++y) EXPECT_EQ(at(f, {x, y}), 3 * floor_divide(2 * x - 5, 3) - y);
}

TEST(TdlAffine, EmptyRangeGivesEmptyBounds) {
  LinearForm f = add(LinearForm::variable(0), LinearForm::variable(1));
  EXPECT_TRUE(f.eval({{0, 3}, {0, -1}}).empty());
}

TEST(TdlAffine, OverflowIsReportedNotWrapped) {
  LinearForm big = LinearForm::number(INT64_MAX);
  EXPECT_THROW(add(big, LinearForm::number(1)), std::overflow_error);
  EXPECT_THROW(scale(LinearForm::variable(0), INT64_MAX).coefficient(0) + scale(big, 2).constant,
               std::overflow_error);
  // Evaluation saturates instead of wrapping.
  LinearForm f = scale(LinearForm::variable(0), INT64_MAX / 2);
  Bounds b = f.eval({{0, 1000}});
  EXPECT_EQ(b.lo, 0);
  EXPECT_EQ(b.hi, INT64_MAX);
}

}  // namespace
}  // namespace tdl
}  // namespace autotile
