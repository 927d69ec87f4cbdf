// test_signature_split.cpp — signatures whose probe names are too long for the demangler: the count read off the name, the reads by parts.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include "jit_internal.hpp"
#include "jitbridge/cache.hpp"
#include "nvrtc_program.hpp"

using namespace jitbridge;
using namespace jitbridge::detail;

namespace {

// One parameter as the fake compiler below mangles it: its Itanium type, printed spelling and layout.
struct FakeParam {
  std::string mangled, spelling;
  std::size_t size, align, pointee_size = 0, pointee_align = 0;
};

// The lowered name NVRTC gives __jitbridge_layout<void (*)(params...), values...>.
std::string probe_name(const std::vector<FakeParam>& params) {
  std::string types, values;
  for (const FakeParam& p : params) types += p.mangled;
  if (params.empty()) types = "v";
  for (auto field : {&FakeParam::size, &FakeParam::align, &FakeParam::pointee_size, &FakeParam::pointee_align})
    for (const FakeParam& p : params) values += fmt::format("Ly{}E", p.*field);
  return "_Z18__jitbridge_layoutIPFv" + types + "EJ" + values + "EE";
}

FakeParam int_param() { return {"i", "int", 4, 4}; }

// A struct by value whose mangled name takes `length` + 3 characters.
FakeParam long_struct(std::size_t length, char fill) {
  const std::string name(length, fill);
  return {fmt::format("{}{}", name.size(), name), name, 8, 4};
}

// Answers part probes the way NVRTC would for kernels of these function types (each named by
// whole_probe/chunk_probe/param_probe of its type), and records what it was asked.
struct FakeCompiler {
  std::map<std::string, std::vector<FakeParam>> kernels;  // function type -> parameters
  std::vector<std::vector<std::string>> calls;
  bool fail = false;

  std::map<std::string, std::string> names() const {
    std::map<std::string, std::string> out;
    for (const auto& [type, params] : kernels) {
      out[whole_probe(type)] = probe_name(params);
      for (std::size_t c = 0; c * kProbeChunk < params.size(); ++c) {
        const std::size_t end = std::min(params.size(), (c + 1) * kProbeChunk);
        out[chunk_probe(type, c)] = probe_name({params.begin() + c * kProbeChunk, params.begin() + end});
      }
      for (std::size_t i = 0; i < params.size(); ++i) out[param_probe(type, i)] = probe_name({params[i]});
    }
    return out;
  }
  // What the first compile gives: the whole probes' names.
  std::map<std::string, std::string> first_pass() const {
    std::map<std::string, std::string> out;
    for (const auto& [type, params] : kernels) out[whole_probe(type)] = probe_name(params);
    return out;
  }
  LowerNames lower() {
    return [this](const std::vector<std::string>& expressions) -> std::optional<std::map<std::string, std::string>> {
      calls.push_back(expressions);
      if (fail) return std::nullopt;
      const std::map<std::string, std::string> all = names();
      std::map<std::string, std::string> out;
      for (const std::string& e : expressions) {
        auto it = all.find(e);
        REQUIRE(it != all.end());  // only expressions of the three forms, for kernels asked about
        out[e] = it->second;
      }
      return out;
    };
  }
};

void check_params(const Signature& sig, const std::vector<FakeParam>& want) {
  REQUIRE(sig.params.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    INFO("parameter " << i);
    CHECK(sig.params[i].spelling == want[i].spelling);
    CHECK(sig.params[i].size == want[i].size);
    CHECK(sig.params[i].align == want[i].align);
    CHECK(sig.params[i].pointee_size == want[i].pointee_size);
    CHECK(sig.params[i].pointee_align == want[i].pointee_align);
  }
}

// A mix of parameters whose order a read could get wrong: each position's type differs from its neighbours'.
std::vector<FakeParam> mixed(std::size_t n) {
  const std::vector<FakeParam> kinds = {
      int_param(), {"Pf", "float*", 8, 8, 4, 4}, {"PKd", "double const*", 8, 8, 8, 8}, {"d", "double", 8, 8},
      {"h", "unsigned char", 1, 1}, {"P6float4", "float4*", 8, 8, 16, 16}, {"Pv", "void*", 8, 8},
      {"6Params", "Params", 16, 8}, {"x", "long long", 8, 8}, {"b", "bool", 1, 1}, {"s", "short", 2, 2}};
  std::vector<FakeParam> out;
  for (std::size_t i = 0; i < n; ++i) out.push_back(kinds[(i * 7 + i / kinds.size()) % kinds.size()]);
  return out;
}

}  // namespace

TEST_CASE("libstdc++'s demangler refuses names over 1024 characters: 59 int parameters make one", "[signature]") {
  const std::string n58 = probe_name(std::vector<FakeParam>(58, int_param()));
  const std::string n59 = probe_name(std::vector<FakeParam>(59, int_param()));
  CHECK(n58.size() == 1016);  // the names NVRTC 13 gives these probes, byte for byte
  CHECK(n59.size() == 1033);
  REQUIRE(demangled(n58));
  CHECK(parse_probe(*demangled(n58))->params.size() == 58);
#ifdef __GLIBCXX__
  // The cause of the issue: a valid name, refused for its length alone (status -2).
  CHECK_FALSE(demangled(n59));
  const std::string name1024 = "_Z1017" + std::string(1017, 'a') + "v", name1025 = "_Z1018" + std::string(1018, 'a') + "v";
  REQUIRE(name1024.size() == 1024);
  REQUIRE(name1025.size() == 1025);
  CHECK(demangled(name1024));
  CHECK_FALSE(demangled(name1025));
#endif
  CHECK(demangle(n59).size() == n59.size());  // demangle() hands a refused name back unchanged
}

TEST_CASE("probe_parameter_count reads the layout values that close a probe name", "[signature]") {
  CHECK(probe_parameter_count(probe_name({})) == 0u);
  CHECK(probe_parameter_count(probe_name(std::vector<FakeParam>(59, int_param()))) == 59u);
  CHECK(probe_parameter_count(probe_name(mixed(300))) == 300u);
  CHECK(probe_parameter_count(probe_name({long_struct(1100, 'q'), int_param()})) == 2u);
  // Values with many digits, and a last parameter type that looks like a value ("struct Ly4E").
  CHECK(probe_parameter_count(probe_name({{"Pc", "char*", 8, 8, 4294967296, 1}})) == 1u);
  CHECK(probe_parameter_count(probe_name({int_param(), {"4Ly4E", "Ly4E", 4, 4}})) == 2u);

  const std::string good = probe_name({int_param(), int_param()});
  CHECK_FALSE(probe_parameter_count("_Z1fv"));
  CHECK_FALSE(probe_parameter_count(good.substr(0, good.size() - 1)));           // the arguments' E missing
  CHECK_FALSE(probe_parameter_count("_Z18__jitbridge_layoutIPFviiEJLy4ELy4ELy4EEE"));  // 3 values for 2
  CHECK_FALSE(probe_parameter_count("_Z18__jitbridge_layoutIPFviiEJLy4ELy4ELy4ELx4EEE"));  // not ull
  CHECK_FALSE(probe_parameter_count("_Z18__jitbridge_layoutIvJEE"));  // the primary template: no function type
}

TEST_CASE("read_signatures: whole names that demangle need no compile", "[signature]") {
  FakeCompiler fake;
  fake.kernels["decltype(&a)"] = mixed(5);
  fake.kernels["decltype(&none)"] = {};
  const std::map<std::string, std::string> first = fake.first_pass();
  auto sigs = read_signatures({"decltype(&a)", "decltype(&none)"}, first, fake.lower());
  CHECK(fake.calls.empty());
  REQUIRE(sigs[0]);
  check_params(*sigs[0], mixed(5));
  REQUIRE(sigs[1]);
  CHECK(sigs[1]->params.empty());
}

TEST_CASE("read_signatures: 59 to 300 parameters come back by chunks of 16, in one compile", "[signature]") {
  for (std::size_t n : {59, 64, 100, 256, 300}) {
    INFO(n << " parameters");
    FakeCompiler fake;
    fake.kernels["decltype(&ints)"] = std::vector<FakeParam>(n, int_param());
    fake.kernels["decltype(&mix)"] = mixed(n);
    fake.kernels["decltype(&small)"] = mixed(3);
    auto sigs = read_signatures({"decltype(&ints)", "decltype(&mix)", "decltype(&small)"}, fake.first_pass(), fake.lower());
    REQUIRE(fake.calls.size() == 1);
    CHECK(fake.calls[0].size() == 2 * ((n + 15) / 16));  // the chunks of both long kernels, nothing else
    REQUIRE(sigs[0]);
    check_params(*sigs[0], std::vector<FakeParam>(n, int_param()));
    REQUIRE(sigs[1]);
    check_params(*sigs[1], mixed(n));
    REQUIRE(sigs[2]);
    check_params(*sigs[2], mixed(3));
  }
}

TEST_CASE("read_signatures: chunks still too long come back one parameter each", "[signature]") {
  // 80 parameters: long struct names (a chunk of 16 takes over 1100 characters) between plain ones.
  std::vector<FakeParam> params = mixed(80);
  for (std::size_t i = 0; i < params.size(); i += 2) params[i] = long_struct(100 + i, static_cast<char>('a' + i % 26));
  for (std::size_t c = 0; c < 5; ++c)
    REQUIRE(probe_name({params.begin() + 16 * c, params.begin() + 16 * c + 16}).size() > 1100);
  FakeCompiler fake;
  fake.kernels["decltype(&k)"] = params;
  auto sigs = read_signatures({"decltype(&k)"}, fake.first_pass(), fake.lower());
  REQUIRE(fake.calls.size() == 2);
  CHECK(fake.calls[0].size() == 5);   // 5 chunks
  CHECK(fake.calls[1].size() == 80);  // every chunk was too long: each parameter alone
  REQUIRE(sigs[0]);
  check_params(*sigs[0], params);
}

TEST_CASE("read_signatures: up to 16 parameters go straight to single ones", "[signature]") {
  std::vector<FakeParam> params(10, long_struct(120, 'z'));
  FakeCompiler fake;
  fake.kernels["void (*)(Z, Z)"] = params;
  auto sigs = read_signatures({"void (*)(Z, Z)"}, fake.first_pass(), fake.lower());
  REQUIRE(fake.calls.size() == 1);
  CHECK(fake.calls[0].size() == 10);
  REQUIRE(sigs[0]);
  check_params(*sigs[0], params);
}

TEST_CASE("read_signatures: a parameter type too long on its own leaves the kernel without a signature",
          "[signature]") {
  FakeCompiler fake;
  fake.kernels["decltype(&two)"] = {long_struct(1100, 'q'), int_param()};
  fake.kernels["decltype(&one)"] = {long_struct(1100, 'r')};
  fake.kernels["decltype(&fine)"] = mixed(70);
  auto sigs = read_signatures({"decltype(&two)", "decltype(&one)", "decltype(&fine)"}, fake.first_pass(), fake.lower());
  CHECK_FALSE(sigs[0]);
  CHECK_FALSE(sigs[1]);  // one parameter: nothing smaller to ask for, so no compile for it
  REQUIRE(sigs[2]);
  check_params(*sigs[2], mixed(70));
  REQUIRE(fake.calls.size() == 1);
  CHECK(fake.calls[0].size() == 2 + 5);  // two's parameters, fine's chunks
}

TEST_CASE("read_signatures: kernels not compiled yet are asked whole first; a failed compile gives none",
          "[signature]") {
  FakeCompiler fake;
  fake.kernels["void (*)(int, float*)"] = mixed(2);
  fake.kernels["void (*)(int, ...)"] = mixed(100);
  auto sigs = read_signatures({"void (*)(int, float*)", "void (*)(int, ...)"}, {}, fake.lower());
  REQUIRE(fake.calls.size() == 2);  // the whole probes, then the long one's chunks
  CHECK(fake.calls[0].size() == 2);
  REQUIRE(sigs[0]);
  check_params(*sigs[0], mixed(2));
  REQUIRE(sigs[1]);
  check_params(*sigs[1], mixed(100));

  FakeCompiler failing;
  failing.kernels["decltype(&short_one)"] = mixed(4);
  failing.kernels["decltype(&long_one)"] = mixed(100);
  const std::map<std::string, std::string> first = failing.first_pass();
  failing.fail = true;
  sigs = read_signatures({"decltype(&short_one)", "decltype(&long_one)"}, first, failing.lower());
  CHECK(failing.calls.size() == 1);
  REQUIRE(sigs[0]);  // read before the failed compile
  CHECK_FALSE(sigs[1]);
}

TEST_CASE("read_signatures: kernels of one function type ask for their parts once", "[signature]") {
  FakeCompiler fake;
  fake.kernels["void (*)(int, ...)"] = mixed(100);
  auto sigs = read_signatures({"void (*)(int, ...)", "void (*)(int, ...)"}, {}, fake.lower());
  REQUIRE(fake.calls.size() == 2);
  CHECK(fake.calls[0] == std::vector<std::string>{whole_probe("void (*)(int, ...)")});
  CHECK(fake.calls[1].size() == 7);
  REQUIRE(sigs[0]);
  REQUIRE(sigs[1]);
  check_params(*sigs[0], mixed(100));
  check_params(*sigs[1], mixed(100));
}

TEST_CASE("read_signatures: a name NVRTC did not give, or of an unexpected form", "[signature]") {
  FakeCompiler fake;
  fake.kernels["decltype(&k)"] = mixed(3);
  auto sigs = read_signatures({"decltype(&k)"}, {{whole_probe("decltype(&k)"), ""}}, fake.lower());
  CHECK_FALSE(sigs[0]);
  CHECK(fake.calls.empty());
  // Too long to demangle, and not a probe name either: an internal error, said as such.
  const std::string odd = "_Z" + std::to_string(1100) + std::string(1100, 'o') + "v";
  CHECK_THROWS_WITH(read_signatures({"decltype(&k)"}, {{whole_probe("decltype(&k)"), odd}}, fake.lower()),
                    Catch::Contains("unexpected signature probe name"));
}

TEST_CASE("compile() reads the signatures of kernels with 59 to 256 parameters", "[signature][compile]") {
  Cache cache(CacheConfig{false, "", 1 << 20});
  std::string source = "struct Params { double scale; char flag; };\n";
  for (std::size_t n : {58, 59, 100, 256}) {
    source += fmt::format("extern \"C\" __global__ void k{}(", n);
    for (std::size_t i = 0; i < n; ++i) source += fmt::format("{}{} a{}", i ? ", " : "", i % 5 == 4 ? "Params" : "int", i);
    source += ") {}\n";
  }
  CompileOptions options;
  options.arch = "sm_90";
  auto program = compile(source, options, &cache);
  for (std::size_t n : {58, 59, 100, 256}) {
    const Kernel* k = program->find_kernel(fmt::format("k{}", n));
    REQUIRE(k);
    REQUIRE(k->signature);
    REQUIRE(k->signature->params.size() == n);
    for (std::size_t i = 0; i < n; ++i) {
      INFO("k" << n << " parameter " << i);
      const Param& p = k->signature->params[i];
      CHECK(p.spelling == (i % 5 == 4 ? "Params" : "int"));
      CHECK(p.size == (i % 5 == 4 ? 16u : 4u));
      CHECK(p.align == (i % 5 == 4 ? 8u : 4u));
    }
  }
}

TEST_CASE("read_signatures through NVRTC: names past the limit whole, then by chunks, then one by one",
          "[signature][compile]") {
  // 48 parameters: every other one a struct of its own with a 90-character name (no substitution
  // shortens it), so that each chunk of 16 is too long too.
  std::string source, params;
  std::vector<std::string> spellings;
  for (std::size_t i = 0; i < 48; ++i) {
    if (i % 2 == 0) {
      spellings.push_back(fmt::format("S{:02}_{}", i, std::string(86, 'x')));
      source += fmt::format("struct {} {{ int tag[{}]; }};\n", spellings.back(), i % 3 + 1);
    } else {
      spellings.push_back(i % 4 == 1 ? "float*" : "int");
    }
    params += fmt::format("{}{} a{}", i ? ", " : "", spellings.back(), i);
  }
  source += "extern \"C\" __global__ void k(" + params + ") {}\n" + kProbeSource + split_probe_source();
  std::vector<std::vector<std::string>> calls;
  std::map<std::string, std::string> names;  // every name NVRTC gave, to measure
  const LowerNames lower = [&](const std::vector<std::string>& expressions) {
    calls.push_back(expressions);
    NvrtcProgram program(source, "k.cu", {});
    for (const std::string& e : expressions) program.add_name_expression(e);
    REQUIRE(program.compile({"-arch=sm_90"}));
    std::map<std::string, std::string> out;
    for (const std::string& e : expressions) out[e] = names[e] = program.lowered_name(e);
    return std::optional(out);
  };
  auto sigs = read_signatures({"decltype(&k)"}, {}, lower);
  REQUIRE(calls.size() == 3);  // whole, 3 chunks, 48 single parameters
  CHECK(calls[1].size() == 3);
  CHECK(calls[2].size() == 48);
  CHECK(names[whole_probe("decltype(&k)")].size() > 1024);
  for (std::size_t c = 0; c < 3; ++c) CHECK(names[chunk_probe("decltype(&k)", c)].size() > 1024);
  for (std::size_t i = 0; i < 48; ++i) CHECK(names[param_probe("decltype(&k)", i)].size() <= 1024);
  REQUIRE(sigs[0]);
  REQUIRE(sigs[0]->params.size() == 48);
  for (std::size_t i = 0; i < 48; ++i) {
    INFO("parameter " << i);
    const Param& p = sigs[0]->params[i];
    CHECK(p.spelling == spellings[i]);
    CHECK(p.size == (i % 2 == 0 ? 4 * (i % 3 + 1) : i % 4 == 1 ? 8 : 4));
    CHECK(p.pointee_size == (i % 4 == 1 ? 4u : 0u));
  }
}
