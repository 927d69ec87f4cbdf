// test_xla_ffi.cpp — the generic XLA FFI handler (jitbridge/xla_ffi.hpp) on call frames built here against the
// vendored XLA header and a stand-in XLA API table, launching on the fake driver (tests/fuzz/fake_cuda).
#include <catch2/catch.hpp>
#include <dlfcn.h>
#include <xla/ffi/api/c_api.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "c_api_support.hpp"
#include "jitbridge/c_api.h"
#include "jitbridge/xla_ffi.hpp"

// The stand-in XLA's error: what the handler reported.
struct XLA_FFI_Error {
  XLA_FFI_Error_Code code;
  std::string message;
};
// The stand-in XLA's execution context: the device and stream a call runs on.
struct XLA_FFI_ExecutionContext {
  int device;
  void* stream;
};

using jitbridge_test::c_api;
using jitbridge_test::last_launch;

namespace {

XLA_FFI_Error* error_create(XLA_FFI_Error_Create_Args* a) { return new XLA_FFI_Error{a->errc, a->message}; }
void error_destroy(XLA_FFI_Error_Destroy_Args* a) { delete a->error; }
XLA_FFI_Error* stream_get(XLA_FFI_Stream_Get_Args* a) {
  a->stream = a->ctx->stream;
  return nullptr;
}
XLA_FFI_Error* ordinal_get(XLA_FFI_DeviceOrdinal_Get_Args* a) {
  a->device_ordinal = a->ctx->device;
  return nullptr;
}

XLA_FFI_Api make_api() {
  XLA_FFI_Api api{};
  api.struct_size = sizeof api;
  api.api_version = {XLA_FFI_Api_Version_STRUCT_SIZE, nullptr, XLA_FFI_API_MAJOR, XLA_FFI_API_MINOR};
  api.XLA_FFI_Error_Create = error_create;
  api.XLA_FFI_Error_Destroy = error_destroy;
  api.XLA_FFI_Stream_Get = stream_get;
  api.XLA_FFI_DeviceOrdinal_Get = ordinal_get;
  return api;
}
const XLA_FFI_Api kApi = make_api();

const char* const kSource = R"(
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i];
}
)";


// One launch of saxpy (or `kernel`) in a payload, its arguments as given.
nlohmann::json saxpy_launch(nlohmann::json args, unsigned grid = 4, const char* kernel = "saxpy",
                            const char* source = kSource) {
  return {{"source", source}, {"kernel", kernel}, {"options", nlohmann::json::array()},
          {"grid", {grid, 1, 1}}, {"block", {256, 1, 1}}, {"shared_mem", 0}, {"check_args", true},
          {"args", std::move(args)}};
}
std::string payload(nlohmann::json launch) { return nlohmann::json{{"v", 1}, {"launches", {std::move(launch)}}}.dump(); }

// A call frame over buffers, as XLA builds one: operands, results, the "jitbridge" attribute and, when key_text is
// set, the "jitbridge_key" attribute. Owns what it points to; get() sets every pointer (so a moved Frame stays valid).
struct Frame {
  std::string payload_text, key_text;
  XLA_FFI_ByteSpan name{"jitbridge", 9}, value{}, key_name{"jitbridge_key", 13}, key_value{};
  XLA_FFI_ByteSpan* names[2] = {};
  XLA_FFI_AttrType attr_types[2] = {XLA_FFI_AttrType_STRING, XLA_FFI_AttrType_STRING};
  void* attr_values[2] = {};
  std::vector<XLA_FFI_Buffer> in, out;
  std::vector<std::vector<std::int64_t>> dims;
  std::vector<XLA_FFI_ArgType> in_types;
  std::vector<XLA_FFI_RetType> out_types;
  std::vector<void*> in_ptrs, out_ptrs;
  XLA_FFI_ExecutionContext ctx{0, reinterpret_cast<void*>(0)};
  XLA_FFI_CallFrame frame{};

  XLA_FFI_Buffer buffer(void* data, XLA_FFI_DataType dtype, std::vector<std::int64_t> shape) {
    dims.push_back(std::move(shape));
    XLA_FFI_Buffer b{};
    b.struct_size = XLA_FFI_Buffer_STRUCT_SIZE;
    b.dtype = dtype;
    b.data = data;
    b.rank = static_cast<std::int64_t>(dims.back().size());
    return b;
  }
  Frame(std::string text, std::vector<XLA_FFI_Buffer> inputs, std::vector<XLA_FFI_Buffer> outputs)
      : payload_text(std::move(text)), in(std::move(inputs)), out(std::move(outputs)) {}
  XLA_FFI_CallFrame* get(XLA_FFI_ExecutionStage stage = XLA_FFI_ExecutionStage_EXECUTE) {
    value = {payload_text.data(), payload_text.size()};
    key_value = {key_text.data(), key_text.size()};
    names[0] = &name;
    names[1] = &key_name;
    attr_values[0] = &value;
    attr_values[1] = &key_value;
    std::size_t k = 0;
    for (auto& b : in) b.dims = dims[k++].data();
    for (auto& b : out) b.dims = dims[k++].data();
    in_types.assign(in.size(), XLA_FFI_ArgType_BUFFER);
    out_types.assign(out.size(), XLA_FFI_RetType_BUFFER);
    in_ptrs.clear();
    out_ptrs.clear();
    for (auto& b : in) in_ptrs.push_back(&b);
    for (auto& b : out) out_ptrs.push_back(&b);
    frame = XLA_FFI_CallFrame{};
    frame.struct_size = XLA_FFI_CallFrame_STRUCT_SIZE;
    frame.api = &kApi;
    frame.ctx = &ctx;
    frame.stage = stage;
    frame.args = {XLA_FFI_Args_STRUCT_SIZE, nullptr, static_cast<std::int64_t>(in.size()), in_types.data(),
                  in_ptrs.data()};
    frame.rets = {XLA_FFI_Rets_STRUCT_SIZE, nullptr, static_cast<std::int64_t>(out.size()), out_types.data(),
                  out_ptrs.data()};
    frame.attrs = {XLA_FFI_Attrs_STRUCT_SIZE, nullptr, key_text.empty() ? 1 : 2, attr_types, names, attr_values};
    return &frame;
  }
};

// Device memory on the fake device 0 (freed at scope exit).
struct DeviceMemory {
  std::uint64_t ptr = 0;
  explicit DeviceMemory(std::size_t bytes) { REQUIRE(c_api().mem_alloc(0, bytes, nullptr, &ptr) == JITBRIDGE_OK); }
  ~DeviceMemory() { c_api().mem_free(0, ptr, nullptr); }
  void* get() const { return reinterpret_cast<void*>(ptr); }
};

// The handler's error (owned here), or none.
struct Result {
  XLA_FFI_Error* e;
  explicit Result(XLA_FFI_Error* err) : e(err) {}
  ~Result() { delete e; }
  Result(const Result&) = delete;
  Result& operator=(const Result&) = delete;
  std::string message() const { return e ? e->message : ""; }
};

Frame saxpy_frame(const std::string& text, void* x, void* y, XLA_FFI_DataType x_dtype = XLA_FFI_DataType_F32) {
  Frame f(text, {}, {});
  f.in.push_back(f.buffer(x, x_dtype, {1000}));
  f.out.push_back(f.buffer(y, XLA_FFI_DataType_F32, {1000}));
  return f;
}

// A launch argument entry ["kind", value] (nlohmann would read a braced pair list as an object).
template <typename T>
nlohmann::json arg(const char* kind, T value) {
  return nlohmann::json::array({kind, value});
}
const nlohmann::json kSaxpyArgs = nlohmann::json::array({arg("float", 2.5), arg("in", 0), arg("out", 0), arg("int", 1000)});

}  // namespace

TEST_CASE("xla_ffi: the metadata query gets the header's API version and command-buffer compatibility") {
  XLA_FFI_Metadata metadata{};
  metadata.struct_size = XLA_FFI_Metadata_STRUCT_SIZE;
  XLA_FFI_Metadata_Extension ext{};
  ext.extension_base = {XLA_FFI_Metadata_Extension_STRUCT_SIZE, XLA_FFI_Extension_Metadata, nullptr};
  ext.metadata = &metadata;
  XLA_FFI_CallFrame frame{};
  frame.struct_size = XLA_FFI_CallFrame_STRUCT_SIZE;
  frame.extension_start = &ext.extension_base;
  frame.api = &kApi;
  Result r(jitbridge_xla_ffi_handler(&frame));
  REQUIRE(r.e == nullptr);
  CHECK(metadata.api_version.major_version == XLA_FFI_API_MAJOR);
  CHECK(metadata.api_version.minor_version == XLA_FFI_API_MINOR);
  CHECK(metadata.traits == XLA_FFI_HANDLER_TRAITS_COMMAND_BUFFER_COMPATIBLE);

  metadata.struct_size = 4;  // an XLA whose metadata struct is smaller than this header's
  Result small(jitbridge_xla_ffi_handler(&frame));
  REQUIRE(small.e);
  CHECK(small.e->code == XLA_FFI_Error_Code_INVALID_ARGUMENT);
  CHECK_THAT(small.message(), Catch::Contains("metadata"));
}

TEST_CASE("xla_ffi: an execute call launches the payload's kernel on XLA's stream with the frame's buffers") {
  DeviceMemory x(4096), y(4096);
  Frame f = saxpy_frame(payload(saxpy_launch(kSaxpyArgs)), x.get(), y.get());
  const std::uint64_t before = last_launch().count;
  Result r(jitbridge_xla_ffi_handler(f.get()));
  INFO(r.message());
  REQUIRE(r.e == nullptr);
  FakeCudaLaunch l = last_launch();
  CHECK(l.count == before + 1);
  CHECK((l.grid[0] == 4 && l.grid[1] == 1 && l.block[0] == 256 && l.block[1] == 1));
  const jitbridge_test::SaxpyParams p = jitbridge_test::saxpy_params(l);
  CHECK(p.a == 2.5f);
  CHECK(p.x == x.ptr);
  CHECK(p.y == y.ptr);
  CHECK(p.n == 1000);

  // A second call (the payload now a table lookup) with other buffers launches with those.
  DeviceMemory y2(4096);
  f.out[0].data = y2.get();
  Result again(jitbridge_xla_ffi_handler(f.get()));
  REQUIRE(again.e == nullptr);
  l = last_launch();
  CHECK(l.count == before + 2);
  CHECK(jitbridge_test::saxpy_params(l).y == y2.ptr);
}

TEST_CASE("xla_ffi: a call with a key is looked up by the key, not by its payload") {
  DeviceMemory x(4096), y(4096);
  Frame f = saxpy_frame(payload(saxpy_launch(kSaxpyArgs)), x.get(), y.get());
  f.key_text = "0123456789abcdef0123456789abcdef";
  const std::uint64_t before = last_launch().count;
  Result first(jitbridge_xla_ffi_handler(f.get()));
  INFO(first.message());
  REQUIRE(first.e == nullptr);
  CHECK(jitbridge_test::saxpy_params(last_launch()).a == 2.5f);
  // Once the key is known the payload is not read again (nor hashed): the key's entry runs as it was made.
  f.payload_text = "not even JSON";
  Result keyed(jitbridge_xla_ffi_handler(f.get()));
  INFO(keyed.message());
  REQUIRE(keyed.e == nullptr);
  CHECK(last_launch().count == before + 2);
  CHECK(jitbridge_test::saxpy_params(last_launch()).a == 2.5f);
  // Another key is another lookup: its payload is read.
  f.key_text = "fedcba9876543210fedcba9876543210";
  Result unknown(jitbridge_xla_ffi_handler(f.get()));
  REQUIRE(unknown.e);
  CHECK(unknown.e->code == XLA_FFI_Error_Code_INVALID_ARGUMENT);
  CHECK_THAT(unknown.message(), Catch::Contains("malformed payload"));
  // A key that is not a string is refused, naming it.
  f.payload_text = payload(saxpy_launch(kSaxpyArgs));
  f.get();
  f.attr_types[1] = XLA_FFI_AttrType_SCALAR;
  Result bad(jitbridge_xla_ffi_handler(&f.frame));
  REQUIRE(bad.e);
  CHECK_THAT(bad.message(), Catch::Contains("'jitbridge_key' is not a string"));
}

TEST_CASE("xla_ffi: the initialize stage loads the kernels and launches nothing; an empty grid skips the launch") {
  DeviceMemory x(4096), y(4096);
  Frame f = saxpy_frame(payload(saxpy_launch(kSaxpyArgs)), x.get(), y.get());
  const std::uint64_t before = last_launch().count;
  Result init(jitbridge_xla_ffi_handler(f.get(XLA_FFI_ExecutionStage_INITIALIZE)));
  INFO(init.message());
  REQUIRE(init.e == nullptr);
  CHECK(last_launch().count == before);

  Frame empty = saxpy_frame(payload(saxpy_launch(kSaxpyArgs, 0)), x.get(), y.get());
  Result skipped(jitbridge_xla_ffi_handler(empty.get()));
  REQUIRE(skipped.e == nullptr);
  CHECK(last_launch().count == before);
}

TEST_CASE("xla_ffi: arguments that do not fit the signature are INVALID_ARGUMENT errors naming the argument") {
  DeviceMemory x(4096), y(4096);
  const std::uint64_t before = last_launch().count;
  SECTION("an int32 operand for a float pointer") {
    Frame f = saxpy_frame(payload(saxpy_launch(kSaxpyArgs)), x.get(), y.get(), XLA_FFI_DataType_S32);
    Result r(jitbridge_xla_ffi_handler(f.get()));
    REQUIRE(r.e);
    CHECK(r.e->code == XLA_FFI_Error_Code_INVALID_ARGUMENT);
    CHECK_THAT(r.message(), Catch::Contains("saxpy") && Catch::Contains("argument 1") && Catch::Contains("int32"));
  }
  SECTION("an operand (read-only) for the non-const pointer") {
    const nlohmann::json args = nlohmann::json::array({arg("float", 2.5), arg("in", 0), arg("in", 0), arg("int", 1000)});
    Frame f = saxpy_frame(payload(saxpy_launch(args)), x.get(), y.get());
    Result r(jitbridge_xla_ffi_handler(f.get()));
    REQUIRE(r.e);
    CHECK(r.e->code == XLA_FFI_Error_Code_INVALID_ARGUMENT);
    CHECK_THAT(r.message(), Catch::Contains("argument 2") && Catch::Contains("read-only"));
  }
  SECTION("more operands named than the call has") {
    const nlohmann::json args = nlohmann::json::array({arg("float", 2.5), arg("in", 3), arg("out", 0), arg("int", 1000)});
    Frame f = saxpy_frame(payload(saxpy_launch(args)), x.get(), y.get());
    Result r(jitbridge_xla_ffi_handler(f.get()));
    REQUIRE(r.e);
    CHECK_THAT(r.message(), Catch::Contains("has 1 operands, its kernels read 4"));
  }
  SECTION("a block beyond the device's limit") {
    nlohmann::json l = saxpy_launch(kSaxpyArgs);
    l["block"] = {4096, 1, 1};
    Frame f = saxpy_frame(payload(l), x.get(), y.get());
    Result r(jitbridge_xla_ffi_handler(f.get()));
    REQUIRE(r.e);
    CHECK(r.e->code == XLA_FFI_Error_Code_INVALID_ARGUMENT);
    CHECK_THAT(r.message(), Catch::Contains("launch 1 of 1 (kernel 'saxpy')") && Catch::Contains("block: 4096"));
  }
  SECTION("an operand of a dtype jitbridge has no DLPack code for (F8E3M4)") {
    Frame f = saxpy_frame(payload(saxpy_launch(kSaxpyArgs)), x.get(), y.get(), XLA_FFI_DataType_F8E3M4);
    Result r(jitbridge_xla_ffi_handler(f.get()));
    REQUIRE(r.e);
    CHECK_THAT(r.message(), Catch::Contains("operand 0") && Catch::Contains("has no jitbridge dtype"));
  }
  CHECK(last_launch().count == before);
}

TEST_CASE("xla_ffi: bad payloads, missing kernels and compile errors are errors with the reason") {
  DeviceMemory x(4096), y(4096);
  auto run = [&](const std::string& text) {
    Frame f = saxpy_frame(text, x.get(), y.get());
    XLA_FFI_Error* e = jitbridge_xla_ffi_handler(f.get());
    REQUIRE(e);
    CHECK(e->code == XLA_FFI_Error_Code_INVALID_ARGUMENT);
    std::string m = e->message;
    delete e;
    return m;
  };
  CHECK_THAT(run("{not json"), Catch::Contains("malformed payload"));
  CHECK_THAT(run(R"({"v": 7, "launches": []})"), Catch::Contains("payload version 7"));
  CHECK_THAT(run(payload(saxpy_launch(kSaxpyArgs, 4, "nope"))), Catch::Contains("kernel 'nope'") &&
                                                                    Catch::Contains("saxpy"));
  CHECK_THAT(run(payload(saxpy_launch(kSaxpyArgs, 4, "broken", "extern \"C\" __global__ void broken( {}"))),
             Catch::Contains("kernel 'broken'"));
  CHECK_THAT(run(payload(saxpy_launch(nlohmann::json::array({arg("float", 2.5), arg("sideways", 0)})))), Catch::Contains("argument 1") &&
                                                                                Catch::Contains("unknown kind"));

  Frame none = saxpy_frame(payload(saxpy_launch(kSaxpyArgs)), x.get(), y.get());
  XLA_FFI_CallFrame* frame = none.get();
  frame->attrs.size = 0;
  Result r(jitbridge_xla_ffi_handler(frame));
  REQUIRE(r.e);
  CHECK_THAT(r.message(), Catch::Contains("no 'jitbridge' attribute"));
}

TEST_CASE("xla_ffi: several launches of one call run in order; template kernels by name expression") {
  const char* const source = R"(
template <class T> __global__ void fill(T* y, T v, int n) {}
template <class T> __global__ void add(const T* x, T* y, int n) {}
)";
  auto launch = [&](const char* kernel, nlohmann::json args, unsigned grid) {
    nlohmann::json l = saxpy_launch(std::move(args), grid, kernel, source);
    l["name_expressions"] = {"fill<float>", "add<float>"};
    return l;
  };
  const nlohmann::json text = {
      {"v", 1},
      {"launches", nlohmann::json::array({launch("fill<float>", nlohmann::json::array({arg("out", 0), arg("float", 1.5),
                                                                                      arg("int", 1000)}), 2),
                                          launch("add<float>", nlohmann::json::array({arg("in", 0), arg("out", 0),
                                                                                     arg("int", 1000)}), 3)})}};
  DeviceMemory x(4096), y(4096);
  Frame f = saxpy_frame(text.dump(), x.get(), y.get());
  const std::uint64_t before = last_launch().count;
  Result r(jitbridge_xla_ffi_handler(f.get()));
  INFO(r.message());
  REQUIRE(r.e == nullptr);
  const FakeCudaLaunch l = last_launch();
  CHECK(l.count == before + 2);
  CHECK(l.grid[0] == 3);  // the last launch is add<float>'s
  std::uint64_t px = 0, py = 0;
  std::memcpy(&px, l.params, 8);
  std::memcpy(&py, l.params + 8, 8);
  CHECK(px == x.ptr);
  CHECK(py == y.ptr);
}

TEST_CASE("xla_ffi: prepare loads a payload's kernels without a call frame; a bad payload is refused with the reason") {
  const std::string text = payload(saxpy_launch(kSaxpyArgs));
  const std::uint64_t before = last_launch().count;
  char why[512] = "";
  CHECK(jitbridge_xla_ffi_prepare(text.data(), text.size(), 0, why, sizeof why) == 0);
  CHECK(last_launch().count == before);
  CHECK(jitbridge_xla_ffi_prepare("{nope", 5, 0, why, sizeof why) == 1);
  CHECK_THAT(std::string(why), Catch::Contains("malformed payload"));
  CHECK(jitbridge_xla_ffi_prepare(text.data(), text.size(), 99, why, sizeof why) == 1);
  CHECK_THAT(std::string(why), Catch::Contains("kernel 'saxpy' on device 99"));
  CHECK(jitbridge_xla_ffi_prepare(nullptr, 0, 0, nullptr, 0) == 1);
}
