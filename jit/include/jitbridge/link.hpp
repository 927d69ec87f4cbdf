// jitbridge/link.hpp — separate compilation: joining relocatable programs, LTO-IR, PTX, cubins, fatbins and static device libraries into one Program with nvJitLink.
#pragma once

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "jitbridge/jit.hpp"

namespace jitbridge {

class Cache;

// One thing to link.
struct LinkInput {
  enum class Kind { program, cubin, ptx, ltoir, fatbin, library, object };
  Kind kind = Kind::program;
  // Kind::program: a Program compiled with -rdc=true / -dc (its relocatable cubin is linked) or
  // -dlto (its LTO-IR); its kernels keep their names and signatures in the result.
  std::shared_ptr<const Program> program;
  std::string bytes;  // every other kind: the contents (a .a archive for library)
  std::string name;   // how logs and errors name it ("kernel.cu", "libfoo.a"); "" gives "inputs[i]"

  static LinkInput from_program(std::shared_ptr<const Program> program, std::string name = "");
  static LinkInput from_bytes(Kind kind, std::string bytes, std::string name = "");
  // Reads `path`; the kind comes from its extension (.cubin, .ptx, .ltoir, .fatbin, .a, .o) unless
  // given. Throws std::invalid_argument naming the path when it cannot be read or has no known kind.
  static LinkInput from_file(const std::string& path, std::optional<Kind> kind = std::nullopt);
};

// "program", "cubin", "ptx", "ltoir", "fatbin", "library", "object".
const char* link_kind_name(LinkInput::Kind kind) noexcept;
// The Kind spelled by link_kind_name(); nullopt for anything else.
std::optional<LinkInput::Kind> parse_link_kind(std::string_view name) noexcept;

struct LinkOptions {
  // "sm_90" & co. (a real target: the result is a cubin). Empty: the first program input's arch,
  // else default_arch().
  std::string arch;
  // Link-time optimisation (nvJitLink -lto). nullopt: on exactly when an input is LTO-IR. false
  // with an LTO-IR input is refused.
  std::optional<bool> lto;
  // More nvJitLink options, passed as given: "-O3", "-lineinfo", "-maxrregcount=64", "-ftz=true", ...
  std::vector<std::string> options;
  // The CUDA device runtime (libcudadevrt.a, for dynamic parallelism). automatic: linked when a
  // relocatable input references it (for LTO-IR, which cannot be inspected, when the link without
  // it reports its symbols missing: linking it unneeded grows an LTO cubin from 4 KB to 200 KB).
  enum class DeviceRuntime { automatic, always, never };
  DeviceRuntime device_runtime = DeviceRuntime::automatic;
};

// nvJitLink refused the inputs. what() names the undefined symbols (demangled, with the mangled
// name and the input that references them, when the log says) and holds the error log.
class LinkError : public std::runtime_error {
 public:
  struct Details {
    std::string error_log;               // nvJitLink's error log
    std::string info_log;                // its info log
    std::vector<std::string> undefined;  // demangled names of the undefined symbols, in log order
    std::vector<std::string> undefined_mangled;  // the same, as the binary names them
    std::string input;                   // the input an AddData call refused, or ""
    int code = 0;                        // the nvJitLinkResult of the failing call
  };
  explicit LinkError(Details details);
  const Details& details() const noexcept { return details_; }

 private:
  Details details_;
};

// Links `inputs` into one Program (cubin for options.arch, linked = true), or fetches the result
// from `cache` (nullptr: Cache::global()) under a key covering every input's bytes, the nvJitLink
// file, the device runtime file and the options. The result's kernels are the program inputs'
// kernels (names and signatures kept) plus any other entry point of the linked image (named by
// demangling, no signature). Thread-safe.
// Throws std::invalid_argument for bad inputs (none, a null or not relocatable program, empty bytes,
// a program built for another arch, a virtual arch, lto=false with LTO-IR), naming inputs[i];
// LinkError when nvJitLink refuses them; CudaNotFoundError when nvJitLink (or a needed device
// runtime) was not found.
std::shared_ptr<const Program> link(const std::vector<LinkInput>& inputs, const LinkOptions& options = {},
                                    Cache* cache = nullptr);

// link()'s result as users are handed it (jitbridge/jit.hpp, output_program()): the same link with each program
// input as output_program() builds it, so that no __jitbridge probe symbol of the inputs is in the cubin (link()'s
// own result keeps them: it links the programs as launched). Kernels without signatures. Through `cache`, under
// keys of their own; throws as link() and compile() do. Launching never needs it.
std::shared_ptr<const Program> output_link(const std::vector<LinkInput>& inputs, const LinkOptions& options = {},
                                           Cache* cache = nullptr);

// Whether `image` is a relocatable ELF cubin (ET_REL: compiled with -rdc=true / -dc and not linked),
// which the driver cannot load. Never throws.
bool is_relocatable_cubin(std::string_view image) noexcept;

}  // namespace jitbridge
