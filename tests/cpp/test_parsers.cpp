// test_parsers.cpp — the text parsers of jit/: kernel scan, signature probe, ptxas lines, traces, ELF.
#include <catch2/catch.hpp>

#include "jit_internal.hpp"

using namespace jitbridge;
using namespace jitbridge::detail;

TEST_CASE("scan_kernels finds kernels through attributes, namespaces and extern blocks") {
  const char* src = R"SRC(
// __global__ void commented_out(int)
/* __global__ void also_commented(int) */
#define NOT_A_KERNEL "__global__ void in_string(int)"
extern "C" __global__ void __launch_bounds__(256, 2) first(const float* __restrict__ a) {}
extern "C" {
  __global__ void in_extern_block(int) {}
}
namespace outer { inline namespace v1 {
  __global__ void __cluster_dims__(2, 1, 1) nested(int) {}
} }
namespace { __global__ void anonymous(int) {} }
template <class T> __global__ void templated(T*) {}
struct S { void method(); };
__global__ void first(const float* __restrict__ a);
static __global__ void plain(char c) {}
)SRC";
  auto found = scan_kernels(src);
  std::vector<std::string> names;
  for (const auto& k : found) names.push_back(k.qualified_name + (k.is_template ? "<>" : ""));
  CHECK(names == std::vector<std::string>{"first", "in_extern_block", "outer::v1::nested", "anonymous",
                                          "templated<>", "plain"});
  CHECK(found[0].line == 5);
}

TEST_CASE("parse_probe reads types, sizes and alignments") {
  auto sig = parse_probe(
      "__jitbridge_layout<void (*)(float const*, __half*, int, Params, unsigned long long), "
      "8ull, 8ull, 4ull, 16ull, 8ull, 8ull, 8ull, 4ull, 8ull, 8ull, "
      "4ull, 2ull, 0ull, 0ull, 0ull, 4ull, 2ull, 0ull, 0ull, 0ull>");
  REQUIRE(sig);
  REQUIRE(sig->params.size() == 5);
  CHECK(sig->params[0].kind == Param::Kind::pointer);
  CHECK(sig->params[0].is_const);
  CHECK(sig->params[0].type == "float");
  CHECK(sig->params[3].type == "Params");
  CHECK(sig->params[3].size == 16);
  CHECK(sig->params[3].align == 8);
  CHECK(sig->to_string() == "(float const*, __half*, int, Params, unsigned long long)");
  CHECK(sig->params[0].pointee_size == 4);
  CHECK(sig->params[0].pointee_align == 4);
  CHECK(sig->params[1].pointee_size == 2);
  CHECK(sig->params[1].pointee_align == 2);
  CHECK(sig->params[2].pointee_size == 0);  // no pointer

  auto empty = parse_probe("__jitbridge_layout<void (*)()>");
  REQUIRE(empty);
  CHECK(empty->params.empty());
  CHECK_FALSE(parse_probe("__jitbridge_layout<void>"));  // a name expression that is no kernel
  CHECK_THROWS(parse_probe("void something_else<int>()"));
  CHECK_THROWS(parse_probe("__jitbridge_layout<void (*)(int, int), 4ull>"));
  // The format before pointee sizes (two values per parameter) is refused, not misread.
  CHECK_THROWS(parse_probe("__jitbridge_layout<void (*)(int, int), 4ull, 4ull, 4ull, 4ull>"));
}

TEST_CASE("parse_param tells pointers, const pointees and values apart") {
  CHECK(parse_param("int* const*").type == "int*");
  CHECK(parse_param("int* const*").is_const);
  CHECK(parse_param("const char*").is_const);
  CHECK(parse_param("const char*").type == "char");
  CHECK(parse_param("float volatile*").type == "float");
  CHECK(parse_param("jitbridge::Tensor<float, 2>").kind == Param::Kind::value);
  CHECK(parse_param("void (*)(int)").kind == Param::Kind::value);
  CHECK(split_top_level("a, b<c, d>, e (*)(f, g)") == std::vector<std::string>{"a", "b<c, d>", "e (*)(f, g)"});
}

TEST_CASE("parse_ptxas_info reads registers, barriers, shared memory, stack and spills") {
  const char* log =
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function '_Z1kPf' for 'sm_90'\n"
      "ptxas info    : Function properties for _Z1kPf\n"
      "ptxas         .     24 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads\n"
      "ptxas info    : Used 40 registers, used 1 barriers, 128 bytes smem, 360 bytes cmem[0]\n"
      "ptxas info    : Compile time = 2.3 ms\n"
      "x.cu(3): warning #177-D: variable \"v\" was declared but never referenced\n";
  std::string rest;
  auto r = parse_ptxas_info(log, &rest);
  REQUIRE(r.count("_Z1kPf"));
  const Resources& k = r["_Z1kPf"];
  CHECK(k.known);
  CHECK(k.registers == 40);
  CHECK(k.barriers == 1);
  CHECK(k.shared_bytes == 128);
  CHECK(k.const_bytes == 360);
  CHECK(k.local_bytes == 24);
  CHECK(k.spill_store_bytes == 8);
  CHECK(k.spill_load_bytes == 4);
  CHECK(rest == "x.cu(3): warning #177-D: variable \"v\" was declared but never referenced\n");
}

TEST_CASE("parse_ptxas_info keeps several kernels apart") {
  const char* log =
      "ptxas info    : Compiling entry function 'b' for 'sm_90'\n"
      "ptxas info    : Function properties for b\n"
      "ptxas         .     192 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 40 registers, used 0 barriers, 192 bytes cumulative stack size\n"
      "ptxas info    : Compiling entry function 'a' for 'sm_90'\n"
      "ptxas info    : Function properties for a\n"
      "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 12 registers, used 1 barriers, 256 bytes smem\n";
  auto r = parse_ptxas_info(log, nullptr);
  CHECK(r["b"].registers == 40);
  CHECK(r["b"].local_bytes == 192);
  CHECK(r["b"].shared_bytes == 0);
  CHECK(r["a"].registers == 12);
  CHECK(r["a"].barriers == 1);
  CHECK(r["a"].shared_bytes == 256);
  CHECK(r["a"].local_bytes == 0);
}

TEST_CASE("trace_headers lists each header once and refuses malformed traces") {
  const char* trace = R"JSON({"traceEvents": [{}, {"name":"Processing Header File","args":{"detail":"a.h"}},
    {"name":"Scanning Function Body","args":{"detail":"k(int)"}},
    {"name":"Processing Header File","args":{"detail":"dir/with \"quote\".h"}},
    {"name":"Processing Header File","args":{"detail":"a.h"}}]})JSON";
  CHECK(trace_headers(trace) == std::vector<std::string>{"a.h", "dir/with \"quote\".h"});
  CHECK_THROWS(trace_headers("{\"traceEvents\": [}"));
  CHECK_THROWS(trace_headers("{\"other\": 1}"));
}

TEST_CASE("cubin_kernels refuses what is not an ELF image") {
  CHECK_THROWS(cubin_kernels("not an elf at all, but long enough to hold a header of sixty-four bytes"));
  CHECK_THROWS(cubin_kernels(""));
}

TEST_CASE("diagnostics without a location still produce a message") {
  auto d = parse_diagnostics("nvrtc: error: invalid value for --gpu-architecture (-arch)", "", "k.cu", {});
  CHECK(d.line == 0);
  CHECK(d.message == "invalid value for --gpu-architecture (-arch)");
  CHECK(format_compile_error(d).rfind("k.cu: error: invalid value", 0) == 0);
}

TEST_CASE("diagnostics: an error at the end of the source points at what its note names") {
  const std::string log =
      "At end of source: error: expected a \"}\"\n"
      "k.cu(2): note #3196-D: to match this \"{\"\n"
      "  void f() {\n"
      "           ^\n\n1 error detected in the compilation of \"k.cu\".\n";
  auto d = parse_diagnostics(log, "// x\nvoid f() {\n", "k.cu", {});
  CHECK(d.message == "expected a \"}\" at the end of the source, to match this \"{\"");
  CHECK(d.file == "k.cu");
  CHECK(d.line == 2);
  CHECK(d.column == 10);
  CHECK(d.source_line == "void f() {");
  auto bare = parse_diagnostics("At end of source: error: expected a \";\"\n", "", "k.cu", {});
  CHECK(bare.message == "expected a \";\" at the end of the source");
  CHECK(bare.line == 0);
  auto other = parse_diagnostics("something odd\nfatal: an error we do not know\n", "", "k.cu", {});
  CHECK(other.message == "fatal: an error we do not know");  // the first line that mentions an error
}

TEST_CASE("parse_diagnostics locates the code generator's capitalised errors") {
  auto d = parse_diagnostics(
      "k.cu(3): Error: Formal parameter space overflowed (32768 bytes required, max 32764 bytes allowed) in "
      "function k\n",
      "// x\nstruct Big { char b[32768]; };\nextern \"C\" __global__ void k(Big b) {}\n", "k.cu",
      {{"k", 3, false, ""}});
  CHECK(d.file == "k.cu");
  CHECK(d.line == 3);
  CHECK(d.kernel == "k");
  CHECK(d.message == "Formal parameter space overflowed (32768 bytes required, max 32764 bytes allowed) in function k");
  CHECK(parse_diagnostics("k.cu(3): Errors: 2\n", "", "k.cu", {}).line == 0);  // only "Error: " is one
}

TEST_CASE("diagnostics: line numbers past int and a bare 'catastrophic' are not located errors (fuzz findings)") {
  // Both used to be undefined behaviour: a signed overflow, and remove_prefix past the end.
  auto big = parse_diagnostics("k.cu(99999999999): error: x", "", "k.cu", {});
  CHECK(big.line == 0);
  auto bare = parse_diagnostics("k.cu(3): catastrophic", "", "k.cu", {});
  CHECK(bare.line == 0);
  CHECK(bare.message == "k.cu(3): catastrophic");  // no line of a known form: the log's first line
  auto real = parse_diagnostics("k.cu(3): catastrophic error: cannot open source file \"x.h\"", "a\nb\nc\n", "k.cu", {});
  CHECK(real.line == 3);
  CHECK(real.source_line == "c");
  CHECK(real.message.rfind("cannot open source file \"x.h\" (NVRTC searches only the directories given with "
                           "include_paths=[...] (command line: -I DIR)", 0) == 0);
  auto at_max = parse_diagnostics("k.cu(2147483647): error: y", "", "k.cu", {});
  CHECK(at_max.line == 2147483647);
}

TEST_CASE("Hasher separates fields") {
  Hasher a, b;
  a.field("ab").field("c");
  b.field("a").field("bc");
  CHECK(a.hex() != b.hex());
  CHECK(hash_hex("x").size() == 32);
}
