// output.cpp — output_program() and output_link(): programs rebuilt without the layout probe, for the bytes users are handed.
#include <stdexcept>

#include "jitbridge/fatbin.hpp"
#include "jitbridge/jit.hpp"
#include "jitbridge/link.hpp"

namespace jitbridge {

std::shared_ptr<const Program> output_program(std::shared_ptr<const Program> program, Cache* cache) {
  if (!program) throw std::invalid_argument("program: null");
  const CompileRequest* request = program->request.get();
  if (!request || !request->options.layout_probe) return program;
  CompileOptions options = request->options;
  options.layout_probe = false;
  if (!program->fatbin.empty()) {  // compile_fatbin(): arch lists the targets
    std::vector<std::string> targets;
    std::size_t start = 0;
    for (std::size_t comma; (comma = program->arch.find(',', start)) != std::string::npos; start = comma + 1)
      targets.push_back(program->arch.substr(start, comma - start));
    targets.push_back(program->arch.substr(start));
    options.arch.clear();
    return compile_fatbin(request->source, options, targets, cache);
  }
  // The target the program was built for, also when it was the default (which may change).
  if (!request->arch_given) options.arch = program->arch;
  return compile(request->source, options, cache);
}

std::shared_ptr<const Program> output_link(const std::vector<LinkInput>& inputs, const LinkOptions& options,
                                           Cache* cache) {
  std::vector<LinkInput> outputs = inputs;
  for (LinkInput& in : outputs)
    if (in.kind == LinkInput::Kind::program && in.program) in.program = output_program(in.program, cache);
  return link(outputs, options, cache);
}

}  // namespace jitbridge
