// request.cpp — the compile request a Program keeps (Program::request): made once per compile() call, shared by equal calls.
#include <filesystem>

#include "cache_internal.hpp"
#include "jit_internal.hpp"

namespace jitbridge::detail {
namespace {

std::string absolute_dir(const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::absolute(path, ec);
  return ec ? path : p.string();
}

// `given`'s options and include paths with relative directories made absolute (the -I forms
// effective_options takes: "-Idir", "-I dir", "--include-path=dir", "--include-path dir").
void absolute_paths(const CompileOptions& given, std::vector<std::string>& options, std::vector<std::string>& paths) {
  options.clear();
  options.reserve(given.options.size());
  bool next_is_dir = false;
  for (const std::string& o : given.options) {
    if (next_is_dir) options.push_back(absolute_dir(o));
    else if (o.rfind("-I", 0) == 0 && o.size() > 2) options.push_back("-I" + absolute_dir(o.substr(2)));
    else if (o.rfind("--include-path=", 0) == 0) options.push_back("--include-path=" + absolute_dir(o.substr(15)));
    else options.push_back(o);
    next_is_dir = !next_is_dir && (o == "-I" || o == "--include-path");
  }
  paths.clear();
  for (const std::string& dir : given.include_paths) paths.push_back(absolute_dir(dir));
}

bool names_arch(const CompileOptions& given) {
  if (!given.arch.empty()) return true;
  for (const std::string& o : given.options)
    if (o == "-arch" || o == "--gpu-architecture" || o.rfind("-arch=", 0) == 0 || o.rfind("--gpu-architecture=", 0) == 0)
      return true;
  return false;
}

}  // namespace

std::shared_ptr<const CompileRequest> make_request(std::string_view source, const CompileOptions& given) {
  auto request = std::make_shared<CompileRequest>();
  request->source = std::string(source);
  request->options = given;
  absolute_paths(given, request->options.options, request->options.include_paths);
  request->arch_given = names_arch(given);
  return request;
}

std::shared_ptr<const Program> with_request(std::shared_ptr<const Program> program, std::string_view source,
                                            const CompileOptions& given) {
  if (const CompileRequest* r = program->request.get(); r && r->arch_given == names_arch(given) &&
                                                        r->options.arch == given.arch) {
    std::vector<std::string> options, paths;
    absolute_paths(given, options, paths);
    // The cache key covers the rest: source, headers, name expressions, program name, ptx.
    if (r->options.options == options && r->options.include_paths == paths) return program;
  }
  auto copy = std::make_shared<Program>(*program);
  copy->request = make_request(source, given);
  return copy;
}

}  // namespace jitbridge::detail
