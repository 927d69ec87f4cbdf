// jitbridge/jit.hpp — public C++ API of jit/: compile CUDA C++ with NVRTC into a Program
// that knows its kernels' exact parameter types, resources and lowered names.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace jitbridge {

// An in-memory header: `#include "name"` in the source resolves to `text`.
struct Header {
  std::string name;
  std::string text;
};

// Everything that shapes one compilation. All of it enters the cache key.
struct CompileOptions {
  // Passed to NVRTC as given ("-DN=4", "-std=c++17", "--use_fast_math", ...). Relative
  // "-I dir" / "-Idir" / "--include-path=dir" paths are made absolute before use.
  std::vector<std::string> options;
  // Template instantiations or other names whose lowered names are wanted, e.g.
  // "my_kernel<float, 4>". Each becomes a Kernel (if it names a __global__ function).
  std::vector<std::string> name_expressions;
  std::vector<Header> headers;            // in-memory headers
  std::vector<std::string> include_paths; // extra -I directories
  // "sm_90", "sm_90a", "sm_100f", ... Empty: the current GPU's, else JITBRIDGE_ARCH,
  // else kDefaultArch (see default_arch()).
  std::string arch;
  bool ptx = false;                       // also keep the PTX text
  std::string program_name = "kernel.cu"; // the file name diagnostics refer to
  // false: compile the source alone, without the layout probe compile() appends to learn the kernels'
  // parameter types (its __jitbridge_* symbols are then not in the binary, and kernels have no
  // signature). For output handed to users; output_program() sets it.
  bool layout_probe = true;
};

// What compile() was asked: all it takes to build the same program again, for another target or in
// another process (pickling). Paths in it are absolute.
struct CompileRequest {
  std::string source;
  // As given, except that relative include paths (-I options, include_paths) are made absolute
  // against the working directory of the compile() call.
  CompileOptions options;
  bool arch_given = false;  // options.arch or an -arch option named the target; false: the default was used
};

// One kernel parameter, as the compiler sees it after macros and typedefs.
struct Param {
  enum class Kind { pointer, value };
  Kind kind = Kind::value;
  // Pointee type for pointers, value type otherwise, without top-level const:
  // "float", "__half", "Params", "jitbridge::Tensor<float, 2>", "void".
  std::string type;
  bool is_const = false;   // pointers: the pointee is const (`const float*`)
  std::size_t size = 0;    // bytes the parameter occupies in the argument buffer
  std::size_t align = 0;   // its alignment in the argument buffer
  std::string spelling;    // the whole type as the compiler printed it: "float const*"
  // Pointers: sizeof and alignof the pointee, as the compiler sees them (16 and 16 for float4*);
  // 0 for void, function and incomplete pointees, and for parameters that are no pointers.
  std::size_t pointee_size = 0;
  std::size_t pointee_align = 0;
};

struct Signature {
  std::vector<Param> params;
  // "(float const*, __half*, int)"
  std::string to_string() const;
};

// What ptxas reported for one kernel (-Xptxas=-v). known == false for PTX-only builds.
struct Resources {
  bool known = false;
  int registers = 0;
  int barriers = 0;
  std::size_t shared_bytes = 0;   // static shared memory
  std::size_t local_bytes = 0;    // stack frame
  std::size_t const_bytes = 0;    // cmem[0] (kernel parameters and constants)
  std::size_t spill_store_bytes = 0;
  std::size_t spill_load_bytes = 0;
};

struct Kernel {
  // extern "C" kernels: their name. Templates: the name expression as given.
  // Other C++ kernels: the demangled qualified name ("ns::scale").
  std::string name;
  std::string lowered_name;  // the symbol in the binary, for cuLibraryGetKernel & co.
  std::optional<Signature> signature;  // absent only if the compiler could not be asked
  Resources resources;
};

// A template __global__ function the source declares: it exists in the binary only through a name
// expression that instantiates it.
struct TemplateKernel {
  std::string name;    // qualified: "scale", "ns::scale"
  std::string header;  // its template header as written: "template <typename T, int N>"
  // An instantiation to show in hints: "scale<float, 1>" for the header above (float for type
  // parameters, 1 for values, true for bool, nothing for packs and template template parameters).
  std::string example() const;
};

// Where a Program came from.
enum class Origin { compiled, memory_cache, disk_cache };

// An immutable compiled program. Shared by the cache and every holder; thread-safe to read.
class Program {
 public:
  std::string arch;                    // the target actually used: "sm_90"
  std::string cubin;                   // empty when arch is a virtual (compute_XX) target
  std::string ptx;                     // filled when CompileOptions::ptx or a compute_XX arch
  std::string log;                     // NVRTC warnings, ptxas resource lines removed
  std::vector<std::string> options;    // the options NVRTC was given, in order
  std::vector<Kernel> kernels;         // user kernels only, in binary order
  // name expression -> lowered name, for every name expression given (kernels or not).
  std::vector<std::pair<std::string, std::string>> lowered_names;
  Origin origin = Origin::compiled;
  // Separate compilation (jitbridge/link.hpp): what NVRTC made for the linker when compiled with
  // -rdc=true / -dc (the relocatable cubin) or -dlto (LTO-IR, link_input_is_ltoir); "" otherwise.
  std::string link_input;
  bool link_input_is_ltoir = false;
  // cubin is nvJitLink's output (the program linked on its own by compile(), or link()'s result).
  bool linked = false;
  // Every template kernel the source declares (instantiated or not), for the hints of
  // missing_kernel_message().
  std::vector<TemplateKernel> templates;
  // What compile() was asked (kept in memory only, never in the disk cache: a program read from
  // there gets the request of the compile() call that found it). nullptr when not from compile().
  std::shared_ptr<const CompileRequest> request;
  // A fat binary with one image per target (compile_fatbin(); arch lists them, comma-separated);
  // loaded instead of cubin/ptx when not empty. Empty for compile()'s programs.
  std::string fatbin;

  // The kernel called `name` (Kernel::name, or its lowered name); a name expression also matches spelled with
  // other blanks between its tokens ("scale<float,4>" finds "scale<float, 4>"). nullptr if none.
  const Kernel* find_kernel(std::string_view name) const;
  // Lowered name of a name expression given at compile time (blanks between tokens as find_kernel);
  // throws std::out_of_range.
  const std::string& lowered_name(std::string_view name_expression) const;
  // Why find_kernel(name) found nothing, for the error a caller raises: the kernels there are, and
  // for a template kernel asked for by its bare name, the name_expressions that instantiate it.
  // Never throws but std::bad_alloc.
  std::string missing_kernel_message(std::string_view name) const;
};

// "" when `other` has every kernel of `base` with the same lowered name and signature (sizes and
// alignments included), else what differs first. Builds of one request for two targets must agree.
std::string kernel_difference(const Program& base, const Program& other);

// NVRTC rejected the source. what() is the diagnostic: "file:line:column: error: message", the offending
// line (at most kMaxEchoedChars of it) with a caret, then the first kMaxLogLines lines of NVRTC's log;
// the fields carry the pieces (the whole log included) for programs that want them.
class CompileError : public std::runtime_error {
 public:
  struct Details {
    std::string log;                  // NVRTC's whole log
    std::string program_name;
    std::vector<std::string> options;
    std::string kernel;               // kernel whose body holds the first error, or ""
    // Where the first error is: program_name, or the header's name or path as NVRTC printed it;
    // "" when unknown or in a name expression (then name_expression says which).
    std::string file;
    int name_expression = -1;         // index into CompileOptions::name_expressions, or -1
    int line = 0;                     // 1-based line of the first error in `file`, 0 if unknown
    int column = 0;                   // 1-based column, 0 if unknown
    std::string message;              // the first error's message
    std::string source_line;          // that line of the source, as written
  };
  static constexpr std::size_t kMaxLogLines = 20;
  static constexpr std::size_t kMaxEchoedChars = 200;
  explicit CompileError(Details details);
  const Details& details() const noexcept { return details_; }

 private:
  Details details_;
};

// NVRTC itself failed (not the user's source): out of memory, bad option table, missing library.
class NvrtcError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Cache;

// Compile `source` (or fetch it from `cache`; nullptr means Cache::global()).
// Throws CompileError for errors in the source or options, NvrtcError for NVRTC failures,
// std::invalid_argument for a malformed arch. Thread-safe.
std::shared_ptr<const Program> compile(std::string_view source, const CompileOptions& options,
                                       Cache* cache = nullptr);

// `program` as NVRTC builds it from its request alone, without the layout probe (CompileOptions::
// layout_probe): what a user gets as a file or as bytes (the CLI's -o and --ptx, Program.cubin & co. in
// Python), free of jitbridge's internal symbols. Built through `cache` (nullptr: Cache::global()) under
// its own key on first use, for the same target; a fat binary is rebuilt target by target. Launching
// never needs it. A program without a request (link()'s result, a raw image) or already built without
// the probe is returned as is. Throws as compile() and compile_fatbin() do. Thread-safe.
std::shared_ptr<const Program> output_program(std::shared_ptr<const Program> program, Cache* cache = nullptr);

// The target used when CompileOptions::arch is empty: the current GPU's "sm_XY" if a
// driver and a GPU are present, else $JITBRIDGE_ARCH, else kDefaultArch.
std::string default_arch();
inline constexpr const char* kDefaultArch = "sm_90";

// NVRTC's version as {major, minor}. NVRTC is loaded at run time (jitbridge/cuda_search.hpp says
// from where); throws CudaNotFoundError (a NvrtcError) when no usable NVRTC 13 was found.
std::pair<int, int> nvrtc_version();

// The NVRTC library this process uses (loading it): its real path, size and mtime. Two builds of
// one version (the toolkit's and a framework's wheel) behave differently, so this enters the cache
// key; the key takes it from the file the search locates, without loading (a hit loads nothing).
// Throws CudaNotFoundError when no usable NVRTC was found.
const std::string& nvrtc_library();

// The CUDA include directories jitbridge adds to every compile (cuda_fp16.h, cuda/std/...),
// from the place NVRTC came from or the next place that has them (jitbridge/cuda_search.hpp).
// Empty if none was found. Never throws.
const std::vector<std::string>& toolkit_include_dirs();

// Where jitbridge's warnings go (an unusable cache directory, say); default: stderr.
// The Python module routes them to warnings.warn. The handler must not throw.
void set_warning_handler(std::function<void(const std::string&)> handler);
void warn(const std::string& message) noexcept;

}  // namespace jitbridge
