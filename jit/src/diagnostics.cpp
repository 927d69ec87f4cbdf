// diagnostics.cpp — turns NVRTC's log into a CompileError that points at the offending line.
#include <fmt/format.h>

#include <limits>

#include "jit_internal.hpp"

namespace jitbridge {

CompileError::CompileError(Details details)
    : std::runtime_error(detail::format_compile_error(details)), details_(std::move(details)) {}

namespace detail {
namespace {

// "file(12): error: message", "file(3): catastrophic error: message", "file(5): error #20: message".
// Returns false for anything else.
bool located_error(std::string_view line, std::string& file, int& number, std::string& message) {
  std::size_t close = line.find("): ");
  if (close == std::string_view::npos) return false;
  std::size_t open = line.rfind('(', close);
  if (open == std::string_view::npos || open + 1 == close) return false;
  int n = 0;
  for (std::size_t i = open + 1; i < close; ++i) {
    if (line[i] < '0' || line[i] > '9') return false;
    const int digit = line[i] - '0';
    if (n > (std::numeric_limits<int>::max() - digit) / 10) return false;  // no line has such a number
    n = n * 10 + digit;
  }
  std::string_view rest = line.substr(close + 3);
  if (rest.substr(0, 13) == "catastrophic ") rest.remove_prefix(13);
  if (rest.substr(0, 5) != "error") return false;
  std::size_t colon = rest.find(": ");
  if (colon == std::string_view::npos) return false;
  file = std::string(line.substr(0, open));
  number = n;
  message = std::string(rest.substr(colon + 2));
  return true;
}

// "nvrtc: error: message" or "error: message".
bool unlocated_error(std::string_view line, std::string& message) {
  if (line.substr(0, 7) == "nvrtc: ") line.remove_prefix(7);
  if (line.substr(0, 5) != "error") return false;
  std::size_t colon = line.find(": ");
  if (colon == std::string_view::npos) return false;
  message = std::string(line.substr(colon + 2));
  return true;
}

}  // namespace

CompileError::Details parse_diagnostics(std::string_view log, std::string_view source,
                                        std::string_view program_name,
                                        const std::vector<KernelCandidate>& kernels) {
  CompileError::Details d;
  d.log = std::string(log);
  d.program_name = std::string(program_name);
  const std::vector<std::string_view> lines = split_lines(log);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    std::string file;
    if (located_error(lines[i], file, d.line, d.message)) {
      // NVRTC echoes the line indented by two blanks, then a caret line under the column.
      const std::size_t caret = i + 2 < lines.size() ? lines[i + 2].find('^') : std::string_view::npos;
      if (caret != std::string_view::npos && caret <= static_cast<std::size_t>(std::numeric_limits<int>::max()) &&
          lines[i + 1].substr(0, 2) == "  ") {
        d.column = static_cast<int>(caret) - 1;
        d.source_line = std::string(lines[i + 1].substr(2));
      }
      if (file == program_name) {
        const std::vector<std::string_view> src = split_lines(source);
        if (d.line >= 1 && static_cast<std::size_t>(d.line) <= src.size())
          d.source_line = std::string(src[static_cast<std::size_t>(d.line) - 1]);
        for (const KernelCandidate& k : kernels)
          if (k.line <= d.line) d.kernel = k.qualified_name;
      } else {
        d.message = fmt::format("{} (in {})", d.message, file);
      }
      return d;
    }
    if (unlocated_error(lines[i], d.message)) return d;
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
