// fake_params.cpp — reads kernel parameter layouts (EIATTR_KPARAM_INFO) from a cubin, for the fake driver's
// kernelParams launches: the driver copies each parameter's size from its pointer, so it must know the sizes.
#include "fake_params.h"

#include <elf.h>

#include <cstdint>
#include <cstring>

namespace fake_cuda {
namespace {

constexpr unsigned char kFormatSized = 0x04;
constexpr unsigned char kAttrParamInfo = 0x17;  // EIATTR_KPARAM_INFO: {u32 index, u16 ordinal, u16 offset, u32 flags}

template <class T>
T load(const unsigned char* at) {
  T value;
  std::memcpy(&value, at, sizeof value);
  return value;
}

}  // namespace

std::map<std::string, std::vector<KernelParam>> cubin_params(const void* image) {
  std::map<std::string, std::vector<KernelParam>> out;
  const auto* base = static_cast<const unsigned char*>(image);
  // Byte by byte, so that a short non-ELF image is never read past its first differing byte.
  for (int i = 0; i < SELFMAG; ++i)
    if (!base || base[i] != static_cast<unsigned char>(ELFMAG[i])) return out;
  const auto ehdr = load<Elf64_Ehdr>(base);
  if (ehdr.e_ident[EI_CLASS] != ELFCLASS64 || ehdr.e_shentsize != sizeof(Elf64_Shdr) || ehdr.e_shstrndx >= ehdr.e_shnum)
    return out;
  auto section = [&](unsigned i) { return load<Elf64_Shdr>(base + ehdr.e_shoff + std::size_t{i} * sizeof(Elf64_Shdr)); };
  const Elf64_Shdr names = section(ehdr.e_shstrndx);
  for (unsigned i = 0; i < ehdr.e_shnum; ++i) {
    const Elf64_Shdr sh = section(i);
    if (sh.sh_name >= names.sh_size) continue;
    const char* name = reinterpret_cast<const char*>(base + names.sh_offset + sh.sh_name);
    if (std::strncmp(name, ".nv.info.", 9) != 0) continue;
    std::vector<KernelParam>& params = out[name + 9];
    const unsigned char* info = base + sh.sh_offset;
    for (std::size_t p = 0; p + 4 <= sh.sh_size;) {
      const unsigned char format = info[p], attribute = info[p + 1];
      const std::size_t size = format == kFormatSized ? load<std::uint16_t>(info + p + 2) : 0;
      if (p + 4 + size > sh.sh_size) break;
      if (attribute == kAttrParamInfo && size == 12) {
        const auto ordinal = load<std::uint16_t>(info + p + 8);
        const auto offset = load<std::uint16_t>(info + p + 10);
        const auto flags = load<std::uint32_t>(info + p + 12);
        if (params.size() <= ordinal) params.resize(std::size_t{ordinal} + 1);
        params[ordinal] = {offset, flags >> 18};  // the size in bytes: the flags' top 14 bits
      }
      p += 4 + size;
    }
  }
  return out;
}

}  // namespace fake_cuda
