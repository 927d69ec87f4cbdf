// cubin_elf.cpp — lists the kernels (entry functions) in a cubin by reading its ELF symbol table.
#include <elf.h>

#include <cstring>
#include <stdexcept>

#include "jit_internal.hpp"

namespace jitbridge::detail {
namespace {

// NVIDIA marks kernel entry symbols with this st_other bit (STO_CUDA_ENTRY).
constexpr unsigned char kCudaEntry = 0x10;

template <class T>
T read_at(std::string_view image, std::size_t offset) {
  if (offset > image.size() || image.size() - offset < sizeof(T))
    throw std::runtime_error("cubin is truncated");
  T value;
  std::memcpy(&value, image.data() + offset, sizeof(T));
  return value;
}

}  // namespace

std::vector<std::string> cubin_kernels(std::string_view cubin) {
  auto ehdr = read_at<Elf64_Ehdr>(cubin, 0);
  if (std::memcmp(ehdr.e_ident, ELFMAG, SELFMAG) != 0 || ehdr.e_ident[EI_CLASS] != ELFCLASS64)
    throw std::runtime_error("not a 64-bit ELF cubin");
  std::vector<std::string> out;
  for (unsigned i = 0; i < ehdr.e_shnum; ++i) {
    auto sh = read_at<Elf64_Shdr>(cubin, ehdr.e_shoff + std::size_t{i} * ehdr.e_shentsize);
    if (sh.sh_type != SHT_SYMTAB || sh.sh_entsize == 0) continue;
    auto strtab = read_at<Elf64_Shdr>(cubin, ehdr.e_shoff + std::size_t{sh.sh_link} * ehdr.e_shentsize);
    for (std::size_t k = 0; k < sh.sh_size / sh.sh_entsize; ++k) {
      auto sym = read_at<Elf64_Sym>(cubin, sh.sh_offset + k * sh.sh_entsize);
      if (ELF64_ST_TYPE(sym.st_info) != STT_FUNC || !(sym.st_other & kCudaEntry)) continue;
      std::size_t at = strtab.sh_offset + sym.st_name;
      if (at >= cubin.size()) throw std::runtime_error("cubin symbol name out of range");
      std::size_t len = ::strnlen(cubin.data() + at, cubin.size() - at);
      out.emplace_back(cubin.data() + at, len);
    }
  }
  return out;
}

std::size_t cubin_section_size(std::string_view cubin, std::string_view section) {
  auto ehdr = read_at<Elf64_Ehdr>(cubin, 0);
  if (std::memcmp(ehdr.e_ident, ELFMAG, SELFMAG) != 0 || ehdr.e_ident[EI_CLASS] != ELFCLASS64)
    throw std::runtime_error("not a 64-bit ELF cubin");
  auto names = read_at<Elf64_Shdr>(cubin, ehdr.e_shoff + std::size_t{ehdr.e_shstrndx} * ehdr.e_shentsize);
  for (unsigned i = 0; i < ehdr.e_shnum; ++i) {
    auto sh = read_at<Elf64_Shdr>(cubin, ehdr.e_shoff + std::size_t{i} * ehdr.e_shentsize);
    std::size_t at = names.sh_offset + sh.sh_name;
    if (at >= cubin.size()) continue;
    std::string_view name(cubin.data() + at, ::strnlen(cubin.data() + at, cubin.size() - at));
    if (name == section) return sh.sh_size;
  }
  return 0;
}

}  // namespace jitbridge::detail
