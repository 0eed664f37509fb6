// Owns the SI number format of human output (si_format.h).
#include "support/si_format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace tessera {

namespace {
constexpr const char* kPrefixes[] = {"p", "n", "u", "m", "", "k", "M", "G", "T"};
}  // namespace

SiScale siScaleFor(double v, int minPower, int maxPower) {
  minPower = std::clamp(minPower, -4, 4);
  maxPower = std::clamp(maxPower, minPower, 4);
  int p = 0;
  const double a = std::fabs(v);
  if (a > 0 && std::isfinite(a)) {
    p = int(std::floor(std::log10(a) / 3));
    // log10 rounding at exact powers of 1000 (999.99999 vs 1000): settle on the mantissa itself.
    if (a / std::pow(1000.0, p) < 1) --p;
    if (a / std::pow(1000.0, p) >= 999.95) ++p;  // shown as "1.000" of the next prefix
  }
  p = std::clamp(p, minPower, maxPower);
  return {p, kPrefixes[p + 4]};
}

std::string siNumber(double v, const SiScale& s) {
  if (!std::isfinite(v)) return "n/a";
  const double m = v / std::pow(1000.0, s.power);
  const double a = std::fabs(m);
  // Four significant digits at the magnitude of the value shown (3 below 1: "0.412").
  const int decimals = a == 0 ? 0 : a < 10 ? 3 : a < 100 ? 2 : a < 1000 ? 1 : 0;
  char b[48];
  std::snprintf(b, sizeof b, "%.*f", decimals, m);
  // Rounding may carry to the next magnitude ("9.9996" -> "10.000"): one digit fewer then.
  if (decimals > 0 && std::fabs(std::strtod(b, nullptr)) >= (a < 10 ? 10 : a < 100 ? 100 : 1000))
    std::snprintf(b, sizeof b, "%.*f", decimals - 1, m);
  return b;
}

std::string formatSi(double v, std::string_view unit, int minPower, int maxPower) {
  if (!std::isfinite(v)) return "n/a";
  const SiScale s = siScaleFor(v, minPower, maxPower);
  std::string out = v == 0 ? "0" : siNumber(v, s);
  out += ' ';
  out += v == 0 ? "" : s.prefix;
  out += unit;
  return out;
}

std::string formatMicros(double us) { return formatSi(us * 1e-6, "s", -2, 0); }

std::string formatRatio(double r) {
  if (!std::isfinite(r)) return "n/a";
  if (r == 0) return "0x";
  const double a = std::fabs(r);
  int decimals = std::clamp(2 - int(std::floor(std::log10(a))), 0, 6);
  char b[48];
  std::snprintf(b, sizeof b, "%.*f", decimals, r);
  // Rounding may carry to the next magnitude ("9.996" -> "10.00"): one digit fewer then.
  if (decimals > 0 && std::fabs(std::strtod(b, nullptr)) >= std::pow(10.0, 3 - decimals))
    std::snprintf(b, sizeof b, "%.*f", decimals - 1, r);
  return std::string(b) + "x";
}

std::string countOf(int64_t n, std::string_view noun, std::string_view plural) {
  std::string out = std::to_string(n) + " ";
  if (n == 1) out += noun;
  else if (!plural.empty()) out += plural;
  else out += std::string(noun) + "s";
  return out;
}

}  // namespace tessera
