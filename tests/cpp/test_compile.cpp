// test_compile.cpp — NVRTC compilation through compile(): binaries, kernels, signatures, resources, errors.
#include <catch2/catch.hpp>
#include <sys/stat.h>
#include <unistd.h>

#include "cache_internal.hpp"
#include "jit_internal.hpp"
#include "jitbridge/cache.hpp"
#include "jitbridge/jit.hpp"
#include "temp_dir.hpp"

using namespace jitbridge;

namespace {

// A cache with the disk side off, so every test compiles for real unless it says otherwise.
Cache& memory_cache() {
  static Cache cache(CacheConfig{false, "", 1 << 20});
  return cache;
}

CompileOptions for_arch(std::string arch = "sm_90") {
  CompileOptions o;
  o.arch = std::move(arch);
  return o;
}

const char* const kIssueKernel = R"(
#include <cuda_fp16.h>
typedef float real;
#define RESTRICT __restrict__
struct Params { double scale; char flag; };
extern "C" __global__ void __launch_bounds__(256)
kernel(const real* RESTRICT a, __half* b, int n, Params p, unsigned long long m) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) b[i] = __float2half(a[i] * (float)p.scale + (float)m);
}
)";

}  // namespace

TEST_CASE("signature of the issue's kernel resolves typedefs, macros and const") {
  auto p = compile(kIssueKernel, for_arch(), &memory_cache());
  REQUIRE(p->kernels.size() == 1);
  const Kernel& k = p->kernels[0];
  CHECK(k.name == "kernel");
  CHECK(k.lowered_name == "kernel");
  REQUIRE(k.signature);
  CHECK(k.signature->to_string() == "(float const*, __half*, int, Params, unsigned long long)");
  const auto& ps = k.signature->params;
  REQUIRE(ps.size() == 5);
  CHECK(ps[0].kind == Param::Kind::pointer);
  CHECK(ps[0].type == "float");
  CHECK(ps[0].is_const);
  CHECK(ps[1].type == "__half");
  CHECK_FALSE(ps[1].is_const);
  CHECK(ps[2].kind == Param::Kind::value);
  CHECK(ps[2].size == 4);
  CHECK(ps[3].type == "Params");
  CHECK(ps[3].size == 16);
  CHECK(ps[3].align == 8);
  CHECK(ps[4].size == 8);
  CHECK(p->arch == "sm_90");
  CHECK(p->cubin.size() > 100);
  CHECK(p->cubin.compare(0, 4, "\x7f" "ELF") == 0);
}

TEST_CASE("resources come from ptxas") {
  auto p = compile(kIssueKernel, for_arch(), &memory_cache());
  const Resources& r = p->kernels.at(0).resources;
  CHECK(r.known);
  CHECK(r.registers > 0);
  CHECK(r.const_bytes > 0);
  CHECK(p->log.find("ptxas info") == std::string::npos);
}

TEST_CASE("template kernels through name expressions") {
  const char* src = R"(
template <class T, int N> __global__ void scale(T* out, const T* __restrict__ in, T factor) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < N) out[i] = in[i] * factor;
})";
  CompileOptions o = for_arch();
  o.name_expressions = {"scale<float, 64>", "scale<double, 8>"};
  auto p = compile(src, o, &memory_cache());
  REQUIRE(p->kernels.size() == 2);
  const Kernel* f = p->find_kernel("scale<float, 64>");
  REQUIRE(f);
  CHECK(f->lowered_name == p->lowered_name("scale<float, 64>"));
  CHECK(f->lowered_name.rfind("_Z", 0) == 0);
  REQUIRE(f->signature);
  CHECK(f->signature->to_string() == "(float*, float const*, float)");
  const Kernel* d = p->find_kernel("scale<double, 8>");
  REQUIRE(d);
  REQUIRE(d->signature);
  CHECK(d->signature->params[2].size == 8);
  CHECK(d->signature->params[2].type == "double");
}

TEST_CASE("kernels in namespaces, bfloat16, structs by value and vector types") {
  const char* src = R"(
#include <cuda_bf16.h>
struct alignas(16) Quad { float v[4]; };
namespace ops { namespace inner {
__global__ void mix(float2 a, int* const* table, Quad q, __nv_bfloat16 h, const void* raw, bool flag, signed char c) {}
} }
)";
  auto p = compile(src, for_arch(), &memory_cache());
  REQUIRE(p->kernels.size() == 1);
  const Kernel& k = p->kernels[0];
  CHECK(k.name == "ops::inner::mix");
  REQUIRE(k.signature);
  const auto& ps = k.signature->params;
  REQUIRE(ps.size() == 7);
  CHECK(ps[0].type == "float2");
  CHECK(ps[0].size == 8);
  CHECK(ps[1].kind == Param::Kind::pointer);
  CHECK(ps[1].type == "int*");
  CHECK(ps[1].is_const);
  CHECK(ps[2].size == 16);
  CHECK(ps[2].align == 16);
  CHECK(ps[3].type == "__nv_bfloat16");
  CHECK(ps[3].size == 2);
  CHECK(ps[4].type == "void");
  CHECK(ps[4].is_const);
  CHECK(ps[5].type == "bool");
  CHECK(ps[6].type == "signed char");
}

TEST_CASE("kernels declared through a macro still get signatures") {
  const char* src = R"(
#define KERNEL(name) extern "C" __global__ void name
KERNEL(hidden)(double* x, unsigned n) { if (threadIdx.x < n) x[threadIdx.x] = 1.0; }
)";
  auto p = compile(src, for_arch(), &memory_cache());
  REQUIRE(p->kernels.size() == 1);
  CHECK(p->kernels[0].name == "hidden");
  REQUIRE(p->kernels[0].signature);
  CHECK(p->kernels[0].signature->to_string() == "(double*, unsigned int)");
}

TEST_CASE("output_program: the same kernels without the layout probe, built once, for the program's target") {
  const char* src = R"(
#define KERNEL(name) extern "C" __global__ void name
KERNEL(hidden)(double* x, unsigned n) { if (threadIdx.x < n) x[threadIdx.x] = 1.0; }
template <class T> __global__ void tk(T* x) { x[0] = T(1); }
)";
  CompileOptions o = for_arch("sm_80");
  o.ptx = true;
  o.name_expressions = {"tk<float>"};
  auto p = compile(src, o, &memory_cache());
  REQUIRE(p->kernels.size() == 2);
  CHECK(p->ptx.find("__jitbridge_layout") != std::string::npos);  // the launched binary holds the probe
  CHECK(p->cubin.find("__jitbridge_layout") != std::string::npos);
  const std::size_t compiles = memory_cache().info().compiles;
  auto out = output_program(p, &memory_cache());
  CHECK(memory_cache().info().compiles == compiles + 1);
  CHECK(out->arch == "sm_80");
  CHECK(out->ptx.find("__jitbridge") == std::string::npos);
  CHECK(out->cubin.find("__jitbridge") == std::string::npos);
  REQUIRE(out->kernels.size() == 2);
  for (const Kernel& k : p->kernels) {
    CHECK(out->cubin.find(k.lowered_name) != std::string::npos);
    REQUIRE(k.signature);  // the probed program keeps them
  }
  CHECK(out->lowered_name("tk<float>") == p->lowered_name("tk<float>"));
  CHECK(output_program(p, &memory_cache())->cubin == out->cubin);  // a cache hit (counted below)
  CHECK(output_program(out, &memory_cache()) == out);                // already without the probe
  CHECK(memory_cache().info().compiles == compiles + 1);
  // The probed program's key is unchanged by the flag's existence: compiling again hits it.
  CHECK(compile(src, o, &memory_cache())->origin == Origin::memory_cache);
  CHECK(memory_cache().info().compiles == compiles + 1);
  auto linked_away = std::make_shared<Program>(*p);
  linked_away->request = nullptr;  // nothing to rebuild from: as is
  CHECK(output_program(linked_away, &memory_cache()) == linked_away);
  CHECK_THROWS_AS(output_program(nullptr), std::invalid_argument);
}

TEST_CASE("a kernel with no parameters and several kernels in one program") {
  const char* src = R"(
extern "C" __global__ void first() {}
extern "C" __global__ void second(int x) {}
)";
  auto p = compile(src, for_arch(), &memory_cache());
  REQUIRE(p->kernels.size() == 2);
  REQUIRE(p->find_kernel("first"));
  REQUIRE(p->find_kernel("first")->signature);
  CHECK(p->find_kernel("first")->signature->params.empty());
  CHECK(p->find_kernel("second")->signature->to_string() == "(int)");
}

TEST_CASE("options, in-memory headers and include paths reach NVRTC") {
  CompileOptions o = for_arch();
  o.options = {"-DWIDTH=3", "-std=c++17", "--use_fast_math"};
  o.headers = {{"config.h", "#define SCALE 2.0f\ntypedef int index_t;\n"}};
  const char* src = R"(
#include "config.h"
extern "C" __global__ void k(float* x, index_t n) { if (threadIdx.x < WIDTH) x[threadIdx.x] *= SCALE; }
)";
  auto p = compile(src, o, &memory_cache());
  REQUIRE(p->find_kernel("k"));
  CHECK(p->find_kernel("k")->signature->to_string() == "(float*, int)");
  bool saw = false;
  for (const auto& opt : p->options) saw = saw || opt == "--use_fast_math";
  CHECK(saw);
}

TEST_CASE("arch-specific targets and PTX on request") {
  CompileOptions o = for_arch("sm_90a");
  o.ptx = true;
  auto p = compile("extern \"C\" __global__ void k(int* x) { *x = 1; }", o, &memory_cache());
  CHECK(p->arch == "sm_90a");
  CHECK_FALSE(p->cubin.empty());
  CHECK(p->ptx.find(".entry k") != std::string::npos);

  auto v = compile("extern \"C\" __global__ void k(int* x) { *x = 2; }", for_arch("compute_90"), &memory_cache());
  CHECK(v->cubin.empty());
  CHECK(v->ptx.find(".entry k") != std::string::npos);
  REQUIRE(v->kernels.size() == 1);
  CHECK(v->kernels[0].signature->to_string() == "(int*)");
  CHECK_FALSE(v->kernels[0].resources.known);
}

TEST_CASE("a malformed or unsupported arch is rejected before compiling") {
  CHECK_THROWS_AS(compile("", for_arch("sm90"), &memory_cache()), std::invalid_argument);
  CHECK_THROWS_WITH(compile("", for_arch("sm_12345"), &memory_cache()), Catch::Contains("cannot build"));
  CompileOptions o = for_arch("sm_90");
  o.options = {"-arch=sm_80"};
  CHECK_THROWS_WITH(compile("", o, &memory_cache()), Catch::Contains("disagrees"));
}

TEST_CASE("compile errors carry the line, a caret, the kernel and the log") {
  const char* src =
      "extern \"C\" __global__ void ok(float* x) { x[0] = 1; }\n"
      "extern \"C\" __global__ void broken(float* x, int n) {\n"
      "  int i = threadIdx.x;\n"
      "  if (i < n) x[i] = undefined_thing(x[i]);\n"
      "}\n";
  CompileOptions o = for_arch();
  o.program_name = "mine.cu";
  o.options = {"-DFOO=1"};
  try {
    compile(src, o, &memory_cache());
    FAIL("no CompileError");
  } catch (const CompileError& e) {
    const auto& d = e.details();
    CHECK(d.line == 4);
    CHECK(d.column == 21);
    CHECK(d.kernel == "broken");
    CHECK(d.program_name == "mine.cu");
    CHECK(d.message.find("undefined_thing") != std::string::npos);
    CHECK(d.source_line == "  if (i < n) x[i] = undefined_thing(x[i]);");
    CHECK(d.log.find("error") != std::string::npos);
    bool has_define = false;
    for (const auto& opt : d.options) has_define = has_define || opt == "-DFOO=1";
    CHECK(has_define);
    std::string what = e.what(); INFO(what);
    CHECK(what.find("mine.cu:4:21: error:") == 0);
    CHECK(what.find("\n 4 |   if (i < n) x[i] = undefined_thing(x[i]);\n   |                     ^") != std::string::npos);
  }
}

TEST_CASE("an error inside an included header names the header") {
  CompileOptions o = for_arch();
  o.headers = {{"bad.h", "int broken_decl = ;\n"}};
  try {
    compile("#include \"bad.h\"\nextern \"C\" __global__ void k() {}\n", o, &memory_cache());
    FAIL("no CompileError");
  } catch (const CompileError& e) {
    CHECK(e.details().file == "bad.h");
    CHECK(e.details().line == 1);
    CHECK(e.details().kernel.empty());
    CHECK(e.details().source_line == "int broken_decl = ;");
    const std::string what = e.what();
    INFO(what);
    CHECK(what.rfind("bad.h:1:", 0) == 0);  // the header and its line, not kernel.cu's
    CHECK(what.find("\n 1 | int broken_decl = ;") != std::string::npos);
  }
}

TEST_CASE("an error on line 5 of a header names that header and line") {
  CompileOptions o = for_arch();
  o.headers = {{"h.h", "// one\n// two\n// three\n// four\n__device__ int f() { return missing_name; }\n"}};
  try {
    compile("#include \"h.h\"\nextern \"C\" __global__ void k(int* x) { x[0] = f(); }\n", o, &memory_cache());
    FAIL("no CompileError");
  } catch (const CompileError& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(what.rfind("h.h:5:", 0) == 0);
    CHECK(what.find("kernel.cu:") == std::string::npos);
    CHECK(what.find("missing_name") != std::string::npos);
  }
}

TEST_CASE("a template kernel asked for by its bare name says how to instantiate it") {
  const char* src = "template <typename T, int N>\n__global__ void scale(T* x, T a) { x[N] *= a; }\n"
                    "namespace ns { template <class U> __global__ void fill(U* x) { x[0] = U(); } }\n";
  auto p = compile(src, for_arch(), &memory_cache());
  CHECK(p->kernels.empty());
  REQUIRE(p->templates.size() == 2);
  CHECK(p->templates[0].name == "scale");
  CHECK(p->templates[0].header == "template <typename T, int N>");
  CHECK(p->templates[1].name == "ns::fill");
  CHECK(p->templates[0].example() == "scale<float, 1>");
  CHECK(TemplateKernel{"f", "template <class T, bool B, typename... Ts>"}.example() == "f<float, true>");
  const std::string m = p->missing_kernel_message("scale");
  INFO(m);
  CHECK(m.find("no kernel 'scale' in the program; it has: none") == 0);
  CHECK(m.find("'scale' is a template kernel (template <typename T, int N>)") != std::string::npos);
  CHECK(m.find("name_expressions=['scale<float, 1>']") != std::string::npos);
  CHECK(p->missing_kernel_message("other").find("template") == std::string::npos);
  // The hint holds for a copy read back from the disk cache too.
  detail::CacheRecord record;
  record.program = p;
  auto back = detail::parse_record(detail::serialize_record("key", record), "key");
  REQUIRE(back);
  CHECK(back->program->missing_kernel_message("scale") == m);
  // An instantiated one is found under its expression.
  CompileOptions o = for_arch();
  o.name_expressions = {"scale<float, 2>"};
  auto q = compile(src, o, &memory_cache());
  CHECK(q->find_kernel("scale<float, 2>") != nullptr);
  CHECK(q->missing_kernel_message("scale").find("it has: scale<float, 2>") != std::string::npos);
}

TEST_CASE("a failing name expression is reported against the expression as written") {
  const char* src = "template <typename T> __global__ void scale(T* x) { x[0] *= 2; }\n";
  CompileOptions o = for_arch();
  o.name_expressions = {"scale<float>", "scale<flaot>"};
  try {
    compile(src, o, &memory_cache());
    FAIL("no CompileError");
  } catch (const CompileError& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(e.details().name_expression == 1);
    CHECK(e.details().message == "name_expressions[1] 'scale<flaot>': identifier \"flaot\" is undefined");
    CHECK(what.rfind("kernel.cu: error: name_expressions[1] 'scale<flaot>': identifier \"flaot\" is undefined", 0) == 0);
    CHECK(what.find("__jitbridge") == std::string::npos);
    CHECK(what.find("nv_mangled_name") == std::string::npos);
    CHECK(what.find("__nv_name_map") == std::string::npos);
  }
  o.name_expressions = {"scale<int, 4>"};
  try {
    compile(src, o, &memory_cache());
    FAIL("no CompileError");
  } catch (const CompileError& e) {
    CHECK(e.details().message.rfind("name_expressions[0] 'scale<int, 4>': ", 0) == 0);
  }
}

TEST_CASE("what() shows a bounded part of the log and of long source lines") {
  std::string src = "extern \"C\" __global__ void k(float* x) {\n";
  for (int i = 0; i < 40; ++i) src += "  x[0] = undefined_" + std::to_string(i) + ";\n";
  src += "}\n" + std::string(100000, ' ') + "int tail_error = ;" + std::string(100000, ' ') + "\n";
  try {
    compile(src, for_arch(), &memory_cache());
    FAIL("no CompileError");
  } catch (const CompileError& e) {
    const std::string what = e.what();
    INFO(what.substr(0, 3000));
    CHECK(what.size() < 8000);
    CHECK(what.find("more lines of the log in CompileError.log") != std::string::npos);
    CHECK(e.details().log.find("undefined_39") != std::string::npos);  // the whole log stays available
  }
  try {
    compile("extern \"C\" __global__ void k() {}\n" + std::string(50000, ' ') + "int e = ;\n", for_arch(), &memory_cache());
    FAIL("no CompileError");
  } catch (const CompileError& e) {
    const std::string what = e.what();
    CHECK(what.size() < 4000);
    CHECK(what.find("more characters]") != std::string::npos);
  }
}

TEST_CASE("a device-side launch without -rdc gets the option to add") {
  try {
    compile("__global__ void child() {}\n__global__ void parent() { child<<<1, 1>>>(); }\n", for_arch(), &memory_cache());
    FAIL("no CompileError");
  } catch (const CompileError& e) {
    CHECK(e.details().message.find("-rdc=true") != std::string::npos);
    CHECK(e.details().line == 2);
  }
}

TEST_CASE("an unknown option is a CompileError, not a crash") {
  CompileOptions o = for_arch();
  o.options = {"--no-such-option"};
  CHECK_THROWS_AS(compile("extern \"C\" __global__ void k() {}", o, &memory_cache()), CompileError);
}

TEST_CASE("warnings are kept on the program") {
  auto p = compile("extern \"C\" __global__ void k() { int unused = 3; }", for_arch(), &memory_cache());
  CHECK(p->log.find("unused") != std::string::npos);
}

// Makes `to` the working directory for a scope and goes back to the old one however the scope ends (a failed
// REQUIRE or an exception included), before the TempDir it points into is removed.
struct WorkingDirectory {
  char old[4096] = {};
  bool moved = false;
  explicit WorkingDirectory(const std::string& to) {
    moved = ::getcwd(old, sizeof old) != nullptr && ::chdir(to.c_str()) == 0;
  }
  ~WorkingDirectory() {  // never throws
    if (moved && ::chdir(old) != 0) {  // nothing to do: the case has ended either way
    }
  }
};

TEST_CASE("a failed compile leaves no trace file in the working directory") {
  const jitbridge::testing::TempDir dir("cwd");
  const WorkingDirectory cwd(dir.path);
  REQUIRE(cwd.moved);
  CompileOptions o = for_arch();
  o.headers = {{"bad.h", "int broken = ;\n"}};
  CHECK_THROWS_AS(compile("#include \"bad.h\"\n", o, &memory_cache()), CompileError);
  compile("extern \"C\" __global__ void after_failure() {}", for_arch(), &memory_cache());
  struct stat st;
  CHECK(::stat(".json", &st) != 0);
}

TEST_CASE("resources read from the cubin agree with ptxas's report") {
  const char* src = R"(
extern "C" __global__ void barrier_and_shared(float* x) {
  __shared__ double s[100];
  s[threadIdx.x] = x[threadIdx.x];
  __syncthreads();
  x[threadIdx.x] = s[99 - threadIdx.x];
}
__device__ float heavy(float v) { float acc = 0; for (int i = 0; i < 100; i++) acc += sinf(v * i) * cosf(acc); return acc; }
extern "C" __global__ void stack_frame(float* x, int n) {
  float r[40];
  for (int i = 0; i < 40; i++) r[i] = x[i * n];
  for (int i = 0; i < n; i++) r[i % 40] += heavy(r[(i * 7) % 40]);
  x[threadIdx.x] = r[threadIdx.x % 40];
}
extern "C" __global__ void plain(int* x) { x[0] = 1; }
)";
  for (const char* arch : {"sm_80", "sm_90"}) {
    INFO(arch);
    auto p = compile(src, for_arch(arch), &memory_cache());
    auto recorded = detail::cubin_resources(p->cubin);
    REQUIRE(recorded.size() == 3);
    for (const Kernel& k : p->kernels) {
      INFO(k.name);
      REQUIRE(k.resources.known);  // from ptxas here
      const Resources& r = recorded.at(k.lowered_name);
      CHECK(r.known);
      CHECK(r.registers == k.resources.registers);
      CHECK(r.local_bytes == k.resources.local_bytes);
      CHECK(r.shared_bytes == k.resources.shared_bytes);
      CHECK(r.barriers == k.resources.barriers);
      CHECK(r.const_bytes == k.resources.const_bytes);
    }
    CHECK(p->find_kernel("barrier_and_shared")->resources.shared_bytes == 800);
    CHECK(p->find_kernel("barrier_and_shared")->resources.barriers == 1);
    CHECK(p->find_kernel("stack_frame")->resources.local_bytes > 0);
  }
}
