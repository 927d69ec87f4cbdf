// jitbridge/fatbin.hpp — ahead-of-time fat binaries: one program compiled for a list of targets, joined with nvFatbin.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "jitbridge/jit.hpp"

namespace jitbridge {

class Cache;

// Compiles `source` for each of `targets` ("sm_80", "sm_90", "compute_90"; options.arch must be empty),
// each through the cache, and joins the images with nvFatbin (loaded at run time, found like NVRTC:
// JITBRIDGE_NVFATBIN, the nvidia-nvfatbin wheel, the toolkits). The result's fatbin holds one image per
// target (cubins, and PTX for compute_XY), arch lists the targets ("sm_80,sm_90"), cubin and ptx are
// empty, kernels and signatures are the first target's (every target must give the same ones), and
// request keeps the call (options.arch = the list). Loading it lets the driver pick the image for each
// GPU. Throws std::invalid_argument (an empty list, a malformed or repeated target, options.arch set),
// CompileError/NvrtcError, std::runtime_error (targets disagree on kernels; nvFatbin refused an image),
// CudaNotFoundError when no nvFatbin 13 was found (its message names the nvidia-nvfatbin wheel).
std::shared_ptr<const Program> compile_fatbin(std::string_view source, const CompileOptions& options,
                                              const std::vector<std::string>& targets, Cache* cache = nullptr);

// nvFatbin's version as {major, minor}; throws CudaNotFoundError when it was not found.
std::pair<int, int> nvfatbin_version();

}  // namespace jitbridge
