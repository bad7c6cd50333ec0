// IEEE 754 binary16 (NumPy's float16) to and from float, rounding to nearest even as NumPy's
// astype(np.float16) does: MultiFetch accumulates float16 partial sums through float.
// bfloat16 (ml_dtypes' bfloat16: a float's upper 16 bits) likewise, summed in float.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

namespace autotile {

/// \brief The float value of binary16 bits `h` (exact: every half is a float).
inline float float_from_half(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {  // zero or subnormal: mant * 2^-24
    const float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);  // inf or nan (payload kept)
  } else {
    bits = sign | ((exp + 112u) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

/// \brief The binary16 bits nearest `f` (ties to even; past 65504 to infinity, nan stays nan).
inline uint16_t half_from_float(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  const uint32_t sign = (x >> 16) & 0x8000u, absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) return static_cast<uint16_t>(sign | (absx > 0x7f800000u ? 0x7e00u : 0x7c00u));
  if (absx >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520 rounds to infinity
  if (absx < 0x38800000u) {  // below 2^-14: a subnormal half, round(|f| * 2^24), ties to even
    float v;
    std::memcpy(&v, &absx, sizeof v);
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(std::ldexp(v, 24))));
  }
  const uint32_t mant = absx & 0x7fffffu;
  uint32_t h = (((absx >> 23) - 112u) << 10) | (mant >> 13);
  const uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // a carry moves into the exponent
  return static_cast<uint16_t>(sign | h);
}

/// \brief The float value of bfloat16 bits `b` (the upper half of a float's bits: exact).
inline float float_from_bfloat16(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

/// \brief The bfloat16 bits nearest `f`, ties to even, as ml_dtypes' astype(bfloat16) rounds
/// (a carry past the largest finite value gives infinity; nan stays a quiet nan).
inline uint16_t bfloat16_from_float(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

}  // namespace autotile
