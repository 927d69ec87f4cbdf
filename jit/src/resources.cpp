// resources.cpp — reads the per-kernel resource lines that ptxas prints under -Xptxas=-v.
#include "jit_internal.hpp"

namespace jitbridge::detail {

std::map<std::string, Resources> parse_ptxas_info(std::string_view log, std::string* rest) {
  std::map<std::string, Resources> out;
  std::string current, properties_of;
  for (std::string_view line : split_lines(log)) {
    if (line.empty()) continue;
    const bool info = line.substr(0, 5) == "ptxas" && line.find("error") == std::string_view::npos &&
                      line.find("warning") == std::string_view::npos;
    if (!info) {
      if (rest) (*rest += line) += '\n';
      continue;
    }
    if (line.find("Compiling entry function '") != std::string_view::npos) {
      current = std::string(text_between(line, "Compiling entry function '", "'"));
      out[current].known = true;
    } else if (line.find("Function properties for ") != std::string_view::npos) {
      properties_of = std::string(text_between(line, "Function properties for ", " "));
    } else if (auto frame = number_before(line, " bytes stack frame")) {
      if (auto it = out.find(properties_of); it != out.end()) {
        it->second.local_bytes = *frame;
        it->second.spill_store_bytes = number_before(line, " bytes spill stores").value_or(0);
        it->second.spill_load_bytes = number_before(line, " bytes spill loads").value_or(0);
      }
    } else if (auto regs = number_after(line, "Used "); regs && !current.empty() &&
                                                        line.find(" registers") != std::string_view::npos) {
      Resources& r = out[current];
      r.registers = static_cast<int>(*regs);
      r.barriers = static_cast<int>(number_after(line, "used ").value_or(0));
      r.shared_bytes = number_before(line, " bytes smem").value_or(0);
      r.const_bytes = number_before(line, " bytes cmem[0]").value_or(0);
    }
  }
  return out;
}

}  // namespace jitbridge::detail
