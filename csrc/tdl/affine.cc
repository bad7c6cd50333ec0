#include "tdl/affine.h"

#include <algorithm>
#include <limits>
#include <sstream>
#include <stdexcept>

namespace autotile {
namespace tdl {

namespace {

using Wide = __int128;
// Saturation bound of intermediate interval arithmetic: far beyond any tensor extent, far
// below __int128 overflow even after a product of two saturated 64-bit values.
constexpr Wide kSat = Wide(1) << 100;

Wide sat(Wide v) { return v > kSat ? kSat : (v < -kSat ? -kSat : v); }

int64_t to_i64(Wide v) {
  if (v > std::numeric_limits<int64_t>::max()) return std::numeric_limits<int64_t>::max();
  if (v < std::numeric_limits<int64_t>::min()) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(v);
}

Wide floor_div_wide(Wide a, Wide b) {
  Wide q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t checked_add(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) throw std::overflow_error("index constant overflows 64 bits");
  return r;
}

int64_t checked_mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) throw std::overflow_error("index constant overflows 64 bits");
  return r;
}

bool same(const LinearForm& a, const LinearForm& b);

bool same_floor(const FloorTerm& a, const FloorTerm& b) {
  return a.divisor == b.divisor && (a.num == b.num || same(*a.num, *b.num));
}

bool same(const LinearForm& a, const LinearForm& b) {
  if (a.constant != b.constant || a.vars != b.vars || a.floors.size() != b.floors.size()) return false;
  for (size_t i = 0; i < a.floors.size(); ++i) {
    if (a.floors[i].first != b.floors[i].first || !same_floor(a.floors[i].second, b.floors[i].second)) return false;
  }
  return true;
}

struct WideBounds {
  Wide lo, hi;
};

WideBounds eval_wide(const LinearForm& f, const std::vector<Bounds>& ranges, bool* empty) {
  Wide lo = f.constant, hi = f.constant;
  for (const auto& [id, coef] : f.vars) {
    const Bounds& r = ranges[id];
    if (r.empty()) {
      *empty = true;
      return {0, -1};
    }
    Wide a = sat(Wide(coef) * r.lo), b = sat(Wide(coef) * r.hi);
    lo = sat(lo + std::min(a, b));
    hi = sat(hi + std::max(a, b));
  }
  for (const auto& [coef, fl] : f.floors) {
    WideBounds in = eval_wide(*fl.num, ranges, empty);
    if (*empty) return {0, -1};
    // floor is monotone, so the ends of the numerator's range map to the ends of the result.
    Wide qlo = floor_div_wide(in.lo, fl.divisor), qhi = floor_div_wide(in.hi, fl.divisor);
    Wide a = sat(Wide(coef) * qlo), b = sat(Wide(coef) * qhi);
    lo = sat(lo + std::min(a, b));
    hi = sat(hi + std::max(a, b));
  }
  return {lo, hi};
}

}  // namespace

int64_t floor_divide(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

LinearForm LinearForm::variable(int id) {
  LinearForm f;
  f.vars.push_back({id, 1});
  return f;
}

LinearForm LinearForm::number(int64_t value) {
  LinearForm f;
  f.constant = value;
  return f;
}

bool LinearForm::is_exactly(int id) const {
  return constant == 0 && floors.empty() && vars.size() == 1 && vars[0].first == id && vars[0].second == 1;
}

bool LinearForm::involves(int id) const {
  for (const auto& v : vars)
    if (v.first == id) return true;
  for (const auto& f : floors)
    if (f.second.num->involves(id)) return true;
  return false;
}

int64_t LinearForm::coefficient(int id) const {
  for (const auto& v : vars)
    if (v.first == id) return v.second;
  return 0;
}

void LinearForm::collect_vars(std::vector<int>* out) const {
  for (const auto& v : vars) out->push_back(v.first);
  for (const auto& f : floors) f.second.num->collect_vars(out);
}

Bounds LinearForm::eval(const std::vector<Bounds>& ranges) const {
  bool empty = false;
  WideBounds w = eval_wide(*this, ranges, &empty);
  if (empty) return Bounds{};
  return Bounds{to_i64(w.lo), to_i64(w.hi)};
}

std::string LinearForm::str(const std::vector<std::string>& names) const {
  std::ostringstream os;
  bool first = true;
  auto term = [&](int64_t coef, const std::string& what) {
    if (first) {
      if (coef < 0) os << "-";
    } else {
      os << (coef < 0 ? " - " : " + ");
    }
    // Magnitude without negating INT64_MIN.
    uint64_t mag = coef < 0 ? 0 - static_cast<uint64_t>(coef) : static_cast<uint64_t>(coef);
    if (mag != 1) os << mag << "*";
    os << what;
    first = false;
  };
  for (const auto& [id, coef] : vars) {
    term(coef, id >= 0 && id < static_cast<int>(names.size()) ? names[id] : "v" + std::to_string(id));
  }
  for (const auto& [coef, fl] : floors) term(coef, "(" + fl.num->str(names) + ")/" + std::to_string(fl.divisor));
  if (constant != 0 || first) {
    if (first) {
      os << constant;
    } else {
      uint64_t mag = constant < 0 ? 0 - static_cast<uint64_t>(constant) : static_cast<uint64_t>(constant);
      os << (constant < 0 ? " - " : " + ") << mag;
    }
  }
  return os.str();
}

LinearForm add(const LinearForm& a, const LinearForm& b) {
  LinearForm r;
  r.constant = checked_add(a.constant, b.constant);
  // Merge the sorted variable lists, dropping cancelled terms.
  size_t i = 0, j = 0;
  while (i < a.vars.size() || j < b.vars.size()) {
    if (j == b.vars.size() || (i < a.vars.size() && a.vars[i].first < b.vars[j].first)) {
      r.vars.push_back(a.vars[i++]);
    } else if (i == a.vars.size() || b.vars[j].first < a.vars[i].first) {
      r.vars.push_back(b.vars[j++]);
    } else {
      int64_t c = checked_add(a.vars[i].second, b.vars[j].second);
      if (c != 0) r.vars.push_back({a.vars[i].first, c});
      ++i;
      ++j;
    }
  }
  r.floors = a.floors;
  for (const auto& [coef, fl] : b.floors) {
    bool merged = false;
    for (size_t k = 0; k < r.floors.size(); ++k) {
      if (same_floor(r.floors[k].second, fl)) {
        r.floors[k].first = checked_add(r.floors[k].first, coef);
        if (r.floors[k].first == 0) r.floors.erase(r.floors.begin() + static_cast<long>(k));
        merged = true;
        break;
      }
    }
    if (!merged) r.floors.push_back({coef, fl});
  }
  return r;
}

LinearForm scale(const LinearForm& a, int64_t s) {
  if (s == 0) return LinearForm{};
  LinearForm r;
  r.constant = checked_mul(a.constant, s);
  for (const auto& [id, coef] : a.vars) r.vars.push_back({id, checked_mul(coef, s)});
  for (const auto& [coef, fl] : a.floors) r.floors.push_back({checked_mul(coef, s), fl});
  return r;
}

LinearForm floor_div(const LinearForm& a, int64_t d) {
  if (d <= 0) throw std::invalid_argument("divisor must be positive");
  if (d == 1) return a;
  if (a.is_constant()) return LinearForm::number(floor_divide(a.constant, d));
  // Every term an integer multiple of d: the quotient is exact.
  bool exact = a.constant % d == 0;
  for (const auto& v : a.vars) exact = exact && v.second % d == 0;
  for (const auto& f : a.floors) exact = exact && f.first % d == 0;
  if (exact) {
    LinearForm r;
    r.constant = a.constant / d;
    for (const auto& [id, coef] : a.vars) r.vars.push_back({id, coef / d});
    for (const auto& [coef, fl] : a.floors) r.floors.push_back({coef / d, fl});
    return r;
  }
  // floor((floor(x/b) + c) / d) = floor((x + c*b) / (b*d)).
  if (a.vars.empty() && a.floors.size() == 1 && a.floors[0].first == 1) {
    const FloorTerm& inner = a.floors[0].second;
    LinearForm num = add(*inner.num, LinearForm::number(checked_mul(a.constant, inner.divisor)));
    return floor_div(num, checked_mul(inner.divisor, d));
  }
  LinearForm r;
  r.floors.push_back({1, FloorTerm{std::make_shared<const LinearForm>(a), d}});
  return r;
}

}  // namespace tdl
}  // namespace autotile
