// diagnostics.cpp — turns NVRTC's log into a CompileError that points at the offending line.
#include <fmt/format.h>

#include <regex>

#include "jit_internal.hpp"

namespace jitbridge {

CompileError::CompileError(Details details)
    : std::runtime_error(detail::format_compile_error(details)), details_(std::move(details)) {}

namespace detail {
namespace {

std::vector<std::string> split_lines(std::string_view text) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    out.emplace_back(text.substr(pos, end - pos));
    pos = end + 1;
  }
  return out;
}

}  // namespace

CompileError::Details parse_diagnostics(std::string_view log, std::string_view source,
                                        std::string_view program_name,
                                        const std::vector<KernelCandidate>& kernels) {
  static const std::regex located(R"(^(.*)\((\d+)\): (?:catastrophic )?error[^:]*: (.*)$)");
  static const std::regex unlocated(R"(^(?:nvrtc: )?error[^:]*: (.*)$)");
  CompileError::Details d;
  d.log = std::string(log);
  d.program_name = std::string(program_name);
  const std::vector<std::string> lines = split_lines(log);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    std::smatch m;
    if (std::regex_match(lines[i], m, located)) {
      const std::string file = m[1];
      d.line = std::stoi(m[2]);
      d.message = m[3];
      // NVRTC echoes the line indented by two blanks, then a caret line under the column.
      if (i + 2 < lines.size() && lines[i + 2].find('^') != std::string::npos &&
          lines[i + 1].rfind("  ", 0) == 0) {
        d.column = static_cast<int>(lines[i + 2].find('^')) - 1;
        d.source_line = lines[i + 1].substr(2);
      }
      if (file == program_name) {
        const std::vector<std::string> src = split_lines(source);
        if (d.line >= 1 && static_cast<std::size_t>(d.line) <= src.size())
          d.source_line = src[static_cast<std::size_t>(d.line) - 1];
        for (const KernelCandidate& k : kernels)
          if (k.line <= d.line) d.kernel = k.qualified_name;
      } else {
        d.message = fmt::format("{} (in {})", d.message, file);
      }
      return d;
    }
    if (std::regex_match(lines[i], m, unlocated)) {
      d.message = m[1];
      return d;
    }
  }
  d.message = "NVRTC reported a failure without an error line";
  return d;
}

std::string format_compile_error(const CompileError::Details& d) {
  std::string out;
  if (d.line > 0) {
    out = fmt::format("{}:{}:{}: error: {}", d.program_name, d.line, d.column > 0 ? d.column : 1,
                      d.message);
  } else {
    out = fmt::format("{}: error: {}", d.program_name, d.message);
  }
  if (!d.kernel.empty()) out += fmt::format(" [in kernel '{}']", d.kernel);
  if (!d.source_line.empty()) {
    std::string number = std::to_string(d.line);
    out += fmt::format("\n {} | {}", number, d.source_line);
    if (d.column > 0) {
      std::string pad;
      for (int c = 1; c < d.column && static_cast<std::size_t>(c) <= d.source_line.size(); ++c)
        pad += d.source_line[static_cast<std::size_t>(c) - 1] == '\t' ? '\t' : ' ';
      out += fmt::format("\n {} | {}^", std::string(number.size(), ' '), pad);
    }
  }
  out += fmt::format("\nNVRTC log (options: {}):\n{}", fmt::join(d.options, " "), d.log);
  return out;
}

}  // namespace detail
}  // namespace jitbridge
