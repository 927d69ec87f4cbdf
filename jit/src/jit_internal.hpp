// jit_internal.hpp — internal pieces of jit/ (parsers and helpers), exposed for the unit tests.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "jitbridge/jit.hpp"

namespace jitbridge::detail {

// ---- kernel_scan.cpp: find the __global__ functions a source declares -------------------
struct KernelCandidate {
  std::string qualified_name;  // "saxpy", "ns::scale"
  int line = 0;                // 1-based line of the declaration
  bool is_template = false;    // template kernels need a name expression to exist at all
  std::string template_header; // templates: "template <typename T, int N>", as the tokens read
};
// Scans comment-free text for __global__ function declarations (templates flagged) at namespace
// scope. Macros are not expanded: a kernel declared through a macro is missed here (the
// compiler finds it later). Duplicates (declaration + definition) are reported once.
std::vector<KernelCandidate> scan_kernels(std::string_view source);


// ---- signature.cpp: the probe that makes NVRTC tell the parameter types ------------------
// Source appended to every program: a variable template whose lowered name spells a function
// pointer type and the size and alignment of each parameter.
extern const char* const kProbeSource;
// The function pointer type of the kernel named by `expression`, as source: "decltype(&scale)".
std::string kernel_pointer_type(std::string_view kernel_expression);
// The name expression asking for the layout of a kernel of `function_type` ("decltype(&scale)",
// "void (*)(float*, int)"): "__jitbridge_sig<decltype(&scale)>::layout".
std::string whole_probe(std::string_view function_type);
// Parses the demangled probe instance, e.g.
// "__jitbridge_layout<void (*)(float const*, int), 8ull, 4ull, 8ull, 4ull>".
// Returns nullopt when the probe says "not a function" (its primary template).
std::optional<Signature> parse_probe(std::string_view demangled);
// Splits "a, b<c, d>, e (*)(f, g)" at top-level commas, trimming blanks.
std::vector<std::string> split_top_level(std::string_view list);
// Builds one Param (size/align left 0) from a printed type such as "float const*".
Param parse_param(std::string_view spelling);
// Itanium demangling (the C++ runtime's __cxa_demangle); nullopt when it refuses the name: not a
// mangled name, or (libstdc++) one longer than 1024 characters (see signature_split.cpp).
std::optional<std::string> demangled(const std::string& mangled);
// demangled(), or the input unchanged.
std::string demangle(const std::string& mangled);

// ---- signature_split.cpp: probes whose names are too long for the demangler -----------------
// libstdc++'s __cxa_demangle refuses any name longer than 1024 characters (its guard against deep
// recursion on hostile names, GCC PR 87675, counts 2 components per character against a limit of
// 2048), and a probe name takes about 17 characters per int parameter: 59 int parameters exceed it.
// Such a kernel is probed again by parts: kProbeChunk parameters per name, then one parameter per
// name for parts still too long.
inline constexpr std::size_t kProbeChunk = 16;
// The templates the part probes need (appended after kProbeSource, only to the compiles that ask them).
const std::string& split_probe_source();
// The name expressions for parameters [16 * chunk, 16 * chunk + 16) (fewer at the end), and for
// parameter `index` alone, of a kernel of `function_type`: whole_probe() of a shorter function type.
std::string chunk_probe(std::string_view function_type, std::size_t chunk);
std::string param_probe(std::string_view function_type, std::size_t index);
// How many parameters a probe's lowered (mangled) name covers, read off the layout values that close
// it (4 per parameter, each "Ly<digits>E"); nullopt when `mangled` is no probe name of that form.
std::optional<std::size_t> probe_parameter_count(std::string_view mangled);
// Compiles the program again with these name expressions; their lowered names, or nullopt when that
// compile failed.
using LowerNames =
    std::function<std::optional<std::map<std::string, std::string>>(const std::vector<std::string>& expressions)>;
// The signatures of kernels of `function_types` (whole_probe's argument): each from its whole probe's
// lowered name when `lowered_so_far` has it (a compile already run) and it demangles; else through
// `lower`, once per round for all kernels: whole probes not yet compiled, then chunks, then single
// parameters. nullopt for a kernel: the probe says it is no function, NVRTC gave no lowered name,
// a compile of `lower` failed, or one parameter's type alone is too long to demangle. At most three
// calls of `lower`. Throws std::runtime_error for a probe name of an unexpected form.
std::vector<std::optional<Signature>> read_signatures(const std::vector<std::string>& function_types,
                                                      const std::map<std::string, std::string>& lowered_so_far,
                                                      const LowerNames& lower);

// ---- resources.cpp: ptxas -v lines ---------------------------------------------------------
// Per lowered kernel name, what ptxas printed. Non-resource lines are returned in `rest`.
std::map<std::string, Resources> parse_ptxas_info(std::string_view log, std::string* rest);

// ---- cubin_elf.cpp: what the binary holds -------------------------------------------------
// Lowered names of the entry functions (kernels) in a cubin, in symbol-table order.
// Throws std::runtime_error when `cubin` is not a 64-bit ELF image.
std::vector<std::string> cubin_kernels(std::string_view cubin);
// Per entry function, what the cubin itself records: registers, stack frame, static shared memory,
// constant bank 0, barriers (spills are not recorded there: 0). The source of resources when
// NVRTC's log has no ptxas lines (NVRTC builds that print none under -Xptxas=-v).
std::map<std::string, Resources> cubin_resources(std::string_view cubin);

// ---- diagnostics.cpp: turning an NVRTC log into a CompileError ------------------------------
// An error in a name expression (NVRTC's "__nv_name_map" lines) is reported against the expression
// in `name_expressions` it came from (Details::name_expression), never against generated code; an
// error in an expression jitbridge added (a probe) leaves name_expression at -1 and file empty.
CompileError::Details parse_diagnostics(std::string_view log, std::string_view source,
                                        std::string_view program_name,
                                        const std::vector<KernelCandidate>& kernels,
                                        const std::vector<std::string>& name_expressions = {});
// NVRTC's file name for the name expressions of a program.
inline constexpr std::string_view kNameMapFile = "__nv_name_map";
// The message CompileError::what() returns.
std::string format_compile_error(const CompileError::Details& d);

// ---- header_deps.cpp: which files a compile read -------------------------------------------
// The "Processing Header File" entries of an NVRTC --fdevice-time-trace JSON document, in
// order of first appearance, without duplicates. Throws std::runtime_error on malformed JSON.
std::vector<std::string> trace_headers(std::string_view trace_json);

// ---- hash.cpp ----------------------------------------------------------------------------
// 128-bit XXH3 as 32 hex digits. Incremental: feed fields, then hex().
class Hasher {
 public:
  Hasher();
  ~Hasher();
  Hasher(const Hasher&) = delete;
  Hasher& operator=(const Hasher&) = delete;
  // Each field is length-prefixed, so ("ab","c") and ("a","bc") differ.
  Hasher& field(std::string_view bytes);
  Hasher& field(std::uint64_t value);
  std::string hex();

 private:
  void* state_;
};
std::string hash_hex(std::string_view bytes);

// ---- text.cpp / files.cpp -------------------------------------------------------------------
std::vector<std::string_view> split_lines(std::string_view text);
// The decimal number written right before / right after `marker` on `line`, if any.
std::optional<std::uint64_t> number_before(std::string_view line, std::string_view marker);
std::optional<std::uint64_t> number_after(std::string_view line, std::string_view marker);
// The text after `open` up to `close` (or the end of the line); empty when `open` is absent.
std::string_view text_between(std::string_view line, std::string_view open, std::string_view close);
// The most bytes read_file reads (headers, NVRTC's time trace): a file past it is refused.
inline constexpr std::uint64_t kMaxReadFileBytes = std::uint64_t{1} << 30;
// The whole of the regular file open on `fd` (not closed here), if it holds at most `max_bytes`
// bytes; at most max_bytes + 1 bytes are read (a file that grows, or lies about its size, is
// refused). False for anything else: not a regular file (a FIFO, device, directory), too big, a
// read error. Never blocks on a descriptor opened O_NONBLOCK. Throws only std::bad_alloc.
bool read_regular_file(int fd, std::uint64_t max_bytes, std::string& out);
// The whole file at `path` (symlinks followed) through read_regular_file with kMaxReadFileBytes,
// opened O_NONBLOCK; false when it cannot be read. The descriptor is closed on every path.
bool read_file(const std::string& path, std::string& out);

// ---- device_headers.cpp (generated) ------------------------------------------------------
// jitbridge's own device headers (jitbridge/tensor.cuh), added as in-memory headers to every
// compile whose source names them and that does not bring its own.
const std::vector<Header>& builtin_device_headers();

// ---- cuda_libraries.cpp: the CUDA search of this process ------------------------------------
// The include directories every compile gets (cuda_fp16.h, cuda/std, ...; may be empty when none
// was found). Throws CudaNotFoundError when JITBRIDGE_CUDA_INCLUDE names something that is not there.
const std::vector<std::string>& compile_include_dirs();
// A line for NVRTC's log when a header set was not found (what to install), else "".
std::string missing_headers_hint();

// ---- options.cpp ---------------------------------------------------------------------------
// Validates the spelling of "sm_90", "sm_90a", "compute_90", "sm_100f" (needs no NVRTC: every
// compile() checks it, cache hits too); throws std::invalid_argument.
void validate_arch(const std::string& arch);
// Throws std::invalid_argument when this process's NVRTC cannot build `arch` (asked of NVRTC once,
// loading it: CudaNotFoundError without one). Checked before NVRTC compiles only: a cache hit was
// built by the same NVRTC file, for the same arch.
void check_arch_supported(const std::string& arch);
// The options NVRTC gets: user options (relative include paths made absolute, -arch taken
// out), toolkit include dirs, -arch, -Xptxas=-v where a cubin is built. `arch` is in/out:
// an -arch in the user options fills it when empty and must agree when not.
std::vector<std::string> effective_options(const CompileOptions& options, std::string& arch);
// The include directories the user gave (-I forms in `options.options`, then include_paths), made
// absolute, in search order; toolkit directories are not among them. An -I without its directory is
// skipped (effective_options refuses it). Never throws but std::bad_alloc.
std::vector<std::string> user_include_dirs(const CompileOptions& options);

// ---- std_headers.cpp: standard headers for pasted code ----------------------------------------
// The option "-DJITBRIDGE_NO_STD_SHIMS" turns the shims off for one compile.
inline constexpr const char* kNoStdShimsMacro = "JITBRIDGE_NO_STD_SHIMS";
// The in-memory shims: <type_traits>, <cstdint>, ..., <stdio.h>, each mapped onto libcu++ or NVRTC's
// built-ins (docs/DESIGN.md, "Standard headers"). The cache key names the shims a compile gets and
// std_shims_digest() (not their texts: hashing ~20 KB on every memory hit doubled its cost).
const std::vector<Header>& std_shim_headers();
// XXH3 of every shim's name and text, computed once. Never throws but std::bad_alloc.
const std::string& std_shims_digest();
// Whether libcu++ (cuda/std/type_traits) is on compile_include_dirs(); shims need it. Never throws.
bool std_shims_available();
// The shims a compile with `options` gets: none when opted out or libcu++ is missing, and none for a
// name that an in-memory header or a file in a user include directory provides (the user's wins).
// The pointers are into std_shim_headers().
std::vector<const Header*> std_shims_for(const CompileOptions& options);
// `options` plus `shims` (std_shims_for(options)): `options` itself when there are none, else
// `storage`, filled.
const CompileOptions& with_std_headers(const CompileOptions& options, const std::vector<const Header*>& shims,
                                       CompileOptions& storage);
// The next step for NVRTC's `cannot open source file "name"`, as " (...)" to append to the message: for a standard
// header the shims do not cover, which ones they do and why the rest cannot be; for a shimmed one, that the shims
// are off; for any other name, include_paths= / headers=. Never throws but std::bad_alloc.
std::string missing_header_hint(std::string_view name);

// ---- cuda_libraries.cpp: nvFatbin ------------------------------------------------------------
// The dlopen handle of the nvFatbin this process found (nvfatbin_pick(); never unloaded). Throws
// CudaNotFoundError naming the nvidia-nvfatbin wheel when none was found.
void* nvfatbin_library();

// ---- request.cpp -------------------------------------------------------------------------
// The request of a compile(source, given) call (relative include paths made absolute).
std::shared_ptr<const CompileRequest> make_request(std::string_view source, const CompileOptions& given);
// `program` with the request of a compile(source, given) call in Program::request: itself when it
// already carries an equal one, else a copy that does (relative include paths made absolute).
std::shared_ptr<const Program> with_request(std::shared_ptr<const Program> program, std::string_view source,
                                            const CompileOptions& given);

}  // namespace jitbridge::detail
