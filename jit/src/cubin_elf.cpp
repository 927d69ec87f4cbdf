// cubin_elf.cpp — reads a cubin's ELF image: its kernels (entry functions), the resources the
// compiler recorded for each (.nv.info attributes and per-kernel shared/constant sections), and
// whether it is relocatable with which symbols it leaves to the linker.
#include <elf.h>

#include <cstring>
#include <stdexcept>

#include "jit_internal.hpp"
#include "jitbridge/link.hpp"
#include "link_internal.hpp"

namespace jitbridge::detail {
namespace {

// NVIDIA marks kernel entry symbols with this st_other bit (STO_CUDA_ENTRY).
constexpr unsigned char kCudaEntry = 0x10;
// .nv.info attribute formats and the attributes read here (as cuobjdump names them).
constexpr unsigned char kFormatNone = 0x01, kFormatByte = 0x02, kFormatHalf = 0x03, kFormatSized = 0x04;
constexpr unsigned char kAttrRegCount = 0x2f;     // EIATTR_REGCOUNT: {symbol, registers}
constexpr unsigned char kAttrFrameSize = 0x11;    // EIATTR_FRAME_SIZE: {symbol, bytes}
constexpr unsigned char kAttrNumBarriers = 0x4c;  // EIATTR_NUM_BARRIERS (per kernel, byte value)
// Since sm_90 a kernel's .nv.shared section also spans the 1 KiB the hardware reserves per block,
// marked by a .nv.shared.reserved.0 section; ptxas's "bytes smem" excludes it.
constexpr std::size_t kReservedShared = 1024;

template <class T>
T read_at(std::string_view image, std::size_t offset) {
  if (offset > image.size() || image.size() - offset < sizeof(T)) throw std::runtime_error("cubin is truncated");
  T value;
  std::memcpy(&value, image.data() + offset, sizeof(T));
  return value;
}

class Elf {
 public:
  explicit Elf(std::string_view image) : image_(image) {
    ehdr_ = read_at<Elf64_Ehdr>(image, 0);
    if (std::memcmp(ehdr_.e_ident, ELFMAG, SELFMAG) != 0 || ehdr_.e_ident[EI_CLASS] != ELFCLASS64)
      throw std::runtime_error("not a 64-bit ELF cubin");
  }
  unsigned sections() const { return ehdr_.e_shnum; }
  unsigned type() const { return ehdr_.e_type; }
  Elf64_Shdr section(unsigned i) const {
    return read_at<Elf64_Shdr>(image_, ehdr_.e_shoff + std::size_t{i} * ehdr_.e_shentsize);
  }
  std::string_view string(const Elf64_Shdr& table, std::size_t offset) const {
    std::size_t at = table.sh_offset + offset;
    if (at >= image_.size()) throw std::runtime_error("cubin string out of range");
    return {image_.data() + at, ::strnlen(image_.data() + at, image_.size() - at)};
  }
  std::string_view section_name(const Elf64_Shdr& s) const { return string(section(ehdr_.e_shstrndx), s.sh_name); }
  std::string_view contents(const Elf64_Shdr& s) const {
    if (s.sh_type == SHT_NOBITS) return {};
    if (s.sh_offset > image_.size() || image_.size() - s.sh_offset < s.sh_size)
      throw std::runtime_error("cubin section out of range");
    return image_.substr(s.sh_offset, s.sh_size);
  }
  // Calls f(symbol, name) for each entry of the symbol tables, in table order.
  template <class F>
  void for_each_symbol(F&& f) const {
    for (unsigned i = 0; i < sections(); ++i) {
      Elf64_Shdr sh = section(i);
      if (sh.sh_type != SHT_SYMTAB || sh.sh_entsize == 0) continue;
      Elf64_Shdr strtab = section(sh.sh_link);
      for (std::size_t k = 0; k < sh.sh_size / sh.sh_entsize; ++k) {
        auto sym = read_at<Elf64_Sym>(image_, sh.sh_offset + k * sh.sh_entsize);
        f(sym, string(strtab, sym.st_name));
      }
    }
  }
  // Names of the global symbols the image references but does not define, in table order.
  std::vector<std::string> undefined() const {
    std::vector<std::string> out;
    for_each_symbol([&](const Elf64_Sym& sym, std::string_view name) {
      if (sym.st_shndx == SHN_UNDEF && ELF64_ST_BIND(sym.st_info) == STB_GLOBAL && !name.empty())
        out.emplace_back(name);
    });
    return out;
  }
  // Symbol names by index, and the entry functions among them in table order.
  void symbols(std::vector<std::string>& names, std::vector<std::string>* entries) const {
    for_each_symbol([&](const Elf64_Sym& sym, std::string_view name) {
      names.emplace_back(name);
      if (entries && ELF64_ST_TYPE(sym.st_info) == STT_FUNC && (sym.st_other & kCudaEntry))
        entries->push_back(names.back());
    });
  }

 private:
  std::string_view image_;
  Elf64_Ehdr ehdr_;
};

// Calls f(attribute, payload) for each entry of a .nv.info section.
template <class F>
void for_each_attribute(std::string_view info, F&& f) {
  std::size_t p = 0;
  while (p + 4 <= info.size()) {
    const auto format = static_cast<unsigned char>(info[p]);
    const auto attribute = static_cast<unsigned char>(info[p + 1]);
    if (format == kFormatSized) {
      std::uint16_t size = read_at<std::uint16_t>(info, p + 2);
      if (p + 4 + size > info.size()) return;
      f(attribute, info.substr(p + 4, size));
      p += 4 + size;
    } else if (format == kFormatHalf || format == kFormatByte || format == kFormatNone) {
      f(attribute, info.substr(p + 2, 2));
      p += 4;
    } else {
      return;  // an encoding this reader does not know: stop rather than misread
    }
  }
}

}  // namespace

bool cubin_is_relocatable(std::string_view cubin) { return Elf(cubin).type() == ET_REL; }

std::vector<std::string> cubin_undefined_symbols(std::string_view cubin) { return Elf(cubin).undefined(); }

std::vector<std::string> cubin_kernels(std::string_view cubin) {
  Elf elf(cubin);
  std::vector<std::string> names, entries;
  elf.symbols(names, &entries);
  return entries;
}

std::map<std::string, Resources> cubin_resources(std::string_view cubin) {
  Elf elf(cubin);
  std::vector<std::string> names, entries;
  elf.symbols(names, &entries);
  std::map<std::string, Resources> out;
  for (const std::string& k : entries) out[k].known = true;
  bool reserved_shared = false;
  for (unsigned i = 0; i < elf.sections(); ++i)
    reserved_shared = reserved_shared || elf.section_name(elf.section(i)) == ".nv.shared.reserved.0";
  for (unsigned i = 0; i < elf.sections(); ++i) {
    Elf64_Shdr sh = elf.section(i);
    std::string_view name = elf.section_name(sh);
    if (name == ".nv.info") {
      for_each_attribute(elf.contents(sh), [&](unsigned char attribute, std::string_view payload) {
        if ((attribute != kAttrRegCount && attribute != kAttrFrameSize) || payload.size() != 8) return;
        auto symbol = read_at<std::uint32_t>(payload, 0);
        auto value = read_at<std::uint32_t>(payload, 4);
        if (symbol >= names.size()) return;
        auto it = out.find(names[symbol]);
        if (it == out.end()) return;
        if (attribute == kAttrRegCount) it->second.registers = static_cast<int>(value);
        else it->second.local_bytes = value;
      });
    } else if (name.substr(0, 9) == ".nv.info.") {
      auto it = out.find(std::string(name.substr(9)));
      if (it == out.end()) continue;
      for_each_attribute(elf.contents(sh), [&](unsigned char attribute, std::string_view payload) {
        if (attribute == kAttrNumBarriers) it->second.barriers = static_cast<unsigned char>(payload[0]);
      });
    } else if (name.substr(0, 11) == ".nv.shared." && name != ".nv.shared.reserved.0") {
      auto it = out.find(std::string(name.substr(11)));
      if (it == out.end()) continue;
      std::size_t bytes = sh.sh_size;
      if (reserved_shared && bytes >= kReservedShared) bytes -= kReservedShared;
      it->second.shared_bytes = bytes;
    } else if (name.substr(0, 14) == ".nv.constant0.") {
      auto it = out.find(std::string(name.substr(14)));
      if (it != out.end()) it->second.const_bytes = sh.sh_size;
    }
  }
  return out;
}

}  // namespace jitbridge::detail

namespace jitbridge {

bool is_relocatable_cubin(std::string_view image) noexcept {
  try {
    return detail::cubin_is_relocatable(image);
  } catch (const std::exception&) {
    return false;  // not an ELF image (PTX, a fatbin): nothing the linker left undone
  }
}

}  // namespace jitbridge
