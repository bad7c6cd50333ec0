// Integer index expressions of TDL accesses in normal form: an affine combination of index
// variables plus scaled floor divisions of such forms. This is the symbolic half of Tofu's
// interval analysis (Sec 4.2, Fig. 4): the coefficient vector over variables is what the
// paper calls a symbolic interval; evaluating it on concrete variable ranges is the
// concrete half.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace autotile {
namespace tdl {

/// \brief Closed integer interval [lo, hi]; empty when lo > hi.
struct Bounds {
  int64_t lo = 0;
  int64_t hi = -1;
  bool empty() const { return lo > hi; }
};

struct FloorTerm;

/// \brief c + sum_i coef_i * var_i + sum_j coef_j * floor(form_j / d_j), all integer.
///
/// Variables are dense ids local to one statement. Terms are kept sorted by variable id
/// with no zero coefficients, so two equal forms compare equal.
struct LinearForm {
  int64_t constant = 0;
  std::vector<std::pair<int, int64_t>> vars;         ///< (variable id, coefficient)
  std::vector<std::pair<int64_t, FloorTerm>> floors;  ///< (coefficient, floor division)

  /// \brief The form of one variable.
  static LinearForm variable(int id);
  /// \brief The form of a constant.
  static LinearForm number(int64_t value);

  bool is_constant() const { return vars.empty() && floors.empty(); }
  /// \brief True when the form is exactly variable `id` (coefficient 1, nothing else).
  bool is_exactly(int id) const;
  /// \brief Whether variable `id` occurs anywhere (including inside floor divisions).
  bool involves(int id) const;
  /// \brief Coefficient of `id` in the affine part (0 if absent or only inside floors).
  int64_t coefficient(int id) const;
  /// \brief Every variable id that occurs anywhere, appended to `out` (may repeat).
  void collect_vars(std::vector<int>* out) const;

  /// \brief Range of values over the box `ranges[var]` (saturating; empty if a variable
  /// it uses has an empty range). Exact when no variable occurs in two terms.
  Bounds eval(const std::vector<Bounds>& ranges) const;

  /// \brief Text form with variable names from `names` (for messages and tests).
  std::string str(const std::vector<std::string>& names) const;
};

/// \brief floor(num / divisor), divisor > 1.
struct FloorTerm {
  std::shared_ptr<const LinearForm> num;
  int64_t divisor = 1;
};

// Algebra used while folding a parsed index expression into normal form. Each throws
// std::overflow_error when a constant does not fit in 64 bits (the parser turns that
// into an Error at the token's position).

/// \brief a + b.
LinearForm add(const LinearForm& a, const LinearForm& b);
/// \brief a * s for a constant s.
LinearForm scale(const LinearForm& a, int64_t s);
/// \brief floor(a / d) for a constant d > 0 (simplified when d divides a exactly, or a is
/// itself a single floor division: floor(floor(x/b)/d) = floor(x/(b*d))).
LinearForm floor_div(const LinearForm& a, int64_t d);

/// \brief Mathematical floor of a / b for b > 0.
int64_t floor_divide(int64_t a, int64_t b);

}  // namespace tdl
}  // namespace autotile
