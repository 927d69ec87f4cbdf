// test_torch_expr.cpp — the torch add-on's expressions (python/jitbridge/torch_native/expr.hpp): parsing the text
// Python writes, evaluation over sizes and scalars, Python's floor/ceil division, checked overflow, bad programs.
#include <catch2/catch.hpp>

#include <map>
#include <stdexcept>

#include "jitbridge/torch_native/expr.hpp"

namespace jtn = jitbridge_torch_native;

namespace {

// Tensors by slot as shapes, scalars by slot.
struct FakeEnv : jtn::Env {
  std::map<int, std::vector<int64_t>> shapes;
  std::map<int, jtn::Value> scalars;
  int64_t size(int slot, int64_t dim) const override {
    const auto& s = shapes.at(slot);
    int64_t n = static_cast<int64_t>(s.size());
    int64_t d = dim < 0 ? dim + n : dim;
    if (d < 0 || d >= n) throw std::invalid_argument("no such dimension");
    return s[static_cast<size_t>(d)];
  }
  int64_t numel(int slot) const override {
    int64_t n = 1;
    for (auto v : shapes.at(slot)) n *= v;
    return n;
  }
  jtn::Value scalar(int slot) const override { return scalars.at(slot); }
  int64_t rank(int slot) const override { return static_cast<int64_t>(shapes.at(slot).size()); }
};

jtn::Value run(const std::string& text, const FakeEnv& env) {
  return jtn::eval(jtn::parse_expr(jtn::split_tokens(text)), env);
}

int64_t run_int(const std::string& text, const FakeEnv& env) {
  jtn::Value v = run(text, env);
  REQUIRE_FALSE(v.is_float);
  return v.i;
}

}  // namespace

TEST_CASE("torch expressions: sizes, numel, scalars and arithmetic", "[torch_expr]") {
  FakeEnv env;
  env.shapes[0] = {4, 3, 1000};
  env.shapes[2] = {};
  env.scalars[1] = jtn::Value::integer(7);
  env.scalars[3] = jtn::Value::real(0.5);
  CHECK(run_int("n0", env) == 12000);
  CHECK(run_int("n2", env) == 1);
  CHECK(run_int("s0:0", env) == 4);
  CHECK(run_int("s0:-1", env) == 1000);
  CHECK(run_int("n0 i1023 + i1024 /", env) == 12);          // (numel + 1023) // 1024
  CHECK(run_int("n0 i1024 c", env) == 12);                  // cdiv
  CHECK(run_int("s0:-1 i32 c v1 *", env) == 32 * 7);
  CHECK(run_int("s0:0 s0:1 m", env) == 3);
  CHECK(run_int("s0:0 s0:1 M", env) == 4);
  CHECK(run_int("i5 i7 -", env) == -2);
  jtn::Value f = run("v3 i2 *", env);
  CHECK(f.is_float);
  CHECK(f.f == 1.0);
  CHECK(run("f1e-05", env).f == 1e-05);
  CHECK(run("i7 i2 /", env).i == 3);
  CHECK(run("v3 i2 /", env).f == 0.25);  // a float side: true division
}

TEST_CASE("torch expressions: rank, comparisons, logic and select (checks and conditional rules)", "[torch_expr]") {
  FakeEnv env;
  env.shapes[0] = {8, 300};
  env.shapes[1] = {300};
  env.scalars[2] = jtn::Value::real(0.5);
  CHECK(run_int("r0", env) == 2);
  CHECK(run_int("r1 i1 ==", env) == 1);
  CHECK(run_int("r0 i1 >= r1 i1 == & s0:-1 s1:0 == &", env) == 1);  // bias is [C] for x [..., C]
  CHECK(run_int("s0:-1 i2048 > s0:-1 i0 <= |", env) == 0);
  CHECK(run_int("s0:-1 i256 <= i128 i256 ?", env) == 256);
  CHECK(run_int("s0:0 i256 <= i128 i256 ?", env) == 128);
  CHECK(run_int("v2 f0.5 ==", env) == 1);
  CHECK(run_int("v2 i1 <", env) == 1);
  CHECK(run_int("i3 i3 !=", env) == 0);
  CHECK(run_int("i3 i4 <=", env) == 1);
  CHECK_THROWS_AS(jtn::parse_expr(jtn::split_tokens("i1 i2 ?")), std::invalid_argument);
}

TEST_CASE("torch expressions: Python's floor and ceil division for negative operands", "[torch_expr]") {
  FakeEnv env;
  CHECK(run_int("i-7 i2 /", env) == -4);
  CHECK(run_int("i7 i-2 /", env) == -4);
  CHECK(run_int("i-7 i-2 /", env) == 3);
  CHECK(run_int("i-7 i2 c", env) == -3);
  CHECK(run_int("i7 i2 c", env) == 4);
  CHECK(run_int("i0 i5 c", env) == 0);
}

TEST_CASE("torch expressions: overflow, division by zero and bad dimensions are errors", "[torch_expr]") {
  FakeEnv env;
  env.shapes[0] = {2};
  CHECK_THROWS_AS(run("i9223372036854775807 i1 +", env), std::overflow_error);
  CHECK_THROWS_AS(run("i-9223372036854775807 i2 -", env), std::overflow_error);
  CHECK_THROWS_AS(run("i4611686018427387904 i2 *", env), std::overflow_error);
  CHECK_THROWS_AS(run("i-9223372036854775808 i-1 /", env), std::overflow_error);
  CHECK_THROWS_AS(run("n0 i0 /", env), std::domain_error);
  CHECK_THROWS_AS(run("n0 i0 c", env), std::domain_error);
  CHECK_THROWS_AS(run("s0:1", env), std::invalid_argument);
  CHECK_THROWS_AS(run("s0:-2", env), std::invalid_argument);
  CHECK_THROWS_AS(run("f1.5 i2 c", env), std::invalid_argument);
}

TEST_CASE("torch expressions: a constant right operand (folded into its operator) keeps order and checks",
          "[torch_expr]") {
  FakeEnv env;
  env.shapes[0] = {10};
  env.scalars[1] = jtn::Value::real(2.5);
  CHECK(run_int("n0 i3 -", env) == 7);
  CHECK(run_int("i3 n0 -", env) == -7);           // a constant left operand stays a push
  CHECK(run_int("i2 i3 i4 * +", env) == 14);      // i4 folds into *, whose result + then takes from the stack
  CHECK(run_int("i17 i5 /", env) == 3);
  CHECK(run_int("n0 i4 c i3 M i2 m", env) == 2);
  CHECK(run_int("n0 i10 == i5 i6 ?", env) == 5);
  CHECK(run("v1 i2 *", env).f == 5.0);            // a float left operand with an integer constant: float arithmetic
  CHECK(run("v1 i2 /", env).f == 1.25);
  CHECK_THROWS_AS(run("v1 i2 c", env), std::invalid_argument);
  CHECK_THROWS_AS(run("n0 i0 /", env), std::domain_error);
  CHECK_THROWS_AS(run("i-9223372036854775808 i-1 /", env), std::overflow_error);
  CHECK_THROWS_AS(run("i9223372036854775807 n0 +", env), std::overflow_error);
  CHECK(jtn::parse_expr(jtn::split_tokens("n0 i3 - i2 *")).code.size() == 3);
}

TEST_CASE("torch expressions: malformed programs are refused when parsed", "[torch_expr]") {
  auto parse = [](const std::string& text) { return jtn::parse_expr(jtn::split_tokens(text)); };
  CHECK_THROWS_AS(parse(""), std::invalid_argument);
  CHECK_THROWS_AS(parse("i1 i2"), std::invalid_argument);
  CHECK_THROWS_AS(parse("+"), std::invalid_argument);
  CHECK_THROWS_AS(parse("i1 +"), std::invalid_argument);
  CHECK_THROWS_AS(parse("x1"), std::invalid_argument);
  CHECK_THROWS_AS(parse("i"), std::invalid_argument);
  CHECK_THROWS_AS(parse("i12a"), std::invalid_argument);
  CHECK_THROWS_AS(parse("s0"), std::invalid_argument);
  CHECK_THROWS_AS(parse("n-1"), std::invalid_argument);
  CHECK_THROWS_AS(parse("f"), std::invalid_argument);
  CHECK_THROWS_AS(parse("i99999999999999999999"), std::invalid_argument);
  std::string deep;
  for (int i = 0; i < 100; ++i) deep += "i1 ";
  for (int i = 0; i < 99; ++i) deep += "+ ";
  FakeEnv env;
  CHECK_THROWS_AS(jtn::eval(parse(deep), env), std::invalid_argument);  // deeper than the evaluator's stack
  CHECK(parse("n0 i1 +").text == "n0 i1 +");
}
