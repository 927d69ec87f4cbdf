// jitbridge/targets.hpp — CUDA compilation targets (sm_XY, sm_XYa, sm_XYf, compute_XY...) and on which GPUs code built for each runs.
#pragma once

#include <string>
#include <string_view>

namespace jitbridge {

// One compilation target, as NVRTC's -arch names it.
struct Target {
  enum class Kind { sass, ptx };                            // sm_XY (a cubin) or compute_XY (PTX)
  enum class Variant { plain, arch_specific, family };      // sm_90, sm_90a, sm_100f
  Kind kind = Kind::sass;
  Variant variant = Variant::plain;
  int major = 0, minor = 0;                                 // compute capability X.Y ("sm_100" -> 10.0)
  std::string name() const;                                 // "sm_90a", as it was spelled
};

// Parses "sm_90", "sm_90a", "sm_100f", "compute_90", "compute_90a", "compute_100f". Throws
// std::invalid_argument naming `arch` for anything else (needs no NVRTC).
Target parse_target(std::string_view arch);

// Whether code built for `target` runs on a device of compute capability cc_major.cc_minor, by
// CUDA's rules: a plain or family cubin (sm_XY, sm_XYf) runs on the same major with a minor at
// least Y; an arch-specific one (sm_XYa, compute_XYa) on exactly X.Y; plain PTX (compute_XY) is
// compiled by the driver for any X.Y or later; family PTX (compute_XYf) for the same major, minor
// at least Y. Never throws.
bool runs_on(const Target& target, int cc_major, int cc_minor);

// Why `target` does not run on `device` (e.g. "cuda:0") of compute capability cc_major.cc_minor:
// "sm_100 code runs only on compute capability 10.x; cuda:0 is 12.0". "" when it runs there.
std::string why_not(const Target& target, int cc_major, int cc_minor, std::string_view device);

// The cubin target of a device of that compute capability: "sm_90".
std::string native_target(int cc_major, int cc_minor);

}  // namespace jitbridge
