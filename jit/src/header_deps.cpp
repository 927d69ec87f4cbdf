// header_deps.cpp — which header files a compile read, from NVRTC's --fdevice-time-trace output.
#include <nlohmann/json.hpp>

#include <set>
#include <stdexcept>

#include "jit_internal.hpp"

namespace jitbridge::detail {

std::vector<std::string> trace_headers(std::string_view trace_json) {
  nlohmann::json doc = nlohmann::json::parse(trace_json.begin(), trace_json.end(), nullptr,
                                             /*allow_exceptions=*/false);
  if (doc.is_discarded()) throw std::runtime_error("NVRTC time trace is not valid JSON");
  const nlohmann::json* events = &doc;
  if (doc.is_object()) {
    auto it = doc.find("traceEvents");
    if (it == doc.end()) throw std::runtime_error("NVRTC time trace has no traceEvents");
    events = &*it;
  }
  if (!events->is_array()) throw std::runtime_error("NVRTC time trace events are not a list");
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const nlohmann::json& e : *events) {
    if (!e.is_object()) continue;
    auto name = e.find("name");
    if (name == e.end() || !name->is_string() || *name != "Processing Header File") continue;
    auto args = e.find("args");
    if (args == e.end() || !args->is_object()) continue;
    auto detail = args->find("detail");
    if (detail == args->end() || !detail->is_string()) continue;
    const std::string& path = detail->get_ref<const std::string&>();
    if (seen.insert(path).second) out.push_back(path);
  }
  return out;
}

}  // namespace jitbridge::detail
