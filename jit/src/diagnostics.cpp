// diagnostics.cpp — turns NVRTC's log into a CompileError that points at the offending line.
#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "jit_internal.hpp"

namespace jitbridge {

CompileError::CompileError(Details details)
    : std::runtime_error(detail::format_compile_error(details)), details_(std::move(details)) {}

namespace detail {
namespace {

// "file(12): error: message", "file(3): catastrophic error: message", "file(5): error #20: message",
// and the code generator's "file(1): Error: Formal parameter space overflowed (...) in function k".
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
  if (rest.substr(0, 5) != "error" && rest.substr(0, 7) != "Error: ") return false;
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

// At most `max` characters of `line`, marked when cut.
std::string capped(std::string_view line, std::size_t max) {
  if (line.size() <= max) return std::string(line);
  return fmt::format("{} [... {} more characters]", line.substr(0, max), line.size() - max);
}

std::string trimmed(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return std::string(s);
}

// Hints for NVRTC messages whose cure is an option or another header.
std::string with_hint(std::string message) {
  if (message.find("device-side kernel launch could not be processed") != std::string::npos)
    message += " (launching kernels from the device needs relocatable device code: compile with "
               "options=('-rdc=true',))";
  constexpr std::string_view missing = "cannot open source file \"";
  if (message.rfind(missing, 0) == 0 && message.size() > missing.size() + 1 && message.back() == '"')
    message += missing_header_hint(std::string_view(message).substr(missing.size(),
                                                                    message.size() - missing.size() - 1));
  return message;
}

// "file(12): note #3196-D: message": the file, line and message of a located note.
bool located_note(std::string_view line, std::string& file, int& number, std::string& message) {
  const std::size_t note = line.find("): note");
  if (note == std::string_view::npos) return false;
  std::string copy = std::string(line.substr(0, note + 3)) + "error" + std::string(line.substr(note + 7));
  return located_error(copy, file, number, message);
}

// The options as a message shows them: the -I of the CUDA header directories jitbridge adds (the machine's own
// paths, the same for every compile) named once instead of listed.
std::string shown_options(const std::vector<std::string>& options) {
  std::vector<std::string> own;
  try {
    for (const std::string& dir : compile_include_dirs()) own.push_back("-I" + dir);
  } catch (const std::exception&) {  // no CUDA headers found: nothing of jitbridge's to leave out
  }
  std::string out;
  bool left_out = false;
  for (const std::string& o : options) {
    if (std::find(own.begin(), own.end(), o) != own.end()) {
      left_out = true;
      continue;
    }
    out += (out.empty() ? "" : " ") + o;
  }
  if (left_out) out += ", plus -I of each of toolkit_include_dirs()";
  return out;
}

}  // namespace

CompileError::Details parse_diagnostics(std::string_view log, std::string_view source,
                                        std::string_view program_name,
                                        const std::vector<KernelCandidate>& kernels,
                                        const std::vector<std::string>& name_expressions) {
  CompileError::Details d;
  d.log = std::string(log);
  d.program_name = std::string(program_name);
  const std::vector<std::string_view> lines = split_lines(log);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    std::string file;
    if (located_error(lines[i], file, d.line, d.message)) {
      d.message = with_hint(std::move(d.message));
      // NVRTC echoes the line indented by two blanks, then a caret line under the column.
      const bool echoed = i + 1 < lines.size() && lines[i + 1].substr(0, 2) == "  ";
      const std::size_t caret = i + 2 < lines.size() ? lines[i + 2].find('^') : std::string_view::npos;
      if (file == kNameMapFile) {
        // "#pragma nv_mangled_name <expression>": find the user's expression it came from.
        std::string written;
        if (echoed) {
          constexpr std::string_view pragma = "nv_mangled_name ";
          const std::size_t at = lines[i + 1].find(pragma);
          if (at != std::string_view::npos) written = trimmed(lines[i + 1].substr(at + pragma.size()));
        }
        for (std::size_t e = 0; e < name_expressions.size() && d.name_expression < 0; ++e)
          if (trimmed(name_expressions[e]) == written) d.name_expression = static_cast<int>(e);
        if (written.empty() && d.line >= 1 && static_cast<std::size_t>(d.line) <= name_expressions.size())
          d.name_expression = d.line - 1;  // the n-th expression given is the map's n-th line
        if (d.name_expression >= 0)
          d.message = fmt::format("name_expressions[{}] '{}': {}", d.name_expression,
                                  capped(name_expressions[static_cast<std::size_t>(d.name_expression)],
                                         CompileError::kMaxEchoedChars),
                                  d.message);
        d.line = 0;
        return d;
      }
      d.file = file;
      if (echoed && caret != std::string_view::npos &&
          caret <= static_cast<std::size_t>(std::numeric_limits<int>::max())) {
        d.column = static_cast<int>(caret) - 1;
        d.source_line = std::string(lines[i + 1].substr(2));
      }
      if (file == program_name) {
        const std::vector<std::string_view> src = split_lines(source);
        if (d.line >= 1 && static_cast<std::size_t>(d.line) <= src.size())
          d.source_line = std::string(src[static_cast<std::size_t>(d.line) - 1]);
        for (const KernelCandidate& k : kernels)
          if (k.line <= d.line) d.kernel = k.qualified_name;
      }
      return d;
    }
    constexpr std::string_view at_end = "At end of source: ";
    if (lines[i].substr(0, at_end.size()) == at_end && unlocated_error(lines[i].substr(at_end.size()), d.message)) {
      // `expected a "}"` and the like: NVRTC's note after it points at what was left open.
      d.message += " at the end of the source";
      std::string note;
      int number = 0;
      if (i + 1 < lines.size() && located_note(lines[i + 1], file, number, note)) {
        d.message += ", " + note;
        d.file = file;
        d.line = number;
        const std::size_t caret = i + 3 < lines.size() ? lines[i + 3].find('^') : std::string_view::npos;
        if (i + 2 < lines.size() && lines[i + 2].substr(0, 2) == "  " && caret != std::string_view::npos &&
            caret <= static_cast<std::size_t>(std::numeric_limits<int>::max())) {
          d.column = static_cast<int>(caret) - 1;
          d.source_line = std::string(lines[i + 2].substr(2));
        }
      }
      return d;
    }
    if (unlocated_error(lines[i], d.message)) {
      d.message = with_hint(std::move(d.message));
      return d;
    }
  }
  // No line of a known form: the first that mentions an error, else the log's first line.
  for (std::string_view line : lines)
    if (line.find("error") != std::string_view::npos) {
      d.message = capped(trimmed(line), CompileError::kMaxEchoedChars);
      return d;
    }
  d.message = lines.empty() || trimmed(lines[0]).empty() ? "NVRTC reported a failure and wrote no log"
                                                         : capped(trimmed(lines[0]), CompileError::kMaxEchoedChars);
  return d;
}

std::string format_compile_error(const CompileError::Details& d) {
  const std::size_t max_chars = CompileError::kMaxEchoedChars;
  const std::string& file = d.file.empty() ? d.program_name : d.file;
  std::string out;
  if (d.line > 0) {
    out = fmt::format("{}:{}:{}: error: {}", file, d.line, d.column > 0 ? d.column : 1, capped(d.message, max_chars * 4));
  } else {
    out = fmt::format("{}: error: {}", d.program_name, capped(d.message, max_chars * 4));
  }
  if (!d.kernel.empty()) out += fmt::format(" [in kernel '{}']", d.kernel);
  if (!d.source_line.empty() && d.line > 0) {
    std::string number = std::to_string(d.line);
    out += fmt::format("\n {} | {}", number, capped(d.source_line, max_chars));
    if (d.column > 0 && static_cast<std::size_t>(d.column) <= max_chars) {
      std::string pad;
      for (int c = 1; c < d.column && static_cast<std::size_t>(c) <= d.source_line.size(); ++c)
        pad += d.source_line[static_cast<std::size_t>(c) - 1] == '\t' ? '\t' : ' ';
      out += fmt::format("\n {} | {}^", std::string(number.size(), ' '), pad);
    }
  }
  out += fmt::format("\nNVRTC log (options: {}):", capped(shown_options(d.options), max_chars * 5));
  if (d.name_expression >= 0) {
    // NVRTC's log shows the code it generated for name expressions: not the user's to read.
    out += " (in CompileError.log; it shows the code NVRTC generates for name expressions)";
    return out;
  }
  const std::vector<std::string_view> lines = split_lines(d.log);
  std::size_t shown = 0;
  for (; shown < lines.size() && shown < CompileError::kMaxLogLines; ++shown)
    out += "\n" + capped(lines[shown], max_chars);
  std::size_t rest = lines.size() - shown;
  while (rest > 0 && lines[shown + rest - 1].empty()) --rest;  // the log's trailing newline
  if (rest > 0) out += fmt::format("\n[... {} more lines of the log in CompileError.log]", rest);
  return out;
}

}  // namespace detail
}  // namespace jitbridge
