// test_targets.cpp — CUDA targets: parsing, and the table of which compute capabilities run code built for each.
#include <catch2/catch.hpp>

#include <stdexcept>

#include "jitbridge/jit.hpp"
#include "jitbridge/targets.hpp"

using namespace jitbridge;

TEST_CASE("parse_target reads every spelling NVRTC takes") {
  Target t = parse_target("sm_90");
  CHECK((t.kind == Target::Kind::sass && t.variant == Target::Variant::plain && t.major == 9 && t.minor == 0));
  t = parse_target("sm_90a");
  CHECK((t.variant == Target::Variant::arch_specific && t.major == 9 && t.minor == 0));
  t = parse_target("sm_100f");
  CHECK((t.variant == Target::Variant::family && t.major == 10 && t.minor == 0));
  t = parse_target("sm_103");
  CHECK((t.major == 10 && t.minor == 3));
  t = parse_target("compute_86");
  CHECK((t.kind == Target::Kind::ptx && t.variant == Target::Variant::plain && t.major == 8 && t.minor == 6));
  t = parse_target("compute_120a");
  CHECK((t.kind == Target::Kind::ptx && t.variant == Target::Variant::arch_specific && t.major == 12));
  for (const char* name : {"sm_75", "sm_90a", "sm_100f", "compute_121", "compute_90a", "compute_100f"})
    CHECK(parse_target(name).name() == name);
}

TEST_CASE("parse_target refuses what is not a target, naming it") {
  for (const char* bad : {"", "sm", "sm_", "sm_9", "sm_90b", "sm_90af", "90", "compute90", "SM_90", "sm_9x0",
                          "sm_1234567", "gfx90a", "sm_90 ", " sm_90"}) {
    INFO(bad);
    try {
      parse_target(bad);
      FAIL("accepted");
    } catch (const std::invalid_argument& e) {
      CHECK(std::string(e.what()).find(std::string("'") + bad + "' is not a CUDA target") != std::string::npos);
    }
  }
}

namespace {
struct Row {
  const char* target;
  int major, minor;
  bool runs;
};
}  // namespace

TEST_CASE("runs_on follows CUDA's compatibility rules") {
  const Row table[] = {
      // Plain cubins: same major, device minor >= the target's.
      {"sm_90", 9, 0, true},      {"sm_80", 8, 0, true},     {"sm_80", 8, 6, true},    {"sm_80", 8, 9, true},
      {"sm_86", 8, 0, false},     {"sm_86", 8, 6, true},     {"sm_86", 8, 9, true},    {"sm_89", 8, 6, false},
      {"sm_80", 9, 0, false},     {"sm_90", 8, 9, false},    {"sm_90", 10, 0, false},  {"sm_100", 10, 0, true},
      {"sm_100", 10, 3, true},    {"sm_100", 12, 0, false},  {"sm_103", 10, 0, false}, {"sm_120", 12, 0, true},
      {"sm_120", 12, 1, true},    {"sm_120", 10, 0, false},  {"sm_121", 12, 0, false}, {"sm_75", 7, 5, true},
      {"sm_75", 8, 0, false},
      // Arch-specific cubins: exactly that capability.
      {"sm_90a", 9, 0, true},     {"sm_90a", 9, 1, false},   {"sm_90a", 10, 0, false}, {"sm_90a", 8, 9, false},
      {"sm_100a", 10, 0, true},   {"sm_100a", 10, 3, false}, {"sm_120a", 12, 0, true}, {"sm_120a", 12, 1, false},
      // Family cubins: the same major, minor >= the target's.
      {"sm_100f", 10, 0, true},   {"sm_100f", 10, 3, true},  {"sm_100f", 11, 0, false}, {"sm_100f", 12, 0, false},
      {"sm_103f", 10, 0, false},  {"sm_103f", 10, 3, true},  {"sm_120f", 12, 1, true},  {"sm_120f", 10, 0, false},
      // Plain PTX: any capability at least the target's, across majors.
      {"compute_80", 8, 0, true}, {"compute_80", 8, 6, true}, {"compute_80", 9, 0, true}, {"compute_80", 12, 0, true},
      {"compute_86", 8, 0, false}, {"compute_90", 8, 9, false}, {"compute_90", 9, 0, true}, {"compute_90", 10, 0, true},
      {"compute_100", 9, 0, false}, {"compute_75", 7, 5, true}, {"compute_75", 7, 0, false},
      // Arch-specific PTX: exactly that capability; family PTX: its family.
      {"compute_90a", 9, 0, true}, {"compute_90a", 10, 0, false}, {"compute_100a", 10, 3, false},
      {"compute_100f", 10, 3, true}, {"compute_100f", 12, 0, false}, {"compute_100f", 9, 0, false},
  };
  for (const Row& r : table) {
    INFO(r.target << " on " << r.major << "." << r.minor);
    const Target t = parse_target(r.target);
    CHECK(runs_on(t, r.major, r.minor) == r.runs);
    const std::string why = why_not(t, r.major, r.minor, "cuda:0");
    CHECK(why.empty() == r.runs);
    if (!r.runs) {
      CHECK(why.find(r.target) == 0);
      CHECK(why.find(std::to_string(r.major) + "." + std::to_string(r.minor)) != std::string::npos);
    }
  }
}

TEST_CASE("why_not states the rule that failed") {
  CHECK(why_not(parse_target("sm_100"), 12, 0, "cuda:1") ==
        "sm_100 code runs only on compute capability 10.x; cuda:1 is 12.0");
  CHECK(why_not(parse_target("sm_86"), 8, 0, "cuda:0") ==
        "sm_86 code runs only on compute capability 8.6 to 8.9; cuda:0 is 8.0");
  CHECK(why_not(parse_target("sm_90a"), 10, 0, "cuda:0") ==
        "sm_90a code runs only on compute capability 9.0 exactly; cuda:0 is 10.0");
  CHECK(why_not(parse_target("compute_90"), 8, 9, "cuda:2") ==
        "compute_90 PTX runs only on compute capability 9.0 or later; cuda:2 is 8.9");
  CHECK(why_not(parse_target("sm_100f"), 12, 0, "cuda:0") ==
        "sm_100f code runs only on compute capability 10.x; cuda:0 is 12.0");
  CHECK(native_target(9, 0) == "sm_90");
  CHECK(native_target(12, 1) == "sm_121");
}

TEST_CASE("builds of one request for two targets must give the same kernels and signatures") {
  const char* same = "extern \"C\" __global__ void k(float* x, int n) { if (n) x[0] = 1; }";
  const char* drifting = R"(
#if __CUDA_ARCH__ >= 900
typedef double real;
#else
typedef float real;
#endif
extern "C" __global__ void k(real* x, int n) { if (n) x[0] = 1; }
)";
  CompileOptions sm80, sm90;
  sm80.arch = "sm_80";
  sm90.arch = "sm_90";
  CHECK(kernel_difference(*compile(same, sm80), *compile(same, sm90)).empty());
  CHECK(kernel_difference(*compile(drifting, sm80), *compile(drifting, sm90)) ==
        "kernel 'k' is k(double*, int) in the sm_90 build but k(float*, int) in the sm_80 build");
  CHECK(kernel_difference(*compile(same, sm80), *compile("extern \"C\" __global__ void j() {}", sm90)) ==
        "kernel 'k' is missing from the sm_90 build");
}

TEST_CASE("a program keeps its compile request, relative include paths made absolute") {
  CompileOptions o;
  o.options = {"-Irel", "-I", "rel2", "--include-path=rel3", "-DX=1"};
  o.include_paths = {"inc"};
  const std::string source = "extern \"C\" __global__ void k(int* x) { x[0] = X; }";
  auto p = compile(source, o);
  REQUIRE(p->request);
  CHECK(p->request->source == source);
  CHECK_FALSE(p->request->arch_given);
  const std::string& first = p->request->options.options[0];
  CHECK((first.size() > 6 && first.rfind("-I/", 0) == 0 && first.substr(first.size() - 4) == "/rel"));
  CHECK(p->request->options.options[1] == "-I");
  CHECK(p->request->options.options[2].front() == '/');
  CHECK(p->request->options.options[3].rfind("--include-path=/", 0) == 0);
  CHECK(p->request->options.options[4] == "-DX=1");
  CHECK(p->request->options.include_paths[0].front() == '/');
  // The same program asked for with an explicit target: its own request; the cached program is shared.
  CompileOptions explicit_arch = o;
  explicit_arch.arch = p->arch;
  auto q = compile(source, explicit_arch);
  CHECK(q->request->arch_given);
  CHECK(q->cubin == p->cubin);
  CHECK(compile(source, o)->request->arch_given == false);
  CompileOptions in_options = o;
  in_options.options.push_back("-arch=" + p->arch);
  CHECK(compile(source, in_options)->request->arch_given);
}
