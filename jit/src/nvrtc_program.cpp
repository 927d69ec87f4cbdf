// nvrtc_program.cpp — RAII wrapper over one nvrtcProgram.
#include "nvrtc_program.hpp"

#include <fmt/format.h>

#include "jit_internal.hpp"
#include "jitbridge/nvrtc_api.hpp"

namespace jitbridge::detail {

void check_nvrtc(nvrtcResult code, const char* call) {
  if (code != NVRTC_SUCCESS)
    throw NvrtcError(fmt::format("{} failed: {}", call, nvrtc_api().nvrtcGetErrorString(code)));
}

NvrtcProgram::NvrtcProgram(const std::string& source, const std::string& name,
                           const std::vector<Header>& headers)
    : api_(nvrtc_api()) {
  std::vector<const char*> texts, names;
  for (const Header& h : headers) {
    texts.push_back(h.text.c_str());
    names.push_back(h.name.c_str());
  }
  check_nvrtc(api_.nvrtcCreateProgram(&prog_, source.c_str(), name.c_str(), static_cast<int>(headers.size()),
                                 texts.data(), names.data()),
              "nvrtcCreateProgram");
}

NvrtcProgram::~NvrtcProgram() {
  if (prog_) api_.nvrtcDestroyProgram(&prog_);
}

void NvrtcProgram::add_name_expression(const std::string& expression) {
  check_nvrtc(api_.nvrtcAddNameExpression(prog_, expression.c_str()), "nvrtcAddNameExpression");
}

bool NvrtcProgram::compile(const std::vector<std::string>& options) {
  std::vector<const char*> argv;
  for (const std::string& o : options) argv.push_back(o.c_str());
  nvrtcResult rc = api_.nvrtcCompileProgram(prog_, static_cast<int>(argv.size()), argv.data());
  if (rc == NVRTC_ERROR_COMPILATION || rc == NVRTC_ERROR_INVALID_OPTION ||
      rc == NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID)
    return false;
  check_nvrtc(rc, "nvrtcCompileProgram");
  return true;
}

std::string NvrtcProgram::log() const {
  std::size_t size = 0;
  check_nvrtc(api_.nvrtcGetProgramLogSize(prog_, &size), "nvrtcGetProgramLogSize");
  std::string out(size, '\0');
  check_nvrtc(api_.nvrtcGetProgramLog(prog_, out.data()), "nvrtcGetProgramLog");
  while (!out.empty() && (out.back() == '\0' || out.back() == '\n')) out.pop_back();
  // A header NVRTC could not open while a CUDA header set is missing: say what to install.
  if (out.find("open source file") != std::string::npos)  // "could not" in NVRTC 13, "cannot" before
    if (std::string hint = missing_headers_hint(); !hint.empty()) out += "\n" + hint;
  return out;
}

std::string NvrtcProgram::cubin() const {
  std::size_t size = 0;
  if (api_.nvrtcGetCUBINSize(prog_, &size) != NVRTC_SUCCESS || size == 0) return {};
  std::string out(size, '\0');
  check_nvrtc(api_.nvrtcGetCUBIN(prog_, out.data()), "nvrtcGetCUBIN");
  return out;
}

std::string NvrtcProgram::ptx() const {
  std::size_t size = 0;
  if (api_.nvrtcGetPTXSize(prog_, &size) != NVRTC_SUCCESS || size <= 1) return {};
  std::string out(size, '\0');
  check_nvrtc(api_.nvrtcGetPTX(prog_, out.data()), "nvrtcGetPTX");
  while (!out.empty() && out.back() == '\0') out.pop_back();
  return out;
}

std::string NvrtcProgram::ltoir() const {
  std::size_t size = 0;
  if (api_.nvrtcGetLTOIRSize(prog_, &size) != NVRTC_SUCCESS || size == 0) return {};
  std::string out(size, '\0');
  check_nvrtc(api_.nvrtcGetLTOIR(prog_, out.data()), "nvrtcGetLTOIR");
  return out;
}

std::string NvrtcProgram::lowered_name(const std::string& expression) const {
  const char* lowered = nullptr;
  if (api_.nvrtcGetLoweredName(prog_, expression.c_str(), &lowered) != NVRTC_SUCCESS || !lowered) return {};
  return lowered;
}

nvrtcResult NvrtcProgram::pch_create_status() const {
  if (!api_.nvrtcGetPCHCreateStatus) return NVRTC_ERROR_NO_PCH_CREATE_ATTEMPTED;
  return api_.nvrtcGetPCHCreateStatus(prog_);
}

std::size_t NvrtcProgram::pch_heap_required() const {
  std::size_t size = 0;
  if (!api_.nvrtcGetPCHHeapSizeRequired || api_.nvrtcGetPCHHeapSizeRequired(prog_, &size) != NVRTC_SUCCESS) return 0;
  return size;
}

}  // namespace jitbridge::detail
