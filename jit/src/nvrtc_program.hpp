// nvrtc_program.hpp — RAII wrapper over one nvrtcProgram: create, add names, compile, read results.
#pragma once

#include <nvrtc.h>

#include <string>
#include <vector>

#include "jitbridge/jit.hpp"
#include "jitbridge/nvrtc_api.hpp"

namespace jitbridge::detail {

class NvrtcProgram {
 public:
  // Throws CudaNotFoundError when no NVRTC was found, NvrtcError when it cannot create the program.
  NvrtcProgram(const std::string& source, const std::string& name, const std::vector<Header>& headers);
  ~NvrtcProgram();  // never throws
  NvrtcProgram(const NvrtcProgram&) = delete;
  NvrtcProgram& operator=(const NvrtcProgram&) = delete;

  void add_name_expression(const std::string& expression);
  // true on success; false when the source (or an option) was rejected: see log().
  // Throws NvrtcError for failures of NVRTC itself.
  bool compile(const std::vector<std::string>& options);
  std::string log() const;
  std::string cubin() const;  // empty when none was built
  std::string ptx() const;
  std::string ltoir() const;  // empty unless compiled with -dlto
  // The lowered name of a name expression, or "" when NVRTC has none for it.
  std::string lowered_name(const std::string& expression) const;
  // After a compile that asked for -create-pch: nvrtcGetPCHCreateStatus, and the PCH heap size the
  // program needed (0 when unknown). NVRTC_ERROR_NO_PCH_CREATE_ATTEMPTED when the NVRTC lacks the call.
  nvrtcResult pch_create_status() const;
  std::size_t pch_heap_required() const;

 private:
  const NvrtcApi& api_;
  nvrtcProgram prog_ = nullptr;
};

// Throws NvrtcError naming `call` when `code` is not NVRTC_SUCCESS.
void check_nvrtc(nvrtcResult code, const char* call);

}  // namespace jitbridge::detail
