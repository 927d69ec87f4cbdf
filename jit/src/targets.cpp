// targets.cpp — parsing CUDA targets and CUDA's rules for which GPUs run code built for them.
#include "jitbridge/targets.hpp"

#include <fmt/format.h>

#include <cctype>
#include <stdexcept>

namespace jitbridge {

std::string Target::name() const {
  const char* suffix = variant == Variant::arch_specific ? "a" : variant == Variant::family ? "f" : "";
  return fmt::format("{}_{}{}{}", kind == Kind::sass ? "sm" : "compute", major, minor, suffix);
}

Target parse_target(std::string_view arch) {
  Target t;
  std::string_view rest = arch;
  bool known_prefix = true;
  if (rest.substr(0, 3) == "sm_") {
    rest.remove_prefix(3);
  } else if (rest.substr(0, 8) == "compute_") {
    t.kind = Target::Kind::ptx;
    rest.remove_prefix(8);
  } else {
    known_prefix = false;
  }
  std::size_t digits = 0;
  while (digits < rest.size() && std::isdigit(static_cast<unsigned char>(rest[digits]))) ++digits;
  const std::string_view suffix = rest.substr(digits);
  if (!known_prefix || digits < 2 || digits > 6 || !(suffix.empty() || suffix == "a" || suffix == "f"))
    throw std::invalid_argument(fmt::format(
        "arch: '{}' is not a CUDA target; expected sm_XY, sm_XYa, sm_XYf or compute_XY (e.g. sm_90)", arch));
  const int number = std::stoi(std::string(rest.substr(0, digits)));
  t.major = number / 10;
  t.minor = number % 10;
  if (suffix == "a") t.variant = Target::Variant::arch_specific;
  if (suffix == "f") t.variant = Target::Variant::family;
  return t;
}

bool runs_on(const Target& t, int cc_major, int cc_minor) {
  switch (t.variant) {
    case Target::Variant::arch_specific:
      return cc_major == t.major && cc_minor == t.minor;
    case Target::Variant::family:
      return cc_major == t.major && cc_minor >= t.minor;
    case Target::Variant::plain:
      if (t.kind == Target::Kind::sass) return cc_major == t.major && cc_minor >= t.minor;
      return cc_major > t.major || (cc_major == t.major && cc_minor >= t.minor);
  }
  return false;
}

std::string why_not(const Target& t, int cc_major, int cc_minor, std::string_view device) {
  if (runs_on(t, cc_major, cc_minor)) return {};
  const char* what = t.kind == Target::Kind::sass ? "code" : "PTX";
  std::string where;
  if (t.variant == Target::Variant::arch_specific) {
    where = fmt::format("{}.{} exactly", t.major, t.minor);
  } else if (t.kind == Target::Kind::ptx && t.variant == Target::Variant::plain) {
    where = fmt::format("{}.{} or later", t.major, t.minor);
  } else if (t.minor == 0) {
    where = fmt::format("{}.x", t.major);
  } else {
    where = fmt::format("{}.{} to {}.9", t.major, t.minor, t.major);
  }
  return fmt::format("{} {} runs only on compute capability {}; {} is {}.{}", t.name(), what, where, device, cc_major,
                     cc_minor);
}

std::string native_target(int cc_major, int cc_minor) { return fmt::format("sm_{}{}", cc_major, cc_minor); }

}  // namespace jitbridge
