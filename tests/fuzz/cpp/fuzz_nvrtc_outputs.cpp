// fuzz_nvrtc_outputs.cpp — libFuzzer target: the parsers of what NVRTC hands back (cubin ELF images, ptxas -v logs,
// --fdevice-time-trace JSON, compile logs, demangled names) on fuzzed bytes. They read compiler output, not user
// input, so the contract checked is robustness: each returns or throws std::runtime_error (cubin_kernels,
// cubin_resources, trace_headers), never crashes, reads out of bounds or throws anything else.
#include <cstring>

#include "fuzz_support.hpp"
#include "jit_internal.hpp"

using namespace jitbridge;

namespace {

template <class F>
void robust(const char* what, F&& f) {
  try {
    f();
  } catch (const std::runtime_error&) {
  } catch (const std::exception& e) {
    jbfuzz::finding("bad-exception", std::string(what) + " threw " + e.what());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view in(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 6) {
    case 0:
      robust("cubin_kernels", [&] { (void)detail::cubin_kernels(in); });
      robust("cubin_resources", [&] { (void)detail::cubin_resources(in); });
      break;
    case 1: {
      std::string rest;
      robust("parse_ptxas_info", [&] { (void)detail::parse_ptxas_info(in, &rest); });
      break;
    }
    case 2: robust("trace_headers", [&] { (void)detail::trace_headers(in); }); break;
    case 3: {
      // A compile log against a source: the first half of the input is the log, the rest the source.
      const std::string_view log = in.substr(0, in.size() / 2), source = in.substr(in.size() / 2);
      std::vector<detail::KernelCandidate> kernels;
      robust("scan_kernels", [&] { kernels = detail::scan_kernels(source); });
      robust("parse_diagnostics", [&] {
        // Name expressions: two fixed ones (the seed name-map-log names the second) and a fuzzed one.
        const std::vector<std::string> expressions = {"scale<float>", "scale<flaot>",
                                                      std::string(source.substr(0, source.size() % 17))};
        const CompileError::Details d = detail::parse_diagnostics(log, source, "kernel.cu", kernels, expressions);
        (void)detail::format_compile_error(d);
      });
      break;
    }
    case 4:
      robust("demangle", [&] { (void)detail::demangle(std::string(in)); });
      robust("probe_parameter_count", [&] { (void)detail::probe_parameter_count(in); });
      robust("split_top_level", [&] { (void)detail::split_top_level(in); });
      robust("parse_param", [&] { (void)detail::parse_param(in); });
      break;
    default:
      robust("number_before/after", [&] {
        const std::size_t cut = in.empty() ? 0 : static_cast<unsigned char>(in[0]) % in.size();
        (void)detail::number_before(in.substr(cut), in.substr(0, cut));
        (void)detail::number_after(in.substr(cut), in.substr(0, cut));
        (void)detail::text_between(in, in.substr(0, cut), in.substr(cut, 1));
      });
  }
  return 0;
}
