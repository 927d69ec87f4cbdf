// fuzz_support.hpp — what the libFuzzer targets share: how a finding stops the run (one marker line that
// scripts/fuzz classifies), and readers of fuzzed integers biased toward the limits where bugs live.
#pragma once

#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>

namespace jbfuzz {

// Stops the run with a finding: prints "JB-FUZZ-FINDING: <kind>: <detail>" and aborts, so libFuzzer
// saves the input as a crash file. Kinds: wrong-acceptance (the reference says refuse), wrong-refusal
// (the reference says accept), wrong-result (accepted, but a field differs from the reference's),
// bad-exception (an exception outside the documented ones), lifetime (a DLPack deleter ran other than once).
[[noreturn]] inline void finding(const char* kind, const std::string& detail) {
  std::fprintf(stderr, "\nJB-FUZZ-FINDING: %s: %s\n", kind, detail.c_str());
  std::fflush(stderr);
  std::abort();
}

// A 64-bit value that is, about half the time, one of the edges (0, ±1, powers of two and their
// neighbours, the int64/uint64 limits) and otherwise any value: plain uniform bytes rarely hit a limit.
inline std::uint64_t edgy_u64(FuzzedDataProvider& in) {
  const std::uint8_t pick = in.ConsumeIntegral<std::uint8_t>();
  if (pick < 128) return in.ConsumeIntegral<std::uint64_t>();
  const unsigned shift = pick % 64;
  const std::uint64_t p = std::uint64_t{1} << shift;
  switch ((pick >> 6) & 1) {
    case 0: return (pick & 32) ? p - 1 : p;
    default: return (pick & 32) ? ~std::uint64_t{0} - p + 1 : p + 1;  // -p as unsigned, p + 1
  }
}
inline std::int64_t edgy_i64(FuzzedDataProvider& in) { return static_cast<std::int64_t>(edgy_u64(in)); }

// A small non-negative value most of the time (shapes, counts), an edgy one otherwise.
inline std::int64_t dim_value(FuzzedDataProvider& in) {
  const std::uint8_t pick = in.ConsumeIntegral<std::uint8_t>();
  if (pick < 192) return pick % 8;
  return edgy_i64(in);
}

// -v with two's complement wrap-around (INT64_MIN stays itself), without undefined behaviour.
inline std::int64_t negate(std::int64_t v) { return static_cast<std::int64_t>(std::uint64_t{0} - static_cast<std::uint64_t>(v)); }

inline std::string hex(std::uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%#llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace jbfuzz
