// text.cpp — small string helpers for reading compiler output (no std::regex: it is slow, and it
// relies on std::locale, which breaks when a process holds two copies of libstdc++).
#include "jit_internal.hpp"

namespace jitbridge::detail {

std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> out;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    out.push_back(text.substr(pos, end - pos));
    pos = end + 1;
  }
  return out;
}

std::optional<std::uint64_t> number_before(std::string_view line, std::string_view marker) {
  std::size_t at = line.find(marker);
  if (at == std::string_view::npos) return std::nullopt;
  std::size_t start = at;
  while (start > 0 && line[start - 1] >= '0' && line[start - 1] <= '9') --start;
  if (start == at) return std::nullopt;
  std::uint64_t value = 0;
  for (std::size_t i = start; i < at; ++i) value = value * 10 + static_cast<std::uint64_t>(line[i] - '0');
  return value;
}

std::optional<std::uint64_t> number_after(std::string_view line, std::string_view marker) {
  std::size_t at = line.find(marker);
  if (at == std::string_view::npos) return std::nullopt;
  std::size_t i = at + marker.size();
  if (i >= line.size() || line[i] < '0' || line[i] > '9') return std::nullopt;
  std::uint64_t value = 0;
  for (; i < line.size() && line[i] >= '0' && line[i] <= '9'; ++i) value = value * 10 + static_cast<std::uint64_t>(line[i] - '0');
  return value;
}

std::string_view text_between(std::string_view line, std::string_view open, std::string_view close) {
  std::size_t a = line.find(open);
  if (a == std::string_view::npos) return {};
  a += open.size();
  std::size_t b = line.find(close, a);
  return b == std::string_view::npos ? line.substr(a) : line.substr(a, b - a);
}

}  // namespace jitbridge::detail
