// plan.hpp — the torch add-on's view of a declaration: the phases, output rules, launches and autograd wiring of
// one op, parsed from the text jitbridge/torch/description.py writes (one record per line, rules as expr.hpp programs).
// Included by addon.cpp and run_phase.hpp (the add-on is one translation unit).
#ifndef JITBRIDGE_TORCH_NATIVE_PLAN_HPP
#define JITBRIDGE_TORCH_NATIVE_PLAN_HPP

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/ScalarType.h>
#include <c10/util/SmallVector.h>

#include <algorithm>
#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "expr.hpp"
#include "jitbridge/c_api.h"

namespace jtn = jitbridge_torch_native;

namespace {

const JitbridgeCApi* g_api = nullptr;  // _core's table: static, lives as long as the process

// ---------------------------------------------------------------------------------------------------------------
// The declaration, parsed from the text jitbridge/torch/description.py writes (one record per line).

struct OutRule {
  int slot = 0;
  bool returned = true;
  int dtype_slot = -1;       // the dtype of this argument's tensor, or:
  at::ScalarType dtype_fixed = at::ScalarType::Undefined;
  int like = -1;             // the shape of this argument's tensor, or:
  std::vector<jtn::Expr> dims;
};

struct LaunchArg {
  int slot = -1;             // a tensor slot, or an expression:
  jtn::Expr expr;
  bool boolean = false;      // the expression is a bool scalar input
};

// Per torch dtype (indexed by at::ScalarType), a decision made once when a phase is parsed (finish_phase), so a call
// looks it up instead of comparing dtype names.
constexpr size_t kDtypes = static_cast<size_t>(at::ScalarType::NumOptions);
template <class T> using PerDtype = std::array<T, kDtypes>;

struct LaunchPlan {
  std::vector<std::pair<std::string, jitbridge_kernel*>> kernels;  // dtype key ("*": any) -> kernel (owned)
  PerDtype<jitbridge_kernel*> kernel_for{};  // the kernel of `kernels` for the dispatch dtype, or null (borrowed)
  std::vector<jtn::Expr> grid, block;
  bool has_shared = false;
  jtn::Expr shared;
  std::vector<LaunchArg> args;
};

// What a phase's rules read (each tensor argument's rank and sizes, each scalar argument's value, whether the call
// launches) and what they gave, in evaluation order (the order depends only on the values).
using MemoKey = c10::SmallVector<int64_t, 16>;
using MemoValues = c10::SmallVector<jtn::Value, 24>;

// The rules' values of a phase's last call that passed its checks and launched, by key: a call with the same key (a
// training loop repeats its shapes) replays them instead of evaluating the rules again. Called from any thread
// (autograd's device threads), so a mutex guards it; find and store copy.
class PhaseMemo {
 public:
  bool find(const MemoKey& key, MemoValues& values) const {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!valid_ || key_ != key) return false;
    values = values_;
    return true;
  }
  void store(const MemoKey& key, const MemoValues& values) {
    std::lock_guard<std::mutex> lock(mutex_);
    key_ = key;
    values_ = values;
    valid_ = true;
  }

 private:
  mutable std::mutex mutex_;
  bool valid_ = false;
  MemoKey key_;
  MemoValues values_;
};

struct Phase {
  std::string op, title;
  std::vector<char> kinds;   // per argument: T (tensor), f, i, b
  int dispatch = 0;
  bool contiguous = true, trusted = false;
  // From the "keyed", "allowed" and "require" records (finish_phase; the records themselves are not kept), per
  // dispatch dtype: whether it is allowed, and the dtype rules (slot, dtype) of its key.
  PerDtype<bool> allowed_for{};
  PerDtype<std::vector<std::pair<int, at::ScalarType>>> require_for;
  std::string allowed_text;  // the allowed dtypes as declared, for the refusal's message ("float32, float64")
  std::vector<OutRule> outs;
  std::vector<LaunchPlan> launches;
  std::vector<std::string> names;  // argument names, for messages
  struct Check {
    std::string message;
    std::vector<int> shown;  // tensor slots whose shapes the message shows
    jtn::Expr condition;
  };
  std::vector<Check> checks;
  int n_slots = 0;
  mutable PhaseMemo memo;  // run_phase's cache of the rules' values (not part of the declaration)
  ~Phase() {
    for (auto& l : launches)
      for (auto& k : l.kernels) g_api->kernel_release(k.second);
  }
};

// What the Autograd kernel and the Node need besides the phases.
struct OpEntry {
  std::string name;
  size_t n_inputs = 0, n_outputs = 0;
  std::vector<size_t> tensor_inputs;                  // positions of the tensor inputs
  std::vector<std::pair<bool, size_t>> saved;         // (is output, index) in save order
  std::vector<size_t> scalars;                        // input positions of scalar inputs
  std::vector<size_t> grad_outputs;                   // output positions whose gradients the backward takes
  std::vector<size_t> grad_inputs;                    // tensor-input ordinals the backward's results go to
  std::shared_ptr<Phase> forward, backward;
  std::optional<c10::OperatorHandle> backward_op;
};

at::ScalarType dtype_of_name(const std::string& n) {
  static const std::map<std::string, at::ScalarType> names = {
      {"float32", at::kFloat}, {"float64", at::kDouble}, {"float16", at::kHalf}, {"bfloat16", at::kBFloat16},
      {"int8", at::kChar},     {"uint8", at::kByte},     {"int16", at::kShort},  {"uint16", at::kUInt16},
      {"int32", at::kInt},     {"uint32", at::kUInt32},  {"int64", at::kLong},   {"uint64", at::kUInt64},
      {"bool", at::kBool}};
  auto it = names.find(n);
  if (it == names.end()) throw std::invalid_argument("unknown dtype '" + n + "'");
  return it->second;
}

const char* name_of_dtype(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return "float32";
    case at::kDouble: return "float64";
    case at::kHalf: return "float16";
    case at::kBFloat16: return "bfloat16";
    case at::kChar: return "int8";
    case at::kByte: return "uint8";
    case at::kShort: return "int16";
    case at::kUInt16: return "uint16";
    case at::kInt: return "int32";
    case at::kUInt32: return "uint32";
    case at::kLong: return "int64";
    case at::kUInt64: return "uint64";
    case at::kBool: return "bool";
    default: return nullptr;
  }
}

// DLPack dtype code and bits of a torch dtype; false for one jitbridge.torch does not take.
bool dlpack_dtype(at::ScalarType t, uint8_t* code, uint8_t* bits) {
  switch (t) {
    case at::kFloat: *code = 2; *bits = 32; return true;
    case at::kDouble: *code = 2; *bits = 64; return true;
    case at::kHalf: *code = 2; *bits = 16; return true;
    case at::kBFloat16: *code = 4; *bits = 16; return true;
    case at::kChar: *code = 0; *bits = 8; return true;
    case at::kShort: *code = 0; *bits = 16; return true;
    case at::kInt: *code = 0; *bits = 32; return true;
    case at::kLong: *code = 0; *bits = 64; return true;
    case at::kByte: *code = 1; *bits = 8; return true;
    case at::kUInt16: *code = 1; *bits = 16; return true;
    case at::kUInt32: *code = 1; *bits = 32; return true;
    case at::kUInt64: *code = 1; *bits = 64; return true;
    case at::kBool: *code = 6; *bits = 8; return true;
    default: return false;
  }
}

// The dispatch key of a dtype: its name, "" for a dtype jitbridge.torch has no name for (no rule names it).
std::string dtype_key(at::ScalarType t) {
  const char* n = name_of_dtype(t);
  return n ? n : "";
}

// A phase's "keyed", "allowed" and "require" records as parsed, read by finish_phase only and not kept: calls read the
// per-dtype tables made from them, validate_phase those tables' slots, the refusal of a dtype allowed_text.
struct DtypeRecords {
  bool keyed = false;
  std::vector<std::string> allowed;  // empty: any dtype
  std::map<std::string, std::vector<std::pair<int, at::ScalarType>>> require;  // key ("*": unkeyed) -> (slot, dtype)
};

// Fills the per-dtype tables of a parsed phase from its dtype records: the allowed dtypes, the dtype rules of the key
// (the dtype's name when keyed, else "*") and each launch's kernel (the last of its "*" or dtype-name entries). Per
// call, run_phase indexes them by the dispatch tensor's dtype.
inline void finish_phase(Phase& p, const DtypeRecords& r) {
  for (const auto& a : r.allowed) p.allowed_text += (p.allowed_text.empty() ? "" : ", ") + a;
  for (size_t d = 0; d < kDtypes; ++d) {
    std::string key = dtype_key(static_cast<at::ScalarType>(d));
    p.allowed_for[d] = r.allowed.empty() || std::find(r.allowed.begin(), r.allowed.end(), key) != r.allowed.end();
    auto it = r.require.find(r.keyed ? key : std::string("*"));
    if (it != r.require.end()) p.require_for[d] = it->second;
    for (auto& l : p.launches)
      for (const auto& [k, kernel] : l.kernels)
        if (k == "*" || k == key) l.kernel_for[d] = kernel;
  }
}

int to_int(const std::string& s) {
  size_t used = 0;
  int v = std::stoi(s, &used);
  if (used != s.size()) throw std::invalid_argument("bad integer '" + s + "'");
  return v;
}

// Parses one phase from `lines` starting after its "phase" line; stops at "endphase". `kernels` are the kernels
// the description refers to by index (borrowed; retained for each use).
std::shared_ptr<Phase> parse_phase(const std::string& op, const std::string& title,
                                   const std::vector<std::vector<std::string>>& lines, size_t& i,
                                   const std::vector<jitbridge_kernel*>& kernels) {
  auto p = std::make_shared<Phase>();
  p->op = op;
  p->title = title;
  DtypeRecords dtypes;
  auto rest_expr = [](const std::vector<std::string>& t, size_t from) {
    return jtn::parse_expr(std::vector<std::string>(t.begin() + static_cast<long>(from), t.end()));
  };
  for (; i < lines.size(); ++i) {
    const auto& t = lines[i];
    const std::string& w = t[0];
    if (w == "endphase") break;
    if (w == "args") {
      for (size_t j = 1; j < t.size(); ++j) p->kinds.push_back(t[j].at(0));
      p->n_slots = static_cast<int>(p->kinds.size());
    } else if (w == "dispatch") {
      p->dispatch = to_int(t.at(1));
    } else if (w == "contiguous") {
      p->contiguous = t.at(1) == "1";
    } else if (w == "trusted") {
      p->trusted = t.at(1) == "1";
    } else if (w == "names") {
      p->names.assign(t.begin() + 1, t.end());
    } else if (w == "checkmsg") {  // checkmsg <message words>, then: check <slot,slot|-> <tokens>
      Phase::Check c;
      for (size_t j = 1; j < t.size(); ++j) c.message += (j > 1 ? " " : "") + t[j];
      const auto& cl = lines.at(++i);
      if (cl.at(0) != "check") throw std::invalid_argument("expected a check line");
      std::istringstream slots(cl.at(1));
      for (std::string one; std::getline(slots, one, ',');)
        if (one != "-") c.shown.push_back(to_int(one));
      c.condition = rest_expr(cl, 2);
      p->checks.push_back(std::move(c));
    } else if (w == "keyed") {
      dtypes.keyed = t.at(1) == "1";
    } else if (w == "allowed") {
      dtypes.allowed.assign(t.begin() + 1, t.end());
    } else if (w == "require") {
      dtypes.require[t.at(1)].emplace_back(to_int(t.at(2)), dtype_of_name(t.at(3)));
    } else if (w == "out") {  // out <slot> <returned> <a<slot>|d<dtype>> like <slot> | dims <n>
      OutRule r;
      r.slot = to_int(t.at(1));
      r.returned = t.at(2) == "1";
      const std::string& d = t.at(3);
      if (d.at(0) == 'a') r.dtype_slot = to_int(d.substr(1));
      else r.dtype_fixed = dtype_of_name(d.substr(1));
      if (t.at(4) == "like") {
        r.like = to_int(t.at(5));
      } else {
        int n = to_int(t.at(5));
        for (int k = 0; k < n; ++k) {
          const auto& dl = lines.at(++i);
          if (dl.at(0) != "dim") throw std::invalid_argument("expected a dim line");
          r.dims.push_back(rest_expr(dl, 1));
        }
      }
      p->n_slots = std::max(p->n_slots, r.slot + 1);
      p->outs.push_back(std::move(r));
    } else if (w == "launch") {
      LaunchPlan l;
      for (++i; i < lines.size() && lines[i].at(0) != "endlaunch"; ++i) {
        const auto& u = lines[i];
        if (u[0] == "kernel") {
          jitbridge_kernel* k = kernels.at(static_cast<size_t>(to_int(u.at(2))));
          g_api->kernel_retain(k);
          l.kernels.emplace_back(u.at(1), k);
        } else if (u[0] == "grid") {
          l.grid.push_back(rest_expr(u, 1));
        } else if (u[0] == "block") {
          l.block.push_back(rest_expr(u, 1));
        } else if (u[0] == "shared") {
          l.has_shared = true;
          l.shared = rest_expr(u, 1);
        } else if (u[0] == "arg") {
          LaunchArg a;
          if (u.at(1) == "slot") {
            a.slot = to_int(u.at(2));
          } else {
            a.expr = rest_expr(u, 2);
            a.boolean = u.at(1) == "bool";
          }
          l.args.push_back(std::move(a));
        } else {
          throw std::invalid_argument("unknown launch record '" + u[0] + "'");
        }
      }
      if (l.grid.empty() || l.grid.size() > 3 || l.block.empty() || l.block.size() > 3)
        throw std::invalid_argument("a launch needs 1 to 3 grid and block dimensions");
      p->launches.push_back(std::move(l));
    } else {
      throw std::invalid_argument("unknown phase record '" + w + "'");
    }
  }
  finish_phase(*p, dtypes);
  return p;
}

// Refuses (std::invalid_argument) a phase whose records point outside it: every slot a record names must be one of
// the phase's n_slots (arguments, then outputs and scratch), the dispatch slot a tensor argument. Expression slots
// are checked when evaluated (Slots). So a kernel never indexes past what a call holds.
inline void validate_phase(const Phase& p, size_t n_args, size_t n_returned) {
  auto need = [&](bool ok, const std::string& what) {
    if (!ok) throw std::invalid_argument(p.op + ": " + p.title + ": " + what);
  };
  auto slot_ok = [&](int slot) { return slot >= 0 && slot < p.n_slots; };
  need(p.kinds.size() == n_args, "takes " + std::to_string(p.kinds.size()) + " arguments, the schema " +
                                     std::to_string(n_args));
  need(p.dispatch >= 0 && static_cast<size_t>(p.dispatch) < p.kinds.size() &&
           p.kinds[static_cast<size_t>(p.dispatch)] == 'T', "the dispatch argument is no tensor argument");
  for (char k : p.kinds) need(k == 'T' || k == 'f' || k == 'i' || k == 'b', "unknown argument kind");
  size_t returned = 0;
  for (const auto& r : p.outs) {
    need(static_cast<size_t>(r.slot) >= p.kinds.size() && slot_ok(r.slot), "an output slot is out of range");
    need(r.dtype_slot < 0 || slot_ok(r.dtype_slot), "an output's dtype slot is out of range");
    need(r.dtype_slot >= 0 || r.dtype_fixed != at::ScalarType::Undefined, "an output has no dtype");
    need(r.like < 0 || slot_ok(r.like), "an output's like= slot is out of range");
    returned += r.returned ? 1 : 0;
  }
  need(returned == n_returned, "returns " + std::to_string(returned) + " tensors, the schema " +
                                   std::to_string(n_returned));
  for (const auto& required : p.require_for)  // the rules kept: those of the keys a dtype reads (finish_phase)
    for (const auto& [slot, dtype] : required) need(slot_ok(slot), "a dtype rule's slot is out of range");
  for (const auto& c : p.checks)
    for (int slot : c.shown) need(slot_ok(slot), "a check's slot is out of range");
  for (const auto& l : p.launches) {
    need(!l.kernels.empty(), "a launch has no kernel");
    for (const auto& a : l.args) need(a.slot < 0 || slot_ok(a.slot), "a launch argument's slot is out of range");
  }
}

// Refuses an entry whose autograd wiring points outside its op (see OpEntry), and a re-declaration (`before`) that
// changes what the registered kernels were made for (arguments, outputs, whether there is a backward) or what a
// graph recorded under `before` hands the backward (argument names, the inputs that have gradients).
inline void validate_entry(const OpEntry& e, const OpEntry* before) {
  auto need = [&](bool ok, const std::string& what) {
    if (!ok) throw std::invalid_argument(e.name + ": " + what);
  };
  need(e.name.find("::") != std::string::npos, "the name has no namespace");
  need(e.forward != nullptr, "the description has no forward phase");
  validate_phase(*e.forward, e.n_inputs, e.n_outputs);
  for (size_t i : e.tensor_inputs)
    need(i < e.n_inputs && e.forward->kinds[i] == 'T', "a tensor input index is out of range");
  for (size_t i : e.scalars) need(i < e.n_inputs && e.forward->kinds[i] != 'T', "a scalar input index is out of range");
  for (const auto& [is_output, i] : e.saved)
    need(is_output ? i < e.n_outputs : (i < e.n_inputs && e.forward->kinds[i] == 'T'), "a saved index is out of range");
  for (size_t i : e.grad_outputs) need(i < e.n_outputs, "a grad_outputs index is out of range");
  for (size_t i : e.grad_inputs) need(i < e.tensor_inputs.size(), "a grad_inputs index is out of range");
  need(e.backward_op.has_value() == (e.backward != nullptr), "a backward phase needs its backward_op and back");
  if (e.backward)
    validate_phase(*e.backward, e.saved.size() + e.grad_outputs.size() + e.scalars.size(), e.grad_inputs.size());
  if (before) {
    bool same = before->n_inputs == e.n_inputs && before->n_outputs == e.n_outputs &&
                before->forward->kinds == e.forward->kinds &&
                (before->backward == nullptr) == (e.backward == nullptr) &&
                (!e.backward || before->backward->kinds == e.backward->kinds);
    need(same, "a re-declaration must keep the arguments, outputs and backward its kernels were registered for");
    // A graph recorded before keeps `before` (its JitbridgeNode: what it saved, the gradients and scalars it passes,
    // where the results go) but calls the current _backward op: the same names in the same order, the same inputs.
    need(before->forward->names == e.forward->names && (!e.backward || before->backward->names == e.backward->names),
         "a re-declaration must keep the names of the arguments and of what the backward takes");
    need(before->grad_inputs == e.grad_inputs,
         "a re-declaration must keep which inputs have gradients (an autograd graph recorded before gives the "
         "backward's results to the inputs it was recorded for)");
  }
}

}  // namespace

#endif
