// xla_ffi.cpp — the generic XLA FFI handler (jitbridge/xla_ffi.hpp): decodes XLA's call frame, finds the call's
// kernels by their JSON payload in a process-wide table, and launches them through the C interface on XLA's stream.
#include "jitbridge/xla_ffi.hpp"

#include <xla/ffi/api/c_api.h>

#include <fmt/format.h>

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "jitbridge/c_api.hpp"

namespace jitbridge::xla_ffi {
namespace {

constexpr std::string_view kAttribute = "jitbridge";
// The payload's key (jitbridge.jax writes a digest of the payload): calls are looked up by it, so an execution
// hashes a few bytes, not the payload (whose kernel sources may be kilobytes).
constexpr std::string_view kKeyAttribute = "jitbridge_key";
constexpr int kPayloadVersion = 1;

// Where a kernel parameter's value comes from.
enum class From { input, output, constant };

struct ParamSource {
  From from = From::constant;
  std::size_t index = 0;  // input / output: the operand or result index
  jitbridge_arg constant{};
};

// One launch of a payload. `kernel` holds one reference for the process's life (entries are never freed).
struct LaunchPlan {
  jitbridge_kernel* kernel = nullptr;
  std::string name;
  unsigned grid[3] = {1, 1, 1}, block[3] = {1, 1, 1};
  std::size_t shared_mem = 0;
  bool check_args = true;
  std::vector<ParamSource> params;
};

struct Entry {
  std::string payload;
  std::vector<LaunchPlan> launches;
  std::size_t max_input = 0, max_output = 0;  // 1 + the largest index used (0: none)
};

// Thrown while a payload is read; becomes an INVALID_ARGUMENT error.
struct PayloadError {
  std::string message;
};

const JitbridgeCApi& table() { return c_api::core_table(); }

std::string last_message() {
  const char* m = nullptr;
  table().last_error(&m, nullptr);
  return m ? m : "unknown error";
}

std::vector<std::string> text_list(const nlohmann::json& j, const char* key) {
  std::vector<std::string> out;
  if (!j.contains(key)) return out;
  const auto& v = j.at(key);
  if (!v.is_array()) throw PayloadError{fmt::format("'{}' is not a list", key)};
  for (const auto& s : v) {
    if (!s.is_string()) throw PayloadError{fmt::format("'{}' holds a non-string", key)};
    out.push_back(s.get<std::string>());
  }
  return out;
}

void read_dims(const nlohmann::json& j, const char* key, unsigned (&dims)[3]) {
  const auto& v = j.at(key);
  if (!v.is_array() || v.size() != 3) throw PayloadError{fmt::format("'{}' is not a list of 3 ints", key)};
  for (std::size_t i = 0; i < 3; ++i) {
    if (!v[i].is_number_unsigned() || v[i].get<std::uint64_t>() > 0xffffffffull)
      throw PayloadError{fmt::format("'{}'[{}] is not an int in [0, 2**32)", key, i)};
    dims[i] = static_cast<unsigned>(v[i].get<std::uint64_t>());
  }
}

ParamSource read_param(const nlohmann::json& p, std::size_t position, Entry& entry) {
  if (!p.is_array() || p.empty() || !p[0].is_string())
    throw PayloadError{fmt::format("argument {}: not a [kind, value] list", position)};
  const std::string kind = p[0].get<std::string>();
  ParamSource s;
  if (kind == "null") {
    s.constant.kind = JITBRIDGE_ARG_NULL;
    return s;
  }
  if (p.size() != 2) throw PayloadError{fmt::format("argument {}: '{}' takes one value", position, kind)};
  const auto& v = p[1];
  if (kind == "in" || kind == "out") {
    if (!v.is_number_unsigned()) throw PayloadError{fmt::format("argument {}: the index is not an int", position)};
    s.from = kind == "in" ? From::input : From::output;
    s.index = v.get<std::size_t>();
    std::size_t& max = kind == "in" ? entry.max_input : entry.max_output;
    if (s.index + 1 > max) max = s.index + 1;
  } else if (kind == "int" && v.is_number_integer()) {
    s.constant.kind = JITBRIDGE_ARG_INT;
    s.constant.i = v.get<std::int64_t>();
  } else if (kind == "uint" && v.is_number_unsigned()) {
    s.constant.kind = JITBRIDGE_ARG_UINT;
    s.constant.u = v.get<std::uint64_t>();
  } else if (kind == "float" && v.is_number()) {
    s.constant.kind = JITBRIDGE_ARG_FLOAT;
    s.constant.f = v.get<double>();
  } else if (kind == "bool" && v.is_boolean()) {
    s.constant.kind = JITBRIDGE_ARG_BOOL;
    s.constant.i = v.get<bool>() ? 1 : 0;
  } else {
    throw PayloadError{fmt::format("argument {}: unknown kind '{}' or a value of the wrong type", position, kind)};
  }
  return s;
}

// The kernel of one launch entry, through jitbridge's cache (compiles on a miss). Throws PayloadError.
jitbridge_kernel* make_kernel(const nlohmann::json& l) {
  const std::string source = l.at("source").get<std::string>();
  const std::string name = l.at("kernel").get<std::string>();
  const std::vector<std::string> options = text_list(l, "options");
  const std::vector<std::string> exprs = text_list(l, "name_expressions");
  std::vector<std::string> header_names, header_texts;
  if (l.contains("headers")) {
    for (const auto& h : l.at("headers")) {
      if (!h.is_array() || h.size() != 2 || !h[0].is_string() || !h[1].is_string())
        throw PayloadError{"'headers' holds an entry that is not a [name, text] pair"};
      header_names.push_back(h[0].get<std::string>());
      header_texts.push_back(h[1].get<std::string>());
    }
  }
  std::string arch;
  if (l.contains("arch") && !l.at("arch").is_null()) arch = l.at("arch").get<std::string>();
  auto pointers = [](const std::vector<std::string>& v) {
    std::vector<const char*> p;
    for (const auto& s : v) p.push_back(s.c_str());
    return p;
  };
  const auto opt_p = pointers(options), expr_p = pointers(exprs), hn_p = pointers(header_names),
             ht_p = pointers(header_texts);
  jitbridge_source src{};
  src.struct_size = sizeof src;
  src.source = source.c_str();
  src.options = opt_p.data();
  src.n_options = opt_p.size();
  src.name_expressions = expr_p.data();
  src.n_name_expressions = expr_p.size();
  src.header_names = hn_p.data();
  src.header_texts = ht_p.data();
  src.n_headers = hn_p.size();
  src.arch = arch.empty() ? nullptr : arch.c_str();
  jitbridge_kernel* kernel = nullptr;
  if (table().kernel_from_source(&src, name.c_str(), &kernel) != JITBRIDGE_OK)
    throw PayloadError{fmt::format("kernel '{}': {}", name, last_message())};
  return kernel;
}

std::unique_ptr<Entry> parse(std::string_view payload) {
  auto entry = std::make_unique<Entry>();
  entry->payload.assign(payload.data(), payload.size());
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(entry->payload);
    if (!j.is_object() || !j.contains("v") || !j.at("v").is_number_integer())
      throw PayloadError{"not a JSON object with a version 'v'"};
    if (j.at("v").get<int>() != kPayloadVersion)
      throw PayloadError{fmt::format("payload version {} (this jitbridge reads version {}); trace the program again "
                                     "with this jitbridge", j.at("v").dump(), kPayloadVersion)};
    const auto& launches = j.at("launches");
    if (!launches.is_array()) throw PayloadError{"'launches' is not a list"};
    for (const auto& l : launches) {
      LaunchPlan plan;
      plan.name = l.at("kernel").get<std::string>();
      read_dims(l, "grid", plan.grid);
      read_dims(l, "block", plan.block);
      plan.shared_mem = l.value("shared_mem", std::size_t{0});
      plan.check_args = l.value("check_args", true);
      const auto& args = l.at("args");
      if (!args.is_array()) throw PayloadError{fmt::format("kernel '{}': 'args' is not a list", plan.name)};
      for (std::size_t i = 0; i < args.size(); ++i) plan.params.push_back(read_param(args[i], i, *entry));
      plan.kernel = make_kernel(l);
      entry->launches.push_back(std::move(plan));
    }
  } catch (const nlohmann::json::exception& e) {
    for (auto& l : entry->launches) table().kernel_release(l.kernel);
    throw PayloadError{fmt::format("malformed payload ({})", e.what())};
  } catch (...) {
    for (auto& l : entry->launches) table().kernel_release(l.kernel);
    throw;
  }
  return entry;
}

// The process-wide table: payload hash -> entries with that hash, and key hash -> (key, entry) for the calls that
// carry a key. Never freed (kernels outlive every call; a leaked table also survives static destruction at exit,
// where XLA may still run a call).
struct Table {
  std::mutex mutex;
  std::unordered_map<std::size_t, std::vector<std::unique_ptr<Entry>>> entries;
  std::unordered_map<std::size_t, std::vector<std::pair<std::string, const Entry*>>> keys;
};
Table& entries() {
  static Table* t = new Table;
  return *t;
}

// The entry of `payload`, made on first use. Throws PayloadError (or std::bad_alloc).
const Entry& lookup(std::string_view payload) {
  const std::size_t hash = std::hash<std::string_view>{}(payload);
  Table& t = entries();
  {
    std::lock_guard<std::mutex> lock(t.mutex);
    auto it = t.entries.find(hash);
    if (it != t.entries.end())
      for (const auto& e : it->second)
        if (e->payload == payload) return *e;
  }
  // Parsed (and compiled) outside the lock: a second thread with the same payload may do it too; the first stored
  // wins and the other's kernels are released.
  std::unique_ptr<Entry> made = parse(payload);
  std::lock_guard<std::mutex> lock(t.mutex);
  auto& bucket = t.entries[hash];
  for (const auto& e : bucket)
    if (e->payload == payload) {
      for (auto& l : made->launches) table().kernel_release(l.kernel);
      return *e;
    }
  bucket.push_back(std::move(made));
  return *bucket.back();
}

// The entry of a call that carries `key`: a lookup of the key; the first call with a key finds (or makes) the entry
// by its payload and files it under the key. The key stands for the payload (jitbridge.jax derives it from the
// payload's bytes), so a call is not compared with the payload the key was first seen with.
const Entry& lookup(std::string_view key, std::string_view payload) {
  const std::size_t hash = std::hash<std::string_view>{}(key);
  Table& t = entries();
  {
    std::lock_guard<std::mutex> lock(t.mutex);
    auto it = t.keys.find(hash);
    if (it != t.keys.end())
      for (const auto& k : it->second)
        if (k.first == key) return *k.second;
  }
  const Entry& made = lookup(payload);
  std::lock_guard<std::mutex> lock(t.mutex);
  auto& bucket = t.keys[hash];
  for (const auto& k : bucket)
    if (k.first == key) return *k.second;
  bucket.emplace_back(std::string(key), &made);
  return made;
}

XLA_FFI_Error* make_error(const XLA_FFI_Api* api, XLA_FFI_Error_Code code, const std::string& message) {
  if (!api || api->struct_size < offsetof(XLA_FFI_Api, XLA_FFI_Error_Create) + sizeof(void*) ||
      !api->XLA_FFI_Error_Create)
    return nullptr;  // nothing to report through (no XLA calls a handler so)
  XLA_FFI_Error_Create_Args args{};
  args.struct_size = XLA_FFI_Error_Create_Args_STRUCT_SIZE;
  const std::string text = "jitbridge XLA FFI call: " + message;
  args.message = text.c_str();  // copied by XLA
  args.errc = code;
  return api->XLA_FFI_Error_Create(&args);
}

// Whether the runtime's table has member `offset` (of size `size`).
bool api_has(const XLA_FFI_Api* api, std::size_t offset) { return api->struct_size >= offset + sizeof(void*); }

XLA_FFI_Error* populate_metadata(const XLA_FFI_Api* api, XLA_FFI_Extension_Base* base) {
  auto* ext = reinterpret_cast<XLA_FFI_Metadata_Extension*>(base);
  if (ext->extension_base.struct_size < XLA_FFI_Metadata_Extension_STRUCT_SIZE || !ext->metadata ||
      ext->metadata->struct_size < XLA_FFI_Metadata_STRUCT_SIZE)
    return make_error(api, XLA_FFI_Error_Code_INVALID_ARGUMENT, "the metadata extension is smaller than expected");
  ext->metadata->api_version.struct_size = XLA_FFI_Api_Version_STRUCT_SIZE;
  ext->metadata->api_version.extension_start = nullptr;
  ext->metadata->api_version.major_version = XLA_FFI_API_MAJOR;
  ext->metadata->api_version.minor_version = XLA_FFI_API_MINOR;
  ext->metadata->traits = XLA_FFI_HANDLER_TRAITS_COMMAND_BUFFER_COMPATIBLE;
  return nullptr;
}

// The call's string attribute `attribute`: 1 with it in *out, 0 when absent, -1 with the reason in *why when it is
// not a string.
int find_text(const XLA_FFI_Attrs& attrs, std::string_view attribute, std::string_view* out, std::string* why) {
  for (std::int64_t i = 0; i < attrs.size; ++i) {
    const XLA_FFI_ByteSpan* name = attrs.names[i];
    if (!name || std::string_view(name->ptr, name->len) != attribute) continue;
    if (attrs.types[i] != XLA_FFI_AttrType_STRING) {
      *why = fmt::format("the attribute '{}' is not a string", attribute);
      return -1;
    }
    const auto* value = static_cast<const XLA_FFI_ByteSpan*>(attrs.attrs[i]);
    *out = std::string_view(value->ptr, value->len);
    return 1;
  }
  return 0;
}

// The call's "jitbridge" payload and its optional "jitbridge_key" (empty when absent). False with the reason.
bool find_payload(const XLA_FFI_Attrs& attrs, std::string_view* payload, std::string_view* key, std::string* why) {
  const int has_payload = find_text(attrs, kAttribute, payload, why);
  if (has_payload < 0 || find_text(attrs, kKeyAttribute, key, why) < 0) return false;
  if (has_payload == 0) *why = "the call has no 'jitbridge' attribute (call it through jitbridge.jax)";
  return has_payload == 1;
}

// DLPack (code, bits) of an XLA dtype; false for dtypes jitbridge has no DLPack code for.
bool dlpack_dtype(XLA_FFI_DataType t, std::uint8_t* code, std::uint8_t* bits) {
  struct Row {
    XLA_FFI_DataType xla;
    std::uint8_t code, bits;
  };
  static constexpr Row kRows[] = {
      {XLA_FFI_DataType_PRED, 6, 8},         {XLA_FFI_DataType_S8, 0, 8},         {XLA_FFI_DataType_S16, 0, 16},
      {XLA_FFI_DataType_S32, 0, 32},         {XLA_FFI_DataType_S64, 0, 64},       {XLA_FFI_DataType_U8, 1, 8},
      {XLA_FFI_DataType_U16, 1, 16},         {XLA_FFI_DataType_U32, 1, 32},       {XLA_FFI_DataType_U64, 1, 64},
      {XLA_FFI_DataType_F16, 2, 16},         {XLA_FFI_DataType_F32, 2, 32},       {XLA_FFI_DataType_F64, 2, 64},
      {XLA_FFI_DataType_BF16, 4, 16},        {XLA_FFI_DataType_C64, 5, 64},       {XLA_FFI_DataType_C128, 5, 128},
      {XLA_FFI_DataType_F8E4M3FN, 10, 8},    {XLA_FFI_DataType_F8E5M2, 12, 8},
  };
  for (const Row& r : kRows)
    if (r.xla == t) {
      *code = r.code;
      *bits = r.bits;
      return true;
    }
  return false;
}

// A call's operand or result as a jitbridge array. Returns an error message or empty.
std::string to_array(const void* raw, bool is_buffer, const char* what, std::size_t index, int device, bool readonly,
                     jitbridge_array* out) {
  if (!is_buffer || !raw) return fmt::format("{} {} is not a buffer", what, index);
  const auto* b = static_cast<const XLA_FFI_Buffer*>(raw);
  if (b->struct_size < XLA_FFI_Buffer_STRUCT_SIZE) return fmt::format("{} {}: a buffer struct too small", what, index);
  if (!dlpack_dtype(b->dtype, &out->dtype_code, &out->dtype_bits))
    return fmt::format("{} {}: XLA dtype {} has no jitbridge dtype", what, index, static_cast<int>(b->dtype));
  if (b->rank < 0 || b->rank > 64) return fmt::format("{} {}: rank {} out of range", what, index, b->rank);
  out->data = b->data;
  out->device_type = 2;
  out->device_id = device;
  out->dtype_lanes = 1;
  out->ndim = static_cast<std::int32_t>(b->rank);
  out->shape = b->dims;
  out->strides = nullptr;  // XLA's default layout: row-major, dense
  out->readonly = readonly ? 1 : 0;
  return {};
}

XLA_FFI_Error* run(XLA_FFI_CallFrame* frame) {
  const XLA_FFI_Api* api = frame->api;
  auto invalid = [&](const std::string& m) { return make_error(api, XLA_FFI_Error_Code_INVALID_ARGUMENT, m); };
  if (!api) return nullptr;
  if (frame->struct_size < XLA_FFI_CallFrame_STRUCT_SIZE) return invalid("the call frame is smaller than expected");
  if (frame->extension_start && frame->extension_start->type == XLA_FFI_Extension_Metadata)
    return populate_metadata(api, frame->extension_start);

  std::string_view payload, key;
  std::string why;
  if (!find_payload(frame->attrs, &payload, &key, &why)) return invalid(why);
  const Entry* entry = nullptr;
  try {
    entry = key.empty() ? &lookup(payload) : &lookup(key, payload);
  } catch (const PayloadError& e) {
    return invalid(e.message);
  } catch (const std::exception& e) {
    return make_error(api, XLA_FFI_Error_Code_INTERNAL, e.what());
  }
  const bool execute = frame->stage == XLA_FFI_ExecutionStage_EXECUTE;

  int device = -1;
  if (api_has(api, offsetof(XLA_FFI_Api, XLA_FFI_DeviceOrdinal_Get)) && api->XLA_FFI_DeviceOrdinal_Get) {
    XLA_FFI_DeviceOrdinal_Get_Args a{};
    a.struct_size = XLA_FFI_DeviceOrdinal_Get_Args_STRUCT_SIZE;
    a.ctx = frame->ctx;
    if (XLA_FFI_Error* e = api->XLA_FFI_DeviceOrdinal_Get(&a)) {
      if (execute) return e;
      XLA_FFI_Error_Destroy_Args d{XLA_FFI_Error_Destroy_Args_STRUCT_SIZE, nullptr, e};
      api->XLA_FFI_Error_Destroy(&d);  // earlier stages load modules only where the device is known
    } else {
      device = a.device_ordinal;
    }
  }
  if (device < 0) {
    if (execute) return invalid("this XLA gives no device ordinal (XLA_FFI_DeviceOrdinal_Get); jitbridge needs it");
    return nullptr;
  }
  // Modules are loaded here on every stage (cheap after the first): the initialize stage loads them before XLA
  // records a command buffer.
  thread_local std::vector<jitbridge_function*> functions;  // no allocation per call once grown
  functions.assign(entry->launches.size(), nullptr);
  for (std::size_t k = 0; k < entry->launches.size(); ++k) {
    const LaunchPlan& l = entry->launches[k];
    if (table().kernel_resolve(l.kernel, device, &functions[k]) != JITBRIDGE_OK)
      return make_error(api, XLA_FFI_Error_Code_INTERNAL,
                        fmt::format("kernel '{}' on device {}: {}", l.name, device, last_message()));
  }
  if (!execute) return nullptr;

  if (frame->args.size < 0 || static_cast<std::size_t>(frame->args.size) < entry->max_input)
    return invalid(fmt::format("the call has {} operands, its kernels read {}", frame->args.size, entry->max_input));
  if (frame->rets.size < 0 || static_cast<std::size_t>(frame->rets.size) < entry->max_output)
    return invalid(fmt::format("the call has {} results, its kernels write {}", frame->rets.size, entry->max_output));
  if (!api_has(api, offsetof(XLA_FFI_Api, XLA_FFI_Stream_Get)) || !api->XLA_FFI_Stream_Get)
    return invalid("this XLA gives no stream (XLA_FFI_Stream_Get)");
  XLA_FFI_Stream_Get_Args sa{};
  sa.struct_size = XLA_FFI_Stream_Get_Args_STRUCT_SIZE;
  sa.ctx = frame->ctx;
  if (XLA_FFI_Error* e = api->XLA_FFI_Stream_Get(&sa)) return e;

  thread_local std::vector<jitbridge_arg> args;
  for (std::size_t k = 0; k < entry->launches.size(); ++k) {
    const LaunchPlan& l = entry->launches[k];
    if (l.grid[0] == 0 || l.grid[1] == 0 || l.grid[2] == 0) continue;  // empty arrays: nothing to launch
    args.assign(l.params.size(), jitbridge_arg{});
    for (std::size_t i = 0; i < l.params.size(); ++i) {
      const ParamSource& p = l.params[i];
      if (p.from == From::constant) {
        args[i] = p.constant;
        continue;
      }
      const bool in = p.from == From::input;
      const XLA_FFI_Args& a = frame->args;
      const XLA_FFI_Rets& r = frame->rets;
      const bool is_buffer = in ? a.types[p.index] == XLA_FFI_ArgType_BUFFER : r.types[p.index] == XLA_FFI_RetType_BUFFER;
      args[i].kind = JITBRIDGE_ARG_ARRAY;
      const std::string bad = to_array(in ? a.args[p.index] : r.rets[p.index], is_buffer, in ? "operand" : "result",
                                       p.index, device, in, &args[i].array);
      if (!bad.empty()) return invalid(fmt::format("kernel '{}': argument {}: {}", l.name, i, bad));
    }
    jitbridge_launch_config config{};
    config.struct_size = sizeof config;
    std::memcpy(config.grid, l.grid, sizeof config.grid);
    std::memcpy(config.block, l.block, sizeof config.block);
    config.shared_mem = l.shared_mem;
    config.stream = static_cast<CUstream_st*>(sa.stream);
    const int rc = table().launch(functions[k], &config, args.data(), args.size(),
                                  l.check_args ? 0u : JITBRIDGE_LAUNCH_NO_ARG_CHECKS);
    if (rc != JITBRIDGE_OK) {
      const bool user = rc == JITBRIDGE_ERROR_TYPE || rc == JITBRIDGE_ERROR_OVERFLOW || rc == JITBRIDGE_ERROR_VALUE ||
                        rc == JITBRIDGE_ERROR_LAUNCH_CONFIG;
      return make_error(api, user ? XLA_FFI_Error_Code_INVALID_ARGUMENT : XLA_FFI_Error_Code_INTERNAL,
                        fmt::format("launch {} of {} (kernel '{}'): {}", k + 1, entry->launches.size(), l.name,
                                    last_message()));
    }
  }
  return nullptr;
}

}  // namespace
}  // namespace jitbridge::xla_ffi

extern "C" int jitbridge_xla_ffi_prepare(const char* payload, std::size_t size, int device, char* why,
                                         std::size_t why_size) {
  using namespace jitbridge::xla_ffi;
  std::string message;
  try {
    if (!payload) throw PayloadError{"the payload is NULL"};
    const Entry& entry = lookup(std::string_view(payload, size));
    for (const LaunchPlan& l : entry.launches) {
      jitbridge_function* f = nullptr;
      if (table().kernel_resolve(l.kernel, device, &f) != JITBRIDGE_OK) {
        message = fmt::format("kernel '{}' on device {}: {}", l.name, device, last_message());
        break;
      }
    }
  } catch (const PayloadError& e) {
    message = e.message;
  } catch (const std::exception& e) {
    message = e.what();
  } catch (...) {
    message = "unknown exception";
  }
  if (message.empty()) return 0;
  if (why && why_size) std::snprintf(why, why_size, "%s", message.c_str());
  return 1;
}

extern "C" XLA_FFI_Error* jitbridge_xla_ffi_handler(XLA_FFI_CallFrame* call_frame) {
  if (!call_frame) return nullptr;
  try {
    return jitbridge::xla_ffi::run(call_frame);
  } catch (const std::exception& e) {
    return jitbridge::xla_ffi::make_error(call_frame->api, XLA_FFI_Error_Code_INTERNAL, e.what());
  } catch (...) {
    return jitbridge::xla_ffi::make_error(call_frame->api, XLA_FFI_Error_Code_INTERNAL, "unknown exception");
  }
}
