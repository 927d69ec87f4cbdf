// compiler.cpp — compile(): cache key, NVRTC passes with the signature probe, and assembling the Program.
#include <fmt/format.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <cstdio>
#include <set>

#include "cache_internal.hpp"
#include "cache_lock.hpp"
#include "jit_internal.hpp"
#include "jitbridge/cuda_search.hpp"
#include "jitbridge/nvrtc_api.hpp"
#include "link_internal.hpp"
#include "nvrtc_program.hpp"
#include "pch.hpp"

namespace jitbridge {
namespace {

using detail::KernelCandidate;
using detail::NvrtcProgram;

// Bump when the meaning of an entry changes (probe, options, format).
// 5: NVRTC named by its file's identity alone (nvrtc_identity(): located, not loaded), no version.
// 6: Program::link_input / linked (separate compilation), pointee size/alignment in the probe,
//    Program::templates, and dependency records with absences (a header that would shadow one read).
// 7: signatures of kernels whose probe names pass libstdc++'s 1024-character demangle limit (59+ parameters) are
//    read by parts; an entry of 6 may hold such a kernel probed as void().
constexpr const char* kKeyVersion = "jitbridge-cache-key-7";

// `nvrtc` is nvrtc_identity(): which NVRTC file compiles (its version follows from the file).
// `options` without the std shims; `shims` are the ones the compile gets (std_shims_for), keyed by
// name and the digest of all shim texts.
std::string cache_key(std::string_view source, const CompileOptions& options,
                      const std::vector<std::string>& nvrtc_options, const std::string& nvrtc,
                      const std::vector<const Header*>& shims) {
  detail::Hasher h;
  h.field(kKeyVersion).field(JITBRIDGE_VERSION);
  h.field(nvrtc);
  h.field(options.program_name).field(source).field(static_cast<std::uint64_t>(options.ptx));
  if (!options.layout_probe) h.field("without the layout probe");  // probed keys stay as they were
  h.field(static_cast<std::uint64_t>(nvrtc_options.size()));
  for (const std::string& o : nvrtc_options) h.field(o);
  h.field(static_cast<std::uint64_t>(options.name_expressions.size()));
  for (const std::string& e : options.name_expressions) h.field(e);
  h.field(static_cast<std::uint64_t>(options.headers.size()));
  for (const Header& hd : options.headers) h.field(hd.name).field(hd.text);
  h.field(static_cast<std::uint64_t>(shims.size()));
  if (!shims.empty()) h.field(detail::std_shims_digest());
  for (const Header* shim : shims) h.field(shim->name);
  return h.hex();
}

// A private directory for one traced compile's NVRTC time-trace file, made in $TMPDIR (or /tmp) and checked
// (check_private_directory) when the compile starts, removed with the file when it ends: a process that is killed
// (a terminated pool worker) leaves nothing behind, but for a compile it was in. "" when none can be made or
// $TMPDIR is not safe: compiles are then untraced, and those that may read headers from outside the toolkit are
// not cached; the first refusal gives that warning, once.
std::string make_trace_dir() {
  const char* env = std::getenv("TMPDIR");
  const std::string tmp = env && *env ? env : "/tmp";
  std::string templ = tmp + "/jitbridge-trace-XXXXXX";
  std::string why;
  if (!::mkdtemp(templ.data())) {
    why = std::strerror(errno);
  } else if (const detail::DirectoryCheck check = detail::check_private_directory(templ); !check.ok) {
    ::rmdir(templ.c_str());
    why = detail::refusal_reason(check, "TMPDIR");
  } else {
    return templ;
  }
  static std::atomic<bool> warned{false};
  if (!warned.exchange(true))
    warn(fmt::format("NVRTC's header traces cannot be kept in {}: {}; compiles that may read headers from outside the "
                     "toolkit are not cached",
                     tmp, why));
  return {};
}

struct TraceFile {
  std::string dir;     // this compile's make_trace_dir(), or "" (untraced)
  std::string option;  // --fdevice-time-trace=<base>; NVRTC writes <base>.json
  std::string path;
  // `wanted`: the compile may be traced (it can read headers), so a directory is made for it.
  explicit TraceFile(bool wanted) {
    if (!wanted || (dir = make_trace_dir()).empty()) return;
    option = "--fdevice-time-trace=" + dir + "/t";
    path = dir + "/t.json";
  }
  ~TraceFile() {
    if (!path.empty()) ::unlink(path.c_str());
    if (!dir.empty()) ::rmdir(dir.c_str());
  }
  TraceFile(const TraceFile&) = delete;
  TraceFile& operator=(const TraceFile&) = delete;
  // The headers the compile read; nullopt if the trace is missing or unreadable.
  std::optional<std::vector<std::string>> headers() const {
    if (path.empty()) return std::nullopt;
    std::string json;
    // Not followed if a symlink, and only the user's own file: it decides what the cache checks.
    if (!detail::read_entry_file(path, detail::kMaxReadFileBytes, json)) return std::nullopt;
    try {
      return detail::trace_headers(json);
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }
};

struct Pass {
  bool ok = false;
  std::string log, cubin, ptx;
  std::string ltoir;  // -dlto
  std::map<std::string, std::string> lowered;  // name expression -> lowered name
  std::optional<std::vector<std::string>> headers;
};

// NVRTC 13.0 keeps the trace of a failed traced compile and writes it, as "./.json" in the
// working directory, during the thread's next compile that asks for no trace. A throwaway traced
// compile right after the failure takes the stale trace to a file of ours instead.
void flush_stale_trace() {
  try {
    TraceFile tf(true);
    NvrtcProgram empty("", "flush.cu", {});
    empty.compile({tf.option, "-arch=compute_75"});
  } catch (const std::exception&) {
    // Best effort: the compile error being reported matters more.
  }
}

// `may_include`: the compile can read headers at all. `need_deps`: it can read some that are not the
// toolkit's or in memory, so NVRTC's trace must list them for the cache. The trace also runs when
// this compile makes or uses a PCH (NVRTC takes a PCH only under the options that made it, and
// PCHs are made traced); otherwise a toolkit-only compile, the first of a PCH prefix included, runs
// untraced (the trace costs 5% of a cub compile, more in a process's first). Pass::headers: the
// headers read; empty when nothing but toolkit or in-memory headers could be; nullopt when unknown.
Pass run_pass(const std::string& source, const CompileOptions& options,
              const std::vector<std::string>& nvrtc_options, const std::vector<std::string>& expressions,
              bool may_include, bool need_deps) {
  NvrtcProgram prog(source, options.program_name, options.headers);
  for (const std::string& e : expressions) prog.add_name_expression(e);
  TraceFile tf(may_include);
  const bool can_trace = !tf.option.empty();
  detail::PchStep pch(source, options, nvrtc_options, can_trace);  // jit/src/pch.cpp
  const bool traced = can_trace && (need_deps || pch.uses_pch());
  std::vector<std::string> opts = nvrtc_options;
  if (traced) opts.push_back(tf.option);
  Pass p;
  p.ok = prog.compile(pch.rewrite(std::move(opts)));
  p.log = prog.log();
  if (!pch.finish(p.ok, p.log)) return run_pass(source, options, nvrtc_options, expressions, may_include, need_deps);
  if (!p.ok) {
    if (traced) flush_stale_trace();
    return p;
  }
  p.cubin = prog.cubin();
  p.ptx = prog.ptx();
  p.ltoir = prog.ltoir();
  for (const std::string& e : expressions) p.lowered[e] = prog.lowered_name(e);
  if (traced) p.headers = pch.headers(tf.headers());
  else if (!need_deps) p.headers = std::vector<std::string>{};
  return p;
}

std::size_t count_lines(std::string_view s) {
  return static_cast<std::size_t>(std::count(s.begin(), s.end(), '\n')) + 1;
}

// True when the first error NVRTC reports lies in the user's own text (its source or a header),
// not in the probe code or probe name expressions jitbridge appended.
bool error_is_users(const CompileError::Details& d, std::string_view source) {
  if (d.name_expression >= 0) return true;  // one the user gave
  if (d.line == 0 || d.file.empty()) return false;
  if (d.file != d.program_name) return true;  // in a header
  return static_cast<std::size_t>(d.line) <= count_lines(source);
}

std::vector<std::string> ptx_entries(const std::string& ptx) {
  // ".visible .entry name(" or ".entry name(" at the start of a line.
  std::vector<std::string> out;
  for (std::string_view line : detail::split_lines(ptx)) {
    std::size_t at = line.find(".entry ");
    if (at == std::string_view::npos || line.find("//") < at) continue;
    std::string_view name = detail::text_between(line.substr(at), ".entry ", "(");
    while (!name.empty() && name.back() == ' ') name.remove_suffix(1);
    if (!name.empty()) out.emplace_back(name);
  }
  return out;
}

// "ns::scale(float*, int)" -> {"ns::scale", "float*, int"}; templates keep their arguments.
std::pair<std::string, std::string> split_demangled(const std::string& demangled) {
  if (demangled.empty() || demangled.back() != ')') return {demangled, ""};
  int depth = 0;
  for (std::size_t i = demangled.size(); i-- > 0;) {
    if (demangled[i] == ')') ++depth;
    else if (demangled[i] == '(' && --depth == 0) {
      std::string name = demangled.substr(0, i);
      // Template instances print their return type first: "void tk<float, 3>".
      if (name.rfind("void ", 0) == 0) name = name.substr(5);
      return {name, demangled.substr(i + 1, demangled.size() - i - 2)};
    }
  }
  return {demangled, ""};
}

std::shared_ptr<Program> build(std::string_view source_view, const CompileOptions& options,
                               const std::vector<std::string>& nvrtc_options, const std::string& arch,
                               std::optional<std::vector<std::string>>& headers_read) {
  const std::string source(source_view);
  const std::vector<KernelCandidate> candidates = detail::scan_kernels(source);

  // Pass 1: the user's source and name expressions, plus the probe for every kernel we can name.
  std::vector<std::string> expressions = options.name_expressions;
  std::map<std::string, std::string> probe_of;  // kernel expression -> its function type, for the probe
  // Without the probe (CompileOptions::layout_probe, output_program()): the source alone, no signatures.
  const bool probe = options.layout_probe;
  if (probe) {
    for (const std::string& e : options.name_expressions) probe_of[e] = detail::kernel_pointer_type(e);
    for (const KernelCandidate& k : candidates)
      if (!k.is_template) {
        expressions.push_back(k.qualified_name);
        probe_of[k.qualified_name] = detail::kernel_pointer_type(k.qualified_name);
      }
  }
  for (const auto& [kernel, type] : probe_of) expressions.push_back(detail::whole_probe(type));
  const std::string probed_source = probe ? source + "\n" + detail::kProbeSource : source;
  // Without any "include" in the source or options nothing can be included, and NVRTC's time
  // trace (0.5 ms a compile) is not needed to know it.
  bool may_include = source.find("include") != std::string::npos;
  for (const std::string& o : nvrtc_options)
    may_include = may_include || (o.find("include") != std::string::npos && o.rfind("-I", 0) != 0);
  // Nor, for the cache, when every header the compile can read is the toolkit's (or in memory): the
  // trace's list would add no dependency (run_pass still traces a compile that makes or uses a PCH).
  const bool need_deps =
      may_include && !detail::reads_only_toolkit_headers(source, options.headers, nvrtc_options);
  Pass pass = run_pass(probed_source, options, nvrtc_options, expressions, may_include, need_deps);
  if (!pass.ok) {
    CompileError::Details d =
        detail::parse_diagnostics(pass.log, source, options.program_name, candidates, options.name_expressions);
    if (probe && !error_is_users(d, source)) {
      // Perhaps a probe we added (a kernel the scan misread): compile without any.
      probe_of.clear();
      expressions = options.name_expressions;
      pass = run_pass(source, options, nvrtc_options, expressions, may_include, need_deps);
      if (!pass.ok)
        d = detail::parse_diagnostics(pass.log, source, options.program_name, candidates, options.name_expressions);
    }
    if (!pass.ok) {
      d.options = nvrtc_options;
      throw CompileError(std::move(d));
    }
  }
  headers_read = may_include ? pass.headers : std::vector<std::string>{};

  auto program = std::make_shared<Program>();
  program->arch = arch;
  program->options = nvrtc_options;
  program->cubin = std::move(pass.cubin);
  detail::finish_relocatable(*program, nvrtc_options, std::move(pass.ltoir));  // -rdc/-dc/-dlto: linked here
  if (options.ptx || program->cubin.empty()) program->ptx = std::move(pass.ptx);
  std::map<std::string, Resources> resources = detail::parse_ptxas_info(pass.log, &program->log);
  // Some NVRTC builds (the one PyTorch's wheels ship, seen with 13.0) print no ptxas lines; the
  // cubin records the same numbers, spills excepted.
  const std::map<std::string, Resources> recorded =
      program->cubin.empty() ? std::map<std::string, Resources>{} : detail::cubin_resources(program->cubin);
  while (!program->log.empty() && program->log.back() == '\n') program->log.pop_back();
  for (const std::string& e : options.name_expressions) program->lowered_names.emplace_back(e, pass.lowered[e]);
  for (const KernelCandidate& k : candidates)
    if (k.is_template) program->templates.push_back({k.qualified_name, k.template_header});

  // Name each kernel of the binary and attach what the probes said.
  std::map<std::string, std::string> name_of;          // lowered -> user-facing name
  std::map<std::string, std::string> type_for_symbol;  // lowered -> function type probed
  for (const auto& [kernel, type] : probe_of) {
    const std::string& lowered = pass.lowered[kernel];
    if (lowered.empty()) continue;
    name_of.emplace(lowered, kernel);
    type_for_symbol.emplace(lowered, type);
  }
  std::vector<std::string> symbols =
      program->cubin.empty() ? ptx_entries(program->ptx) : detail::cubin_kernels(program->cubin);
  if (symbols.empty() && program->link_input_is_ltoir && !program->linked)  // LTO-IR left for link()
    for (const auto& [lowered, name] : name_of) symbols.push_back(lowered);
  if (program->linked) detail::drop_device_runtime_kernels(symbols);
  // Kernels to probe: those pass 1 probed (`probed`), and those the scan did not see (`missing`,
  // probed in a compile of their own, only when there are any), as indices into program->kernels
  // with their function types.
  std::vector<std::size_t> probed, missing;
  std::vector<std::string> probed_types, missing_types;
  for (const std::string& symbol : symbols) {
    Kernel k;
    k.lowered_name = symbol;
    std::optional<std::string> params;  // a C++ symbol's parameter list, when it demangles
    if (auto it = name_of.find(symbol); it != name_of.end()) {
      k.name = it->second;
    } else if (symbol.rfind("_Z", 0) == 0) {
      const std::optional<std::string> text = detail::demangled(symbol);
      if (text) std::tie(k.name, params) = split_demangled(*text);
      else k.name = symbol;  // too long to demangle (libstdc++: over 1024 characters): named, not probed
    } else {
      k.name = symbol;
    }
    if (auto it = type_for_symbol.find(symbol); it != type_for_symbol.end()) {
      probed.push_back(program->kernels.size());
      probed_types.push_back(it->second);
    } else if (probe && (params || symbol.rfind("_Z", 0) != 0)) {
      missing.push_back(program->kernels.size());
      missing_types.push_back(params ? fmt::format("void (*)({})", *params) : detail::kernel_pointer_type(symbol));
    }
    if (auto it = resources.find(symbol); it != resources.end()) {
      k.resources = it->second;
    } else if (auto rec = recorded.find(symbol); rec != recorded.end()) {
      k.resources = rec->second;
    }
    if (auto rec = recorded.find(symbol); rec != recorded.end() && k.resources.const_bytes == 0)
      k.resources.const_bytes = rec->second.const_bytes;  // newer ptxas no longer prints cmem[0]
    program->kernels.push_back(std::move(k));
  }

  // More compiles only where needed (signature_split.cpp): for probes too long to demangle, and for
  // kernels the scan could not name (macros, say); those whose types cannot be spelled back in
  // source keep no signature.
  const detail::LowerNames lower = [&](const std::vector<std::string>& more) {
    Pass again = run_pass(probed_source + detail::split_probe_source(), options, nvrtc_options, more, false, false);
    return again.ok ? std::optional(std::move(again.lowered)) : std::nullopt;
  };
  std::vector<std::optional<Signature>> read = detail::read_signatures(probed_types, pass.lowered, lower);
  for (std::size_t i = 0; i < probed.size(); ++i) program->kernels[probed[i]].signature = std::move(read[i]);
  if (!missing.empty()) {
    read = detail::read_signatures(missing_types, {}, lower);
    for (std::size_t i = 0; i < missing.size(); ++i) program->kernels[missing[i]].signature = std::move(read[i]);
  }
  return program;
}

// `options` plus jitbridge's device headers that the source names and the caller did not give.
const CompileOptions& with_device_headers(std::string_view source, const CompileOptions& options,
                                          CompileOptions& storage) {
  const CompileOptions* out = &options;
  for (const Header& h : detail::builtin_device_headers()) {
    if (source.find(h.name) == std::string_view::npos) continue;
    bool given = false;
    for (const Header& mine : out->headers) given = given || mine.name == h.name;
    if (given) continue;
    if (out == &options) storage = options;
    storage.headers.push_back(h);
    out = &storage;
  }
  return *out;
}

// `program` with this call's request (Program::request); a memory entry without one adopts it.
std::shared_ptr<const Program> requested(Cache& cache, const std::string& key, std::shared_ptr<const Program> program,
                                         std::string_view source, const CompileOptions& given) {
  const bool had = program->request != nullptr;
  std::shared_ptr<const Program> out = detail::with_request(std::move(program), source, given);
  if (!had) cache.impl().adopt_request(key, out->request);
  return out;
}

}  // namespace

std::shared_ptr<const Program> compile(std::string_view source, const CompileOptions& given, Cache* cache) {
  CompileOptions storage, shim_storage;
  const CompileOptions& keyed = with_device_headers(source, given, storage);
  const std::vector<const Header*> shims = detail::std_shims_for(keyed);
  Cache& c = cache ? *cache : Cache::global();
  // The key names the NVRTC file the search locates; a hit loads no NVRTC (docs/DESIGN.md).
  std::string arch = keyed.arch;
  std::vector<std::string> nvrtc_options = detail::effective_options(keyed, arch);
  const std::string* nvrtc = &nvrtc_identity();
  std::string key = detail::relocatable_key(cache_key(source, keyed, nvrtc_options, *nvrtc, shims), nvrtc_options);
  if (std::shared_ptr<const Program> hit = c.impl().lookup(key)) return requested(c, key, hit, source, given);
  // A miss: one process (or thread) compiles the key, the others wait for its entry (cache_lock.hpp);
  // taken before NVRTC loads, so a waiter that gets the entry never loads it. Released by its
  // destructor as "none" on every path that stores nothing (a compile error included).
  detail::CacheLock turn;
  // A user's own -create-pch/-use-pch files hide which headers were read: not cached (docs/DESIGN.md, "Cache").
  if (detail::pch_cacheable(nvrtc_options))
    if (std::shared_ptr<const Program> hit = c.impl().take_turn(key, turn))
      return requested(c, key, hit, source, given);

  nvrtc_api();  // loads NVRTC: throws CudaNotFoundError when none is usable
  if (nvrtc_identity() != *nvrtc) {
    // The located file proved unusable and the search went on: key and headers follow the loaded one.
    turn.release(false);
    arch = keyed.arch;
    nvrtc_options = detail::effective_options(keyed, arch);
    nvrtc = &nvrtc_identity();
    key = detail::relocatable_key(cache_key(source, keyed, nvrtc_options, *nvrtc, shims), nvrtc_options);
    if (std::shared_ptr<const Program> hit = c.impl().lookup(key)) return requested(c, key, hit, source, given);
    if (detail::pch_cacheable(nvrtc_options))
      if (std::shared_ptr<const Program> hit = c.impl().take_turn(key, turn))
        return requested(c, key, hit, source, given);
  }
  detail::check_arch_supported(arch);
  const CompileOptions& options = detail::with_std_headers(keyed, shims, shim_storage);  // copied on a miss only
  std::optional<std::vector<std::string>> headers_read;
  c.impl().count_compile();
  std::shared_ptr<Program> program = build(source, options, nvrtc_options, arch, headers_read);
  program->request = detail::make_request(source, given);
  if (headers_read && detail::pch_cacheable(nvrtc_options)) {
    detail::CacheRecord record;
    record.recorded_ns = detail::now_ns();
    record.deps = detail::record_dependencies(*headers_read, options.headers,
                                              detail::include_search_dirs(nvrtc_options), record.cwd);
    record.program = program;
    c.impl().store(key, std::move(record));
    turn.release(true);
  }
  return program;
}

}  // namespace jitbridge
