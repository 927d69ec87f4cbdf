// resources.cpp — reads the per-kernel resource lines that ptxas prints under -Xptxas=-v.
#include <regex>

#include "jit_internal.hpp"

namespace jitbridge::detail {

std::map<std::string, Resources> parse_ptxas_info(std::string_view log, std::string* rest) {
  static const std::regex entry(R"(Compiling entry function '([^']+)')");
  static const std::regex props(R"(Function properties for (\S+))");
  static const std::regex frame(
      R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
  static const std::regex used(R"(Used (\d+) registers)");
  static const std::regex barriers(R"(used (\d+) barriers)");
  static const std::regex smem(R"((\d+) bytes smem)");
  static const std::regex cmem(R"((\d+) bytes cmem\[0\])");
  std::map<std::string, Resources> out;
  std::string current, properties_of;
  std::size_t pos = 0;
  while (pos < log.size()) {
    std::size_t end = log.find('\n', pos);
    if (end == std::string_view::npos) end = log.size();
    std::string line(log.substr(pos, end - pos));
    pos = end + 1;
    if (line.rfind("ptxas", 0) != 0 || line.find("error") != std::string::npos ||
        line.find("warning") != std::string::npos) {
      if (rest) *rest += line + "\n";
      continue;
    }
    std::smatch m;
    if (std::regex_search(line, m, entry)) {
      current = m[1];
      out[current].known = true;
    } else if (std::regex_search(line, m, props)) {
      properties_of = m[1];
    } else if (std::regex_search(line, m, frame)) {
      if (auto it = out.find(properties_of); it != out.end()) {
        it->second.local_bytes = std::stoull(m[1]);
        it->second.spill_store_bytes = std::stoull(m[2]);
        it->second.spill_load_bytes = std::stoull(m[3]);
      }
    } else if (std::regex_search(line, m, used) && !current.empty()) {
      Resources& r = out[current];
      r.registers = std::stoi(m[1]);
      if (std::regex_search(line, m, barriers)) r.barriers = std::stoi(m[1]);
      if (std::regex_search(line, m, smem)) r.shared_bytes = std::stoull(m[1]);
      if (std::regex_search(line, m, cmem)) r.const_bytes = std::stoull(m[1]);
    }
  }
  return out;
}

}  // namespace jitbridge::detail
