// Owns the one number format of human output: SI-scaled values with 3-4 significant digits
// ("20.76 ms", "1.074 GB", "412.3 GFLOP/s"), never an exponent or a float's every digit, and counts
// with their noun's number ("1 core", "2 cores"). Every CLI printer and every human line the
// libraries build goes through here; --json keeps raw numbers.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tessera {

// SI prefixes by power of 1000: -4 (p) .. 4 (T).
struct SiScale {
  int power = 0;       // v / 1000^power is the number shown
  const char* prefix;  // "p", "n", "u", "m", "", "k", "M", "G", "T"
};

// The prefix that puts |v| in [1, 1000), clamped to [minPower, maxPower] (a time never below us,
// a throughput never below G): below minPower the number reads "0.412", above maxPower "12345".
SiScale siScaleFor(double v, int minPower = -4, int maxPower = 4);

// `v` in the scale chosen for `scaleOf` (a median's p20 and p80 read in the median's unit), 4
// significant digits at the scale's own magnitude ("0.412", "4.123", "41.23", "412.3"), no unit.
std::string siNumber(double v, const SiScale& s);

// "20.76 ms" for formatSi(0.02076, "s"); "1.074 GB" for formatSi(1073741824, "B"); "0 s" for 0;
// "n/a" for NaN or infinity.
std::string formatSi(double v, std::string_view unit, int minPower = -4, int maxPower = 4);

// A kernel time given in microseconds: "0.412 us" .. "412.3 us", "1.234 ms", "2.345 s" (never ns:
// every time Tessera prints is in us and up).
std::string formatMicros(double us);

// A ratio of two measurements ("vs default", a re-timing against a claim, p80/p20): three
// significant digits and an "x", never an exponent: "1.36x", "12.3x", "928x", "0.941x", "0.0412x";
// "n/a" for NaN or infinity.
std::string formatRatio(double r);

// "1 core", "2 cores", "0 records"; `plural` when the noun does not take an "s".
std::string countOf(int64_t n, std::string_view noun, std::string_view plural = "");

}  // namespace tessera
