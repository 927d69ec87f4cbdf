// relocatable.cpp — compile() of -rdc / -dc / -dlto programs: keeps NVRTC's relocatable output for later links and links the program on its own so that it loads.
#include <fmt/format.h>

#include "jit_internal.hpp"
#include "jitbridge/cuda_search.hpp"
#include "jitbridge/link.hpp"
#include "jitbridge/nvjitlink_api.hpp"
#include "link_internal.hpp"

namespace jitbridge::detail {
namespace {

// The value of "-opt=value" / "--opt=value" when `o` is spelled so; nullopt otherwise.
std::optional<std::string_view> value_of(std::string_view o, std::string_view name) {
  if (o.substr(0, name.size()) != name || o.size() <= name.size() || o[name.size()] != '=') return std::nullopt;
  return o.substr(name.size() + 1);
}

}  // namespace

bool relocatable_options(const std::vector<std::string>& nvrtc_options, bool* lto) {
  bool rdc = false, dlto = false;
  for (std::size_t i = 0; i < nvrtc_options.size(); ++i) {
    std::string_view o = nvrtc_options[i];
    if (o == "-dc" || o == "--device-c") {
      rdc = true;
    } else if (o == "-dw" || o == "--device-w") {
      rdc = false;
    } else if (o == "-dlto" || o == "--dlink-time-opt") {
      dlto = true;
    } else if (auto v = value_of(o, "-rdc") ? value_of(o, "-rdc") : value_of(o, "--relocatable-device-code")) {
      rdc = *v == "true";
    } else if ((o == "-rdc" || o == "--relocatable-device-code") && i + 1 < nvrtc_options.size()) {
      rdc = nvrtc_options[++i] == "true";
    }
  }
  if (lto) *lto = dlto;
  return rdc || dlto;  // -dlto implies -rdc=true
}

std::string relocatable_key(const std::string& key, const std::vector<std::string>& nvrtc_options) {
  if (!relocatable_options(nvrtc_options)) return key;
  const ComponentPick& devrt = device_runtime_pick();
  Hasher h;
  h.field(key).field(nvjitlink_identity());  // throws CudaNotFoundError without nvJitLink: the link needs it
  h.field(devrt.found ? library_identity(devrt.path) : std::string("no device runtime"));
  return h.hex();
}

void finish_relocatable(Program& program, const std::vector<std::string>& nvrtc_options, std::string ltoir) {
  bool lto = false;
  if (!relocatable_options(nvrtc_options, &lto)) return;
  if (lto) {
    if (ltoir.empty()) return;  // NVRTC made no LTO-IR (a virtual arch): nothing to link
    program.link_input = std::move(ltoir);
    program.link_input_is_ltoir = true;
  } else {
    if (program.cubin.empty() || !cubin_is_relocatable(program.cubin)) return;  // PTX only (compute_XX)
    program.link_input = program.cubin;
  }
  const RawLinkInput input{program.link_input_is_ltoir ? LinkInput::Kind::ltoir : LinkInput::Kind::cubin,
                           program.link_input, "kernel.cu"};
  try {
    program.cubin = run_link({input}, program.arch, lto, {}, LinkOptions::DeviceRuntime::automatic).cubin;
    program.linked = true;
  } catch (const LinkError& e) {
    std::vector<std::string> missing;
    for (std::size_t i = 0; i < e.details().undefined.size(); ++i)
      if (!is_device_runtime_symbol(e.details().undefined_mangled[i])) missing.push_back(e.details().undefined[i]);
    if (missing.empty()) throw;
    // Symbols another program defines: a partial program, for link() (jitbridge/link.hpp).
    if (lto) program.cubin.clear();
    if (!program.log.empty()) program.log += "\n";
    program.log += fmt::format(
        "jitbridge: note: not linked: it references {} defined elsewhere; link it with the programs that "
        "define them (jitbridge.link)",
        fmt::join(missing, ", "));
  }
}

}  // namespace jitbridge::detail
