// expr.hpp — the expressions of jitbridge.torch declarations (grid, block, shared memory, output shapes, launch
// arguments) as a tiny postfix program, parsed from the text Python writes and evaluated in C++ with checked
// arithmetic. Header-only and torch-free: the torch add-on (addon.cpp) and the Catch2 test (test_torch_expr.cpp)
// both include it.
#ifndef JITBRIDGE_TORCH_NATIVE_EXPR_HPP
#define JITBRIDGE_TORCH_NATIVE_EXPR_HPP

#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

namespace jitbridge_torch_native {

// A number: an integer (sizes, counts, int scalars) or a float (float scalars and constants).
struct Value {
  bool is_float = false;
  int64_t i = 0;
  double f = 0.0;
  static Value integer(int64_t v) { return Value{false, v, 0.0}; }
  static Value real(double v) { return Value{true, 0, v}; }
  double as_double() const { return is_float ? f : static_cast<double>(i); }
};

// What an expression reads: the phase's named values by slot (tensor sizes, element counts and scalars).
// Implementations throw std::invalid_argument for a slot or dimension that does not exist.
class Env {
 public:
  virtual ~Env() = default;
  virtual int64_t size(int slot, int64_t dim) const = 0;  // dim may be negative (counted from the end)
  virtual int64_t numel(int slot) const = 0;
  virtual Value scalar(int slot) const = 0;
  virtual int64_t rank(int slot) const = 0;
};

// One instruction. Text form (one token each, space separated, postfix):
//   i<int>   integer constant          f<double>  float constant (strtod syntax)
//   s<slot>:<dim>  tensor size          n<slot>    tensor element count      v<slot>  scalar input
//   r<slot>  tensor rank
//   +  -  *  /  (floor division of integers; true division if either side is a float)
//   c  (ceil division of integers)      m  (min)   M  (max)
//   <  <=  ==  !=  >  >=  (comparisons: integer 1 or 0)   &  |  (logical and/or of two values: 1 or 0)
//   ?  (c a b ?: a if c is nonzero, else b)
enum class Op : uint8_t { Int, Float, Size, Numel, Scalar, Rank, Add, Sub, Mul, Div, CeilDiv, Min, Max, Lt, Le,
                          Eq, Ne, Gt, Ge, And, Or, Select };

struct Instr {
  Op op;
  bool imm = false;  // a binary operator whose right operand is the integer constant i (an "i<int>" token before
                     // it, folded in when parsed: one dispatch instead of two; the same arithmetic and checks)
  int slot = 0;
  int64_t i = 0;
  double f = 0.0;
};

// A parsed expression: evaluating it pushes exactly one value.
struct Expr {
  std::vector<Instr> code;
  std::string text;  // as written by Python, for error messages
};

namespace detail {

inline int64_t parse_int(const std::string& s, const std::string& token) {
  if (s.empty()) throw std::invalid_argument("expression token '" + token + "': missing number");
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') throw std::invalid_argument("expression token '" + token + "': bad integer");
  return static_cast<int64_t>(v);
}

inline int parse_slot(const std::string& s, const std::string& token) {
  int64_t v = parse_int(s, token);
  if (v < 0 || v > 4096) throw std::invalid_argument("expression token '" + token + "': slot out of range");
  return static_cast<int>(v);
}

inline int64_t floor_div(int64_t a, int64_t b) {
  if (b == 0) throw std::domain_error("integer division by zero");
  if (a == INT64_MIN && b == -1) throw std::overflow_error("integer overflow in //");
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

}  // namespace detail

// Parses a postfix program; throws std::invalid_argument naming the bad token, or for a program that does not
// leave exactly one value.
inline Expr parse_expr(const std::vector<std::string>& tokens) {
  Expr e;
  int depth = 0;
  for (const auto& t : tokens) {
    if (!e.text.empty()) e.text += ' ';
    e.text += t;
    if (t.empty()) throw std::invalid_argument("empty expression token");
    Instr in{Op::Int};
    char c = t[0];
    std::string rest = t.substr(1);
    int pops = 0;
    if (c == 'i') {
      in.op = Op::Int;
      in.i = detail::parse_int(rest, t);
    } else if (c == 'f') {
      in.op = Op::Float;
      char* end = nullptr;
      in.f = std::strtod(rest.c_str(), &end);
      if (rest.empty() || *end != '\0') throw std::invalid_argument("expression token '" + t + "': bad float");
    } else if (c == 's') {
      auto colon = rest.find(':');
      if (colon == std::string::npos)
        throw std::invalid_argument("expression token '" + t + "': expected s<slot>:<dim>");
      in.op = Op::Size;
      in.slot = detail::parse_slot(rest.substr(0, colon), t);
      in.i = detail::parse_int(rest.substr(colon + 1), t);
    } else if (c == 'n' || c == 'v' || c == 'r') {
      in.op = c == 'n' ? Op::Numel : c == 'v' ? Op::Scalar : Op::Rank;
      in.slot = detail::parse_slot(rest, t);
    } else if (t == "<" || t == "<=" || t == "==" || t == "!=" || t == ">" || t == ">=" || t == "&" || t == "|") {
      in.op = t == "<" ? Op::Lt : t == "<=" ? Op::Le : t == "==" ? Op::Eq : t == "!=" ? Op::Ne : t == ">" ? Op::Gt
              : t == ">=" ? Op::Ge : t == "&" ? Op::And : Op::Or;
      pops = 2;
    } else if (t == "?") {
      in.op = Op::Select;
      pops = 3;
    } else if (t.size() == 1 && (c == '+' || c == '-' || c == '*' || c == '/' || c == 'c' || c == 'm' || c == 'M')) {
      in.op = c == '+' ? Op::Add : c == '-' ? Op::Sub : c == '*' ? Op::Mul : c == '/' ? Op::Div
              : c == 'c' ? Op::CeilDiv : c == 'm' ? Op::Min : Op::Max;
      pops = 2;
    } else {
      throw std::invalid_argument("unknown expression token '" + t + "'");
    }
    if (depth < pops) throw std::invalid_argument("expression '" + e.text + "': operator '" + t + "' lacks operands");
    depth = depth - pops + 1;
    if (pops == 2 && e.code.back().op == Op::Int && !e.code.back().imm) {  // the right operand was pushed last
      in.imm = true;
      in.i = e.code.back().i;
      e.code.back() = in;
      continue;
    }
    e.code.push_back(in);
  }
  if (depth != 1) throw std::invalid_argument("expression '" + e.text + "' leaves " + std::to_string(depth) +
                                              " values, expected 1");
  return e;
}

// Evaluates `e` over `env`. Integer arithmetic is checked: std::overflow_error on overflow, std::domain_error on
// division by zero; what env throws passes through.
inline Value eval(const Expr& e, const Env& env) {
  // Raw storage: a Value array would construct (zero) all 64 entries on every call; only pushed entries are read.
  struct alignas(Value) Raw { unsigned char bytes[sizeof(Value)]; };
  Raw storage[64];
  Value* stack = reinterpret_cast<Value*>(storage);
  size_t top = 0;
  for (const auto& in : e.code) {
    if (top >= 64 && in.op <= Op::Rank) throw std::invalid_argument("expression '" + e.text + "' is too deep");
    switch (in.op) {
      case Op::Int: stack[top++] = Value::integer(in.i); continue;
      case Op::Float: stack[top++] = Value::real(in.f); continue;
      case Op::Size: stack[top++] = Value::integer(env.size(in.slot, in.i)); continue;
      case Op::Numel: stack[top++] = Value::integer(env.numel(in.slot)); continue;
      case Op::Scalar: stack[top++] = env.scalar(in.slot); continue;
      case Op::Rank: stack[top++] = Value::integer(env.rank(in.slot)); continue;
      case Op::Select: {
        Value b = stack[--top], a = stack[--top], cond = stack[--top];
        stack[top++] = (cond.is_float ? cond.f != 0.0 : cond.i != 0) ? a : b;
        continue;
      }
      default: break;
    }
    Value b = in.imm ? Value::integer(in.i) : stack[--top];
    Value a = stack[--top], r;
    bool ints = !a.is_float && !b.is_float;
    switch (in.op) {
      case Op::Add:
        if (ints) {
          if (__builtin_add_overflow(a.i, b.i, &r.i)) throw std::overflow_error("integer overflow in +");
        } else r = Value::real(a.as_double() + b.as_double());
        break;
      case Op::Sub:
        if (ints) {
          if (__builtin_sub_overflow(a.i, b.i, &r.i)) throw std::overflow_error("integer overflow in -");
        } else r = Value::real(a.as_double() - b.as_double());
        break;
      case Op::Mul:
        if (ints) {
          if (__builtin_mul_overflow(a.i, b.i, &r.i)) throw std::overflow_error("integer overflow in *");
        } else r = Value::real(a.as_double() * b.as_double());
        break;
      case Op::Div:
        if (ints) r.i = detail::floor_div(a.i, b.i);
        else r = Value::real(a.as_double() / b.as_double());
        break;
      case Op::CeilDiv:
        if (!ints) throw std::invalid_argument("ceil division takes integers");
        if (b.i == 0) throw std::domain_error("integer division by zero");
        // -floor(-a / b), as Python's -(-a // b)
        if (a.i == INT64_MIN) throw std::overflow_error("integer overflow in ceil division");
        r.i = -detail::floor_div(-a.i, b.i);
        break;
      case Op::Min:
        r = ints ? Value::integer(a.i < b.i ? a.i : b.i) : (a.as_double() <= b.as_double() ? a : b);
        break;
      case Op::Max:
        r = ints ? Value::integer(a.i > b.i ? a.i : b.i) : (a.as_double() >= b.as_double() ? a : b);
        break;
      case Op::Lt: case Op::Le: case Op::Eq: case Op::Ne: case Op::Gt: case Op::Ge: {
        bool v;
        if (ints) {
          v = in.op == Op::Lt ? a.i < b.i : in.op == Op::Le ? a.i <= b.i : in.op == Op::Eq ? a.i == b.i
              : in.op == Op::Ne ? a.i != b.i : in.op == Op::Gt ? a.i > b.i : a.i >= b.i;
        } else {
          double x = a.as_double(), y = b.as_double();
          v = in.op == Op::Lt ? x < y : in.op == Op::Le ? x <= y : in.op == Op::Eq ? x == y : in.op == Op::Ne ? x != y
              : in.op == Op::Gt ? x > y : x >= y;
        }
        r = Value::integer(v ? 1 : 0);
        break;
      }
      case Op::And: case Op::Or: {
        bool x = a.is_float ? a.f != 0.0 : a.i != 0, y = b.is_float ? b.f != 0.0 : b.i != 0;
        r = Value::integer((in.op == Op::And ? (x && y) : (x || y)) ? 1 : 0);
        break;
      }
      default: throw std::invalid_argument("bad expression instruction");
    }
    stack[top++] = r;
  }
  if (top != 1) throw std::invalid_argument("expression '" + e.text + "' is malformed");
  return stack[0];
}

// Splits `text` at spaces.
inline std::vector<std::string> split_tokens(const std::string& text) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && text[i] == ' ') ++i;
    size_t j = i;
    while (j < text.size() && text[j] != ' ') ++j;
    if (j > i) out.push_back(text.substr(i, j - i));
    i = j;
  }
  return out;
}

}  // namespace jitbridge_torch_native

#endif
