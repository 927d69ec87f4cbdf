// link_internal.hpp — internal pieces of linking (jit/src/link.cpp, relocatable.cpp, cubin_elf.cpp), exposed for the unit tests.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "jitbridge/jit.hpp"
#include "jitbridge/link.hpp"

namespace jitbridge::detail {

// ---- cubin_elf.cpp -----------------------------------------------------------------------------
// Whether the cubin is ET_REL (relocatable, -rdc/-dc). Throws std::runtime_error when not an ELF image.
bool cubin_is_relocatable(std::string_view cubin);
// The global symbols the cubin references without defining them (what a link must supply).
std::vector<std::string> cubin_undefined_symbols(std::string_view cubin);

// ---- link.cpp ------------------------------------------------------------------------------------
// Whether `symbol` belongs to the CUDA device runtime (dynamic parallelism: __cudaCDP*,
// cudaGetParameterBuffer*, cudaLaunchDevice*, ...).
bool is_device_runtime_symbol(std::string_view symbol);
// The symbols nvJitLink's error log reports undefined ("Undefined reference to '_Z1fi'",
// "Unresolved extern function '_Z1fi'"), mangled, in log order without duplicates.
std::vector<std::string> undefined_in_log(std::string_view log);

// Removes the device runtime's own kernels (static kernels of its cuda_device_runtime.cu, which a
// link with libcudadevrt.a brings into the image) from a linked image's entry list.
void drop_device_runtime_kernels(std::vector<std::string>& symbols);

// One nvJitLink run: inputs already resolved to bytes.
struct RawLinkInput {
  LinkInput::Kind kind;  // never Kind::program
  std::string_view bytes;
  std::string name;
};
struct RawLinkResult {
  std::string cubin;
  std::string info_log;
  bool device_runtime = false;  // the device runtime was linked
};
// Links with nvJitLink for `arch` ("sm_90"); adds the device runtime per `devrt` (automatic: when a
// cubin or PTX input references it, else after a link that failed for want of it). Throws
// LinkError, CudaNotFoundError.
RawLinkResult run_link(const std::vector<RawLinkInput>& inputs, const std::string& arch, bool lto,
                       const std::vector<std::string>& options, LinkOptions::DeviceRuntime devrt);

// ---- relocatable.cpp: -rdc / -dc / -dlto programs inside compile() -----------------------------
// Whether the NVRTC options ask for relocatable device code (-rdc=true, --relocatable-device-code=true,
// -dc, --device-c) or LTO-IR (-dlto, --dlink-time-opt; sets *lto). The last spelling wins.
bool relocatable_options(const std::vector<std::string>& nvrtc_options, bool* lto = nullptr);
// `key` extended by the nvJitLink and device runtime identities when the options are relocatable
// (the auto-link's result depends on them); `key` unchanged otherwise.
std::string relocatable_key(const std::string& key, const std::vector<std::string>& nvrtc_options);
// For relocatable options: keeps NVRTC's output as program.link_input (the ET_REL cubin already in
// program.cubin, or `ltoir`) and links it on its own (with the device runtime when it needs it),
// replacing program.cubin by the linked image. When the program references symbols no input
// defines (an extern __device__ function of another program) it stays unlinked (linked = false:
// the relocatable cubin, or no cubin for LTO-IR) and its log says so; other link errors throw
// LinkError. Does nothing for other options.
void finish_relocatable(Program& program, const std::vector<std::string>& nvrtc_options, std::string ltoir);

}  // namespace jitbridge::detail
