// link.cpp — link(): nvJitLink runs over programs, LTO-IR, PTX, cubins, fatbins and device libraries, with the device runtime when needed, checked at every call, cached.
#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <set>

#include "cache_internal.hpp"
#include "cache_lock.hpp"
#include "jit_internal.hpp"
#include "jitbridge/cache.hpp"
#include "jitbridge/cuda_search.hpp"
#include "jitbridge/link.hpp"
#include "jitbridge/nvjitlink_api.hpp"
#include "link_internal.hpp"

namespace jitbridge {
namespace {

using Kind = LinkInput::Kind;

// Bump when the meaning of a linked entry changes.
constexpr const char* kLinkKeyVersion = "jitbridge-link-key-1";

nvJitLinkInputType input_type(Kind kind) {
  switch (kind) {
    case Kind::cubin: return NVJITLINK_INPUT_CUBIN;
    case Kind::ptx: return NVJITLINK_INPUT_PTX;
    case Kind::ltoir: return NVJITLINK_INPUT_LTOIR;
    case Kind::fatbin: return NVJITLINK_INPUT_FATBIN;
    case Kind::library: return NVJITLINK_INPUT_LIBRARY;
    case Kind::object: return NVJITLINK_INPUT_OBJECT;
    case Kind::program: break;
  }
  return NVJITLINK_INPUT_ANY;
}

// One nvJitLink handle, destroyed on every path.
class Handle {
 public:
  Handle(const NvJitLinkApi& api, const std::vector<std::string>& options) : api_(api) {
    std::vector<const char*> argv;
    for (const std::string& o : options) argv.push_back(o.c_str());
    nvJitLinkResult rc = api_.Create(&h_, static_cast<std::uint32_t>(argv.size()), argv.data());
    if (rc != NVJITLINK_SUCCESS) {
      LinkError::Details d;
      d.code = rc;
      d.error_log = fmt::format("nvJitLinkCreate failed with code {} for the options {}", static_cast<int>(rc),
                                fmt::join(options, " "));
      h_ = nullptr;
      throw LinkError(std::move(d));
    }
  }
  ~Handle() {
    if (h_) api_.Destroy(&h_);
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  nvJitLinkHandle get() const { return h_; }

  std::string log(bool error) const {
    std::size_t size = 0;
    nvJitLinkResult rc = error ? api_.GetErrorLogSize(h_, &size) : api_.GetInfoLogSize(h_, &size);
    if (rc != NVJITLINK_SUCCESS || size == 0) return {};
    std::string out(size, '\0');
    rc = error ? api_.GetErrorLog(h_, out.data()) : api_.GetInfoLog(h_, out.data());
    if (rc != NVJITLINK_SUCCESS) return {};
    while (!out.empty() && (out.back() == '\0' || out.back() == '\n')) out.pop_back();
    return out;
  }
  [[noreturn]] void fail(nvJitLinkResult rc, std::string input) const {
    LinkError::Details d;
    d.code = rc;
    d.error_log = log(true);
    d.info_log = log(false);
    d.input = std::move(input);
    d.undefined_mangled = detail::undefined_in_log(d.error_log);
    for (const std::string& s : d.undefined_mangled) d.undefined.push_back(detail::demangle(s));
    throw LinkError(std::move(d));
  }

 private:
  const NvJitLinkApi& api_;
  nvJitLinkHandle h_ = nullptr;
};

// "sm_90" from "sm_90", "sm_90a"...: the link arch must be a real target.
void check_link_arch(const std::string& arch) {
  detail::validate_arch(arch);
  if (arch.rfind("sm_", 0) != 0)
    throw std::invalid_argument(
        fmt::format("arch: '{}' is a virtual target; a link makes a cubin, give a real one (sm_XY)", arch));
}

bool references_device_runtime(const detail::RawLinkInput& in) {
  if (in.kind == Kind::cubin) {
    try {
      for (const std::string& s : detail::cubin_undefined_symbols(in.bytes))
        if (detail::is_device_runtime_symbol(s)) return true;
    } catch (const std::exception&) {
      return false;  // not an ELF image: nvJitLink will say so
    }
    return false;
  }
  if (in.kind == Kind::ptx)
    return in.bytes.find("cudaLaunchDevice") != std::string_view::npos ||
           in.bytes.find("cudaGetParameterBuffer") != std::string_view::npos ||
           in.bytes.find("__cudaCDP") != std::string_view::npos;
  return false;
}

std::string display_name(const LinkInput& in, std::size_t i) {
  if (!in.name.empty()) return in.name;
  return fmt::format("inputs[{}]", i);
}

}  // namespace

LinkError::LinkError(Details details)
    : std::runtime_error([&] {
        std::string what = "link failed";
        if (!details.input.empty()) what += fmt::format(" at input '{}'", details.input);
        for (std::size_t i = 0; i < details.undefined.size(); ++i) {
          const std::string& d = details.undefined[i];
          const std::string& m = details.undefined_mangled[i];
          what += fmt::format("{} undefined reference to `{}`", i == 0 ? ":" : ";", d);
          if (d != m) what += fmt::format(" ({})", m);
        }
        bool devrt = false;
        for (const std::string& m : details.undefined_mangled) devrt = devrt || detail::is_device_runtime_symbol(m);
        if (devrt)
          what += "\n  the CUDA device runtime defines these (dynamic parallelism): link it with "
                  "device_runtime=always, or see 'python -m jitbridge doctor' for where it was looked for";
        if (!details.error_log.empty()) what += "\n" + details.error_log;
        return what;
      }()),
      details_(std::move(details)) {}

const char* link_kind_name(Kind kind) noexcept {
  switch (kind) {
    case Kind::program: return "program";
    case Kind::cubin: return "cubin";
    case Kind::ptx: return "ptx";
    case Kind::ltoir: return "ltoir";
    case Kind::fatbin: return "fatbin";
    case Kind::library: return "library";
    case Kind::object: return "object";
  }
  return "?";
}

std::optional<Kind> parse_link_kind(std::string_view name) noexcept {
  for (Kind k : {Kind::program, Kind::cubin, Kind::ptx, Kind::ltoir, Kind::fatbin, Kind::library, Kind::object})
    if (name == link_kind_name(k)) return k;
  return std::nullopt;
}

LinkInput LinkInput::from_program(std::shared_ptr<const Program> program, std::string name) {
  LinkInput in;
  in.kind = Kind::program;
  in.program = std::move(program);
  in.name = std::move(name);
  return in;
}

LinkInput LinkInput::from_bytes(Kind kind, std::string bytes, std::string name) {
  LinkInput in;
  in.kind = kind;
  in.bytes = std::move(bytes);
  in.name = std::move(name);
  return in;
}

LinkInput LinkInput::from_file(const std::string& path, std::optional<Kind> kind) {
  if (!kind) {
    static const std::pair<const char*, Kind> kExtensions[] = {
        {".cubin", Kind::cubin}, {".ptx", Kind::ptx},     {".ltoir", Kind::ltoir},
        {".fatbin", Kind::fatbin}, {".a", Kind::library}, {".o", Kind::object}};
    for (const auto& [ext, k] : kExtensions) {
      std::string_view e(ext);
      if (path.size() > e.size() && path.compare(path.size() - e.size(), e.size(), e) == 0) kind = k;
    }
    if (!kind)
      throw std::invalid_argument(fmt::format(
          "{}: the kind of input is not known from its extension (.cubin, .ptx, .ltoir, .fatbin, .a, .o); give it", path));
  }
  if (*kind == Kind::program) throw std::invalid_argument(fmt::format("{}: a file cannot be a program input", path));
  LinkInput in;
  in.kind = *kind;
  in.name = path;
  if (!detail::read_file(path, in.bytes)) throw std::invalid_argument(fmt::format("{}: cannot be read", path));
  return in;
}

namespace detail {

bool is_device_runtime_symbol(std::string_view s) {
  for (std::string_view prefix : {"__cudaCDP", "cudaGetParameterBuffer", "cudaLaunchDevice", "cudaCGGetIntrinsicHandle",
                                  "cudaCGSynchronize", "cudaDeviceSynchronize", "__cudaDeviceSynchronize"})
    if (s.substr(0, prefix.size()) == prefix) return true;
  return false;
}

void drop_device_runtime_kernels(std::vector<std::string>& symbols) {
  symbols.erase(std::remove_if(symbols.begin(), symbols.end(),
                               [](const std::string& s) {
                                 return s.rfind("__nv_static_", 0) == 0 &&
                                        s.find("_cuda_device_runtime_cu_") != std::string::npos;
                               }),
                symbols.end());
}

std::vector<std::string> undefined_in_log(std::string_view log) {
  std::vector<std::string> out;
  for (std::string_view line : split_lines(log)) {
    std::size_t at = std::string_view::npos;
    for (std::string_view marker : {"ndefined reference to '", "nresolved extern function '",
                                    "nresolved extern variable '"}) {
      at = line.find(marker);
      if (at != std::string_view::npos) {
        at += marker.size();
        break;
      }
    }
    if (at == std::string_view::npos) continue;
    std::size_t end = line.find('\'', at);
    if (end == std::string_view::npos || end == at) continue;
    std::string name(line.substr(at, end - at));
    bool seen = false;
    for (const std::string& o : out) seen = seen || o == name;
    if (!seen) out.push_back(std::move(name));
  }
  return out;
}

RawLinkResult run_link(const std::vector<RawLinkInput>& inputs, const std::string& arch, bool lto,
                       const std::vector<std::string>& options, LinkOptions::DeviceRuntime devrt) {
  const NvJitLinkApi& api = nvjitlink_api();
  bool with_devrt = devrt == LinkOptions::DeviceRuntime::always;
  if (devrt == LinkOptions::DeviceRuntime::automatic)
    for (const RawLinkInput& in : inputs) with_devrt = with_devrt || references_device_runtime(in);
  std::vector<std::string> argv{"-arch=" + arch};
  if (lto) argv.push_back("-lto");
  argv.insert(argv.end(), options.begin(), options.end());

  auto attempt = [&](bool devrt_now) {
    Handle h(api, argv);
    for (const RawLinkInput& in : inputs) {
      nvJitLinkResult rc = api.AddData(h.get(), input_type(in.kind), in.bytes.data(), in.bytes.size(), in.name.c_str());
      if (rc != NVJITLINK_SUCCESS) h.fail(rc, in.name);  // AddData can fail while Complete "succeeds"
    }
    if (devrt_now) {
      const ComponentPick& pick = device_runtime_pick();
      if (!pick.found) throw CudaNotFoundError(not_found_message(pick));
      nvJitLinkResult rc = api.AddFile(h.get(), NVJITLINK_INPUT_LIBRARY, pick.path.c_str());
      if (rc != NVJITLINK_SUCCESS) h.fail(rc, pick.path);
    }
    nvJitLinkResult rc = api.Complete(h.get());
    if (rc != NVJITLINK_SUCCESS) h.fail(rc, "");
    std::size_t size = 0;
    rc = api.GetLinkedCubinSize(h.get(), &size);
    if (rc != NVJITLINK_SUCCESS) h.fail(rc, "");
    if (size == 0) h.fail(NVJITLINK_ERROR_INTERNAL, "");
    RawLinkResult out;
    out.cubin.assign(size, '\0');
    rc = api.GetLinkedCubin(h.get(), out.cubin.data());
    if (rc != NVJITLINK_SUCCESS) h.fail(rc, "");
    out.info_log = h.log(false);
    out.device_runtime = devrt_now;
    return out;
  };
  if (with_devrt || devrt != LinkOptions::DeviceRuntime::automatic) return attempt(with_devrt);
  try {
    return attempt(false);
  } catch (const LinkError& e) {
    // LTO-IR cannot be inspected beforehand: link the device runtime when the link asked for it.
    bool wanted = false;
    for (const std::string& s : e.details().undefined_mangled) wanted = wanted || is_device_runtime_symbol(s);
    if (!wanted || !device_runtime_pick().found) throw;
    return attempt(true);
  }
}

}  // namespace detail

std::shared_ptr<const Program> link(const std::vector<LinkInput>& inputs, const LinkOptions& options, Cache* cache) {
  if (inputs.empty()) throw std::invalid_argument("inputs: nothing to link (give at least one input)");
  std::string arch = options.arch;
  bool any_ltoir = false;
  std::vector<detail::RawLinkInput> raw;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const LinkInput& in = inputs[i];
    const std::string label = fmt::format("inputs[{}]", i);
    if (in.kind == Kind::program) {
      if (!in.program) throw std::invalid_argument(label + ": the program is null");
      const Program& p = *in.program;
      if (p.link_input.empty())
        throw std::invalid_argument(fmt::format(
            "{}: the program was not compiled for linking; compile it with -rdc=true or -dc (or -dlto for "
            "link-time optimisation)",
            label));
      if (arch.empty()) arch = p.arch;
      if (p.arch != arch)
        throw std::invalid_argument(
            fmt::format("{}: the program was compiled for {}, the link is for {}", label, p.arch, arch));
      any_ltoir = any_ltoir || p.link_input_is_ltoir;
      raw.push_back({p.link_input_is_ltoir ? Kind::ltoir : Kind::cubin, p.link_input, display_name(in, i)});
    } else {
      if (in.bytes.empty()) throw std::invalid_argument(fmt::format("{} ({}): empty", label, link_kind_name(in.kind)));
      any_ltoir = any_ltoir || in.kind == Kind::ltoir;
      raw.push_back({in.kind, in.bytes, display_name(in, i)});
    }
  }
  if (arch.empty()) arch = default_arch();
  check_link_arch(arch);
  if (options.lto == false && any_ltoir)
    throw std::invalid_argument("lto: an input is LTO-IR, which links only with link-time optimisation (lto=True)");
  const bool lto = options.lto.value_or(any_ltoir);

  Cache& c = cache ? *cache : Cache::global();
  detail::Hasher h;
  h.field(kLinkKeyVersion).field(JITBRIDGE_VERSION).field(nvjitlink_identity());
  const ComponentPick& devrt = device_runtime_pick();
  h.field(devrt.found ? library_identity(devrt.path) : std::string("no device runtime"));
  h.field(arch).field(static_cast<std::uint64_t>(lto)).field(static_cast<std::uint64_t>(options.device_runtime));
  h.field(static_cast<std::uint64_t>(options.options.size()));
  for (const std::string& o : options.options) h.field(o);
  h.field(static_cast<std::uint64_t>(inputs.size()));
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    h.field(static_cast<std::uint64_t>(raw[i].kind)).field(raw[i].name).field(detail::hash_hex(raw[i].bytes));
    if (const Program* p = inputs[i].program.get()) {  // what the result takes from it besides the bytes
      h.field(static_cast<std::uint64_t>(p->kernels.size()));
      for (const Kernel& k : p->kernels)
        h.field(k.name).field(k.lowered_name).field(k.signature ? k.signature->to_string() : std::string("?"));
      h.field(static_cast<std::uint64_t>(p->lowered_names.size()));
      for (const auto& [e, l] : p->lowered_names) h.field(e).field(l);
    }
  }
  const std::string key = h.hex();
  if (std::shared_ptr<const Program> hit = c.impl().lookup(key)) return hit;
  detail::CacheLock turn;  // as in compile(): one process links a key, the others wait for its entry
  if (std::shared_ptr<const Program> hit = c.impl().take_turn(key, turn)) return hit;

  c.impl().count_link();
  detail::RawLinkResult linked = detail::run_link(raw, arch, lto, options.options, options.device_runtime);
  auto program = std::make_shared<Program>();
  program->arch = arch;
  program->cubin = std::move(linked.cubin);
  program->log = std::move(linked.info_log);
  program->options = {"-arch=" + arch};
  if (lto) program->options.push_back("-lto");
  program->options.insert(program->options.end(), options.options.begin(), options.options.end());
  program->linked = true;

  std::map<std::string, const Kernel*> known;
  for (const LinkInput& in : inputs) {
    if (!in.program) continue;
    for (const Kernel& k : in.program->kernels) known.emplace(k.lowered_name, &k);
    for (const auto& pair : in.program->lowered_names) program->lowered_names.push_back(pair);
  }
  const std::map<std::string, Resources> recorded = detail::cubin_resources(program->cubin);
  std::vector<std::string> symbols = detail::cubin_kernels(program->cubin);
  detail::drop_device_runtime_kernels(symbols);
  for (const std::string& symbol : symbols) {
    Kernel k;
    if (auto it = known.find(symbol); it != known.end()) {
      k = *it->second;
    } else {
      k.lowered_name = symbol;
      k.name = symbol.rfind("_Z", 0) == 0 ? detail::demangle(symbol) : symbol;
    }
    if (auto rec = recorded.find(symbol); rec != recorded.end()) {
      const std::size_t spill_store = k.resources.spill_store_bytes, spill_load = k.resources.spill_load_bytes;
      k.resources = rec->second;  // the linked image's own numbers (LTO recompiles)
      if (!lto) {
        k.resources.spill_store_bytes = spill_store;
        k.resources.spill_load_bytes = spill_load;
      }
    }
    program->kernels.push_back(std::move(k));
  }
  detail::CacheRecord record;
  record.recorded_ns = detail::now_ns();
  record.program = program;
  c.impl().store(key, std::move(record));
  turn.release(true);
  return program;
}

}  // namespace jitbridge
