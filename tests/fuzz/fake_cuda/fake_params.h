// fake_params.h — the fake driver's knowledge of a kernel's parameters, read from its cubin as a real driver does.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

namespace fake_cuda {

// One kernel parameter: where it lies in the parameter space and how many bytes it takes.
struct KernelParam {
  std::size_t offset = 0, size = 0;
};

// Each kernel's parameters in parameter order, by kernel name, as a cubin's .nv.info.<kernel> sections record them
// (EIATTR_KPARAM_INFO). Empty for an image that is no 64-bit ELF (PTX, a made-up image: read no further than the
// first byte that differs from ELF's magic). Like the driver it takes no size: an ELF image is trusted as it is.
std::map<std::string, std::vector<KernelParam>> cubin_params(const void* image);

}  // namespace fake_cuda
