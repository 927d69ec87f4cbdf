// test_link.cpp — separate compilation with NVRTC and nvJitLink (no GPU needed): relocatable detection, the device runtime, LTO across programs, link errors, the link cache.
#include <catch2/catch.hpp>
#include <stdlib.h>
#include <unistd.h>

#include <string>

#include "jit_internal.hpp"
#include "jitbridge/cache.hpp"
#include "jitbridge/cuda_search.hpp"
#include "jitbridge/jit.hpp"
#include "jitbridge/link.hpp"
#include "jitbridge/module.hpp"
#include "jitbridge/nvjitlink_api.hpp"
#include "link_internal.hpp"
#include "temp_dir.hpp"

using namespace jitbridge;

namespace {

Cache& memory_cache() {
  static Cache cache(CacheConfig{false, "", 1 << 24});
  return cache;
}

std::shared_ptr<const Program> build(const std::string& source, std::vector<std::string> options,
                                     Cache* cache = &memory_cache()) {
  CompileOptions o;
  o.arch = "sm_90";
  o.options = std::move(options);
  return compile(source, o, cache);
}

const char* const kParentChild = R"(
extern "C" __global__ void child(int* out, int base) { out[threadIdx.x] = base + 3 * (int)threadIdx.x; }
extern "C" __global__ void parent(int* out, int base) {
  if (threadIdx.x == 0) child<<<1, 32>>>(out, base);
}
)";

// A calls an extern __device__ function that B defines.
const char* const kCaller = R"(
extern __device__ float scale_of(float x, int k);
__global__ void apply(const float* in, float* out, int n, int k) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = scale_of(in[i], k);
}
)";
const char* const kCallee = R"(
__device__ float scale_of(float x, int k) { return x * (float)k + 1.0f; }
)";

const Kernel& kernel_named(const Program& p, const char* name) {
  const Kernel* k = p.find_kernel(name);
  REQUIRE(k != nullptr);
  return *k;
}

}  // namespace

TEST_CASE("relocatable options are recognised in every spelling, the last one winning", "[link]") {
  using detail::relocatable_options;
  bool lto = true;
  CHECK(relocatable_options({"-dc"}, &lto));
  CHECK_FALSE(lto);
  CHECK(relocatable_options({"--device-c"}));
  CHECK(relocatable_options({"-rdc=true"}));
  CHECK(relocatable_options({"--relocatable-device-code=true"}));
  CHECK(relocatable_options({"-rdc", "true"}));
  CHECK_FALSE(relocatable_options({"-rdc=false"}));
  CHECK_FALSE(relocatable_options({"-dc", "-rdc=false"}));
  CHECK_FALSE(relocatable_options({"-dc", "-dw"}));
  CHECK_FALSE(relocatable_options({"-DDC=1", "-arch=sm_90"}));
  CHECK(relocatable_options({"-dlto"}, &lto));
  CHECK(lto);
  CHECK(relocatable_options({"--dlink-time-opt"}, &lto));
  CHECK(lto);
}

TEST_CASE("the error log's undefined symbols are found in both of nvJitLink's spellings", "[link]") {
  CHECK(detail::undefined_in_log("error   : Undefined reference to '_Z1fi' in 'a.cu'\nERROR 9: finish") ==
        std::vector<std::string>{"_Z1fi"});
  CHECK(detail::undefined_in_log("ptxas fatal   : Unresolved extern function '__cudaCDP2LaunchDeviceV2'\nx '_Z1fi'") ==
        std::vector<std::string>{"__cudaCDP2LaunchDeviceV2"});
  CHECK(detail::undefined_in_log("nothing here").empty());
  CHECK(detail::is_device_runtime_symbol("__cudaCDP2GetParameterBufferV2"));
  CHECK_FALSE(detail::is_device_runtime_symbol("_Z1fi"));
}

TEST_CASE("a -rdc cubin is ET_REL and names the device runtime symbols; a plain one is ET_EXEC", "[link]") {
  CompileOptions o;
  o.arch = "sm_90";
  auto plain = compile("extern \"C\" __global__ void k(int* p) { *p = 1; }", o, &memory_cache());
  CHECK_FALSE(detail::cubin_is_relocatable(plain->cubin));
  CHECK_FALSE(is_relocatable_cubin(plain->cubin));
  CHECK_FALSE(is_relocatable_cubin("not an elf"));
  CHECK(plain->link_input.empty());
  CHECK_FALSE(plain->linked);

  auto p = build(kParentChild, {"-rdc=true"});
  REQUIRE_FALSE(p->link_input.empty());
  CHECK(detail::cubin_is_relocatable(p->link_input));
  CHECK(is_relocatable_cubin(p->link_input));
  const std::vector<std::string> undefined = detail::cubin_undefined_symbols(p->link_input);
  bool cdp = false;
  for (const std::string& s : undefined) cdp = cdp || detail::is_device_runtime_symbol(s);
  CHECK(cdp);
}

TEST_CASE("a -dc parent/child program is linked with the device runtime inside compile()", "[link]") {
  REQUIRE(device_runtime_pick().found);
  for (const char* flag : {"-dc", "-rdc=true", "--relocatable-device-code=true", "--device-c"}) {
    INFO(flag);
    auto p = build(kParentChild, {flag});
    CHECK(p->linked);
    CHECK_FALSE(p->link_input_is_ltoir);
    REQUIRE_FALSE(p->cubin.empty());
    CHECK_FALSE(detail::cubin_is_relocatable(p->cubin));  // ET_EXEC: the driver loads it
    for (const std::string& s : detail::cubin_undefined_symbols(p->cubin)) CHECK_FALSE(detail::is_device_runtime_symbol(s));
    // Kernels and their signatures survive the link.
    const Kernel& parent = kernel_named(*p, "parent");
    REQUIRE(parent.signature);
    CHECK(parent.signature->to_string() == "(int*, int)");
    CHECK(kernel_named(*p, "child").signature->to_string() == "(int*, int)");
    CHECK(parent.resources.known);
    CHECK(p->kernels.size() == 2);  // not the device runtime's own kernels
  }
}

TEST_CASE("a -dc program without device launches links without the device runtime", "[link]") {
  auto p = build("extern \"C\" __global__ void k(float* p, double s) { *p *= (float)s; }", {"-dc"});
  CHECK(p->linked);
  CHECK(kernel_named(*p, "k").signature->to_string() == "(float*, double)");
  // The device runtime would bring ~200 KB of code.
  CHECK(p->cubin.size() < 64 * 1024);
}

TEST_CASE("-dlto programs are linked with -lto inside compile(); signatures survive", "[link]") {
  auto p = build(kParentChild, {"-dlto"});
  CHECK(p->link_input_is_ltoir);
  CHECK(p->linked);
  REQUIRE_FALSE(p->cubin.empty());
  CHECK(kernel_named(*p, "parent").signature->to_string() == "(int*, int)");
  CHECK(kernel_named(*p, "child").signature->to_string() == "(int*, int)");
  CHECK(p->kernels.size() == 2);

  // Without device launches the device runtime is not linked: it would grow the cubin from ~4 KB to ~200 KB.
  auto small = build("extern \"C\" __global__ void k(float* p, double s) { *p *= (float)s; }", {"-dlto"});
  CHECK(small->linked);
  CHECK(small->cubin.size() < 64 * 1024);
  CHECK(p->cubin.size() > small->cubin.size());

  auto q = build("template <class T> __global__ void fill(T* p, T v) { p[threadIdx.x] = v; }", {"-dlto"});
  CHECK(q->kernels.empty());  // no instantiation: nothing to link in but nothing fails either
  CompileOptions o;
  o.arch = "sm_90";
  o.options = {"-dlto"};
  o.name_expressions = {"fill<float>"};
  auto t = compile("template <class T> __global__ void fill(T* p, T v) { p[threadIdx.x] = v; }", o, &memory_cache());
  CHECK(t->linked);
  CHECK(kernel_named(*t, "fill<float>").signature->to_string() == "(float*, float)");
}

TEST_CASE("a program calling an extern function stays unlinked, and link() joins it with the definer", "[link]") {
  for (const char* flag : {"-dc", "-dlto"}) {
    INFO(flag);
    auto caller = build(kCaller, {flag});
    CHECK_FALSE(caller->linked);
    CHECK(caller->log.find("scale_of(float, int)") != std::string::npos);
    const Kernel& apply = kernel_named(*caller, "apply");  // known before the link
    CHECK(apply.signature->to_string() == "(float const*, float*, int, int)");
    auto callee = build(kCallee, {flag});

    auto linked = link({LinkInput::from_program(caller, "caller.cu"), LinkInput::from_program(callee, "callee.cu")},
                       {}, &memory_cache());
    CHECK(linked->linked);
    CHECK(linked->arch == "sm_90");
    CHECK_FALSE(detail::cubin_is_relocatable(linked->cubin));
    REQUIRE(linked->kernels.size() == 1);
    CHECK(linked->kernels[0].name == "apply");
    CHECK(linked->kernels[0].lowered_name == apply.lowered_name);
    CHECK(linked->kernels[0].signature->to_string() == "(float const*, float*, int, int)");
    CHECK(linked->kernels[0].resources.known);
    CHECK((std::string(flag) == "-dlto") == (std::find(linked->options.begin(), linked->options.end(), "-lto") !=
                                             linked->options.end()));
  }
}

TEST_CASE("a missing symbol raises LinkError naming it demangled, with the log", "[link]") {
  auto caller = build(kCaller, {"-dc"});
  try {
    link({LinkInput::from_program(caller, "caller.cu")}, {}, &memory_cache());
    FAIL("no LinkError");
  } catch (const LinkError& e) {
    const std::string what = e.what();
    CHECK(what.find("undefined reference to `scale_of(float, int)` (_Z8scale_offi)") != std::string::npos);
    REQUIRE(e.details().undefined.size() == 1);
    CHECK(e.details().undefined[0] == "scale_of(float, int)");
    CHECK(e.details().undefined_mangled[0] == "_Z8scale_offi");
    CHECK(e.details().error_log.find("_Z8scale_offi") != std::string::npos);
    CHECK(e.details().code != 0);
  }
  auto lto_caller = build(kCaller, {"-dlto"});
  try {
    link({LinkInput::from_program(lto_caller)}, {}, &memory_cache());
    FAIL("no LinkError");
  } catch (const LinkError& e) {
    CHECK(std::string(e.what()).find("scale_of(float, int)") != std::string::npos);
  }
}

TEST_CASE("every AddData failure is reported, even where Complete would succeed", "[link]") {
  auto lto_callee = build(kCallee, {"-dlto"});
  // LTO-IR refused without -lto: nvJitLink's AddData fails but Complete alone would "succeed".
  CHECK_THROWS_WITH(link({LinkInput::from_program(lto_callee)}, [] {
                      LinkOptions o;
                      o.lto = false;
                      return o;
                    }(), &memory_cache()),
                    Catch::Contains("lto: an input is LTO-IR"));
  try {
    detail::run_link({{LinkInput::Kind::ltoir, lto_callee->link_input, "callee.cu"}}, "sm_90", false, {},
                     LinkOptions::DeviceRuntime::never);
    FAIL("no LinkError");
  } catch (const LinkError& e) {
    CHECK(e.details().input == "callee.cu");
    CHECK(e.details().code == NVJITLINK_ERROR_LTO_NOT_ENABLED);
  }
  // Garbage bytes for a cubin.
  CHECK_THROWS_AS(link({LinkInput::from_bytes(LinkInput::Kind::cubin, "garbage", "g.cubin")}, {}, &memory_cache()),
                  LinkError);
}

TEST_CASE("bad link inputs are refused naming the argument", "[link]") {
  CHECK_THROWS_WITH(link({}, {}, &memory_cache()), Catch::Contains("inputs: nothing to link"));
  CHECK_THROWS_WITH(link({LinkInput::from_program(nullptr)}, {}, &memory_cache()),
                    Catch::Contains("inputs[0]: the program is null"));
  CompileOptions o;
  o.arch = "sm_90";
  auto plain = compile("extern \"C\" __global__ void k(int* p) { *p = 1; }", o, &memory_cache());
  CHECK_THROWS_WITH(link({LinkInput::from_program(plain)}, {}, &memory_cache()),
                    Catch::Contains("inputs[0]: the program was not compiled for linking"));
  auto callee = build(kCallee, {"-dc"});
  CHECK_THROWS_WITH(link({LinkInput::from_program(callee), LinkInput::from_bytes(LinkInput::Kind::ptx, "")}, {},
                         &memory_cache()),
                    Catch::Contains("inputs[1] (ptx): empty"));
  LinkOptions other;
  other.arch = "sm_80";
  CHECK_THROWS_WITH(link({LinkInput::from_program(callee)}, other, &memory_cache()),
                    Catch::Contains("inputs[0]: the program was compiled for sm_90, the link is for sm_80"));
  LinkOptions virt;
  virt.arch = "compute_90";
  CHECK_THROWS_WITH(link({LinkInput::from_bytes(LinkInput::Kind::ptx, "x")}, virt, &memory_cache()),
                    Catch::Contains("virtual target"));
  CHECK_THROWS_WITH(LinkInput::from_file("/nonexistent/lib.a"), Catch::Contains("/nonexistent/lib.a: cannot be read"));
  CHECK_THROWS_WITH(LinkInput::from_file("/etc/hostname"), Catch::Contains("not known from its extension"));
  CHECK(parse_link_kind("ltoir") == LinkInput::Kind::ltoir);
  CHECK_FALSE(parse_link_kind("elf"));
}

TEST_CASE("PTX, cubin and static library inputs link with a program", "[link]") {
  // B as PTX text (from a -dc compile) and as its relocatable cubin.
  CompileOptions o;
  o.arch = "sm_90";
  o.options = {"-dc"};
  o.ptx = true;
  auto callee = compile(kCallee, o, &memory_cache());
  auto caller = build(kCaller, {"-dc"});
  auto with_ptx = link({LinkInput::from_program(caller), LinkInput::from_bytes(LinkInput::Kind::ptx, callee->ptx, "b.ptx")},
                       {}, &memory_cache());
  CHECK(with_ptx->find_kernel("apply"));
  auto with_cubin = link({LinkInput::from_program(caller),
                          LinkInput::from_bytes(LinkInput::Kind::cubin, callee->link_input, "b.cubin")},
                         {}, &memory_cache());
  CHECK(with_cubin->find_kernel("apply"));
  // The device runtime itself, given as a library input by path.
  auto p = build(kParentChild, {"-dc"});
  LinkOptions never;
  never.device_runtime = LinkOptions::DeviceRuntime::never;
  CHECK_THROWS_AS(link({LinkInput::from_program(p)}, never, &memory_cache()), LinkError);
  auto with_lib = link({LinkInput::from_program(p), LinkInput::from_file(device_runtime_pick().path)}, never,
                       &memory_cache());
  CHECK(with_lib->find_kernel("parent"));
  CHECK(with_lib->kernels.size() == 2);
}

TEST_CASE("linked results are cached in memory and on disk; a changed input misses", "[link]") {
  const jitbridge::testing::TempDir temp("link-test");
  const std::string& dir = temp.path;
  auto caller = build(kCaller, {"-dc"});
  auto callee = build(kCallee, {"-dc"});
  std::vector<LinkInput> inputs{LinkInput::from_program(caller), LinkInput::from_program(callee)};
  {
    Cache disk(CacheConfig{true, dir, 1 << 26});
    auto first = link(inputs, {}, &disk);
    CHECK(first->origin == Origin::compiled);
    auto second = link(inputs, {}, &disk);
    CHECK(second->origin == Origin::memory_cache);
    CHECK(second->cubin == first->cubin);
    LinkOptions opt;
    opt.options = {"-O0"};
    CHECK(link(inputs, opt, &disk)->origin == Origin::compiled);  // options are in the key
  }
  {
    Cache disk(CacheConfig{true, dir, 1 << 26});  // a new process, as far as the cache can tell
    auto again = link(inputs, {}, &disk);
    CHECK(again->origin == Origin::disk_cache);
    CHECK(again->linked);
    REQUIRE(again->kernels.size() == 1);
    CHECK(again->kernels[0].signature->to_string() == "(float const*, float*, int, int)");
    auto changed = build("__device__ float scale_of(float x, int k) { return x * (float)k + 2.0f; }", {"-dc"});
    auto miss = link({LinkInput::from_program(caller), LinkInput::from_program(changed)}, {}, &disk);
    CHECK(miss->origin == Origin::compiled);
    CHECK(miss->cubin != again->cubin);
    disk.clear();
  }
}

TEST_CASE("compile() of a relocatable program round-trips its link fields through the disk cache", "[link]") {
  const jitbridge::testing::TempDir temp("link-test");
  const std::string& dir = temp.path;
  std::string first_cubin;
  {
    Cache disk(CacheConfig{true, dir, 1 << 26});
    auto p = build(kParentChild, {"-dc"}, &disk);
    first_cubin = p->cubin;
  }
  {
    Cache disk(CacheConfig{true, dir, 1 << 26});
    auto p = build(kParentChild, {"-dc"}, &disk);
    CHECK(p->origin == Origin::disk_cache);
    CHECK(p->linked);
    CHECK(detail::cubin_is_relocatable(p->link_input));
    CHECK(p->cubin == first_cubin);
    disk.clear();
  }
}

TEST_CASE("module loading refuses unlinked relocatable code before asking the driver", "[link]") {
  auto caller = build(kCaller, {"-dc"});
  REQUIRE_FALSE(caller->linked);
  CHECK_THROWS_WITH(Module::from_program(caller), Catch::Contains("is not linked"));
  CHECK_THROWS_WITH(Module::from_image(caller->link_input), Catch::Contains("relocatable cubin"));
  auto lto_caller = build(kCaller, {"-dlto"});
  CHECK_THROWS_WITH(Module::from_program(lto_caller), Catch::Contains("is not linked"));
}

TEST_CASE("output_link: the same link from the programs without the layout probe; link() keeps what launches") {
  const std::vector<std::string> dc = {"-dc"};
  auto caller = build(kCaller, dc);
  auto callee = build(std::string(kCallee) + "// output_link\n", dc);
  const std::vector<LinkInput> inputs = {LinkInput::from_program(caller), LinkInput::from_program(callee)};
  auto linked = link(inputs, {}, &memory_cache());
  CHECK(linked->cubin.find("__jitbridge_layout") != std::string::npos);  // the programs as compiled
  CHECK(kernel_named(*linked, "apply").signature);
  auto out = output_link(inputs, {}, &memory_cache());
  CHECK(out->linked);
  CHECK(out->arch == linked->arch);
  CHECK(out->cubin.find("__jitbridge") == std::string::npos);
  CHECK(out->cubin.find(kernel_named(*linked, "apply").lowered_name) != std::string::npos);
  const std::uint64_t links = memory_cache().info().links, compiles = memory_cache().info().compiles;
  CHECK(output_link(inputs, {}, &memory_cache())->cubin == out->cubin);  // hits only
  CHECK(memory_cache().info().links == links);
  CHECK(memory_cache().info().compiles == compiles);
}
