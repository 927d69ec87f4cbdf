// addon.cpp — jitbridge.torch's native runner: per declared op, dispatcher kernels (CUDA, CPU, Autograd) and a
// generic autograd Node that run the op's declaration (plan.hpp, each call's phase by run_phase.hpp) and launch
// through jitbridge's C interface (c_api.h) with no Python and no GIL. Built at first use against the installed torch
// (jitbridge/torch/addon.py); loaded with ctypes.PyDLL, so its two entry points run with the GIL held.
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/zeros.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/SmallVector.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/saved_variable.h>
#include <torch/library.h>

#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "plan.hpp"
#include "run_phase.hpp"

namespace {

// The current entry of an op: re-declaring swaps it, calls in flight keep the one they took.
struct Slot {
  std::mutex mutex;
  std::shared_ptr<const OpEntry> entry;
  std::shared_ptr<const OpEntry> get() {
    std::lock_guard<std::mutex> lock(mutex);
    return entry;
  }
};

// The last n arguments on the stack, after checking that the dispatcher gave that many (it does for the schema
// the op was registered with; a check, so a mismatch is an error and not a read past the stack).
c10::ArrayRef<c10::IValue> arguments(const torch::jit::Stack* stack, size_t n, const std::string& op) {
  TORCH_CHECK(stack != nullptr && stack->size() >= n, op, ": the dispatcher passed ", stack ? stack->size() : 0,
              " arguments, the declaration takes ", n);
  return torch::jit::last(*stack, n);
}

void push_results(torch::jit::Stack* stack, size_t n_args, Results&& results) {
  torch::jit::drop(*stack, n_args);
  for (auto& r : results) stack->emplace_back(std::move(r));
}

// The CUDA (and CPU: it refuses CPU tensors with a ValueError) kernel of an op or of its _backward op.
class PhaseKernel final : public c10::OperatorKernel {
 public:
  PhaseKernel(std::shared_ptr<Slot> slot, bool backward) : slot_(std::move(slot)), backward_(backward) {}
  void operator()(const c10::OperatorHandle&, c10::DispatchKeySet, torch::jit::Stack* stack) {
    auto entry = slot_->get();  // keeps the phase (and its kernels) alive for this call
    TORCH_CHECK(backward_ ? entry->backward != nullptr : entry->forward != nullptr, entry->name, ": no ",
                backward_ ? "backward" : "forward", " phase");
    const Phase& p = backward_ ? *entry->backward : *entry->forward;
    auto args = arguments(stack, p.kinds.size(), p.op);
    push_results(stack, p.kinds.size(), run_phase(p, args));
  }

 private:
  std::shared_ptr<Slot> slot_;
  bool backward_;
};

// The autograd node of one call: saved tensors (version counters checked when unpacked), scalar inputs, and the
// output metadata for gradients autograd does not have. apply() calls the <op>_backward op through the dispatcher
// (its CUDA kernel is PhaseKernel: no Python; fake and functional tensors reach its registered fake).
class JitbridgeNode final : public torch::autograd::Node {
 public:
  explicit JitbridgeNode(std::shared_ptr<const OpEntry> entry) : entry_(std::move(entry)) {}
  std::string name() const override { return entry_->name + "_jitbridge_backward"; }

  torch::autograd::variable_list apply(torch::autograd::variable_list&& grads) override {
    std::lock_guard<std::mutex> lock(mutex_);
    const OpEntry& e = *entry_;
    torch::jit::Stack stack;
    stack.reserve(std::max(saved_.size() + e.grad_outputs.size() + scalars_.size(), e.grad_inputs.size()));
    bool any_requires_grad = false;
    std::shared_ptr<torch::autograd::Node> self = saved_.empty() ? nullptr : shared_from_this();
    for (const auto& sv : saved_) {
      at::Tensor t = sv.unpack(self);  // throws for freed (no retain_graph) or modified tensors
      any_requires_grad = any_requires_grad || t.requires_grad();
      stack.emplace_back(std::move(t));
    }
    for (size_t pos : e.grad_outputs) {  // positions validated against n_outputs (validate_entry)
      at::Tensor g = pos < grads.size() ? grads[pos] : at::Tensor();
      if (!g.defined()) g = at::zeros_symint(out_shapes_[pos], out_options_[pos]);
      any_requires_grad = any_requires_grad || g.requires_grad();
      stack.emplace_back(std::move(g));
    }
    TORCH_CHECK(!(at::GradMode::is_enabled() && any_requires_grad), e.name,
                ": double backward (create_graph=True through this op's gradient) is not supported: jitbridge ops "
                "have a first derivative only. Differentiate once, or write the gradient as its own op with a "
                "backward");
    for (const auto& v : scalars_) stack.push_back(v);
    TORCH_CHECK(e.backward_op.has_value(), e.name, ": no backward op");
    TORCH_CHECK(e.backward_op->hasSchema(), e.name, ": its backward op ", e.backward_op->operator_name(),
                " is no longer defined (the torch.library fragment that defined it was destroyed), so this graph "
                "cannot run its backward; declare the op again and rerun the forward");
    {
      // Below autograd: the gradient records no graph (double backward is refused above), so the call skips the
      // autograd fallback kernel; functionalization, fake tensors and Python modes still see it (their keys come
      // after autograd's).
      at::AutoDispatchBelowADInplaceOrView below_autograd;
      e.backward_op->callBoxed(&stack);
    }
    TORCH_CHECK(stack.size() == e.grad_inputs.size(), e.name, ": the backward returned ", stack.size(),
                " tensors, expected ", e.grad_inputs.size());
    torch::autograd::variable_list out(e.tensor_inputs.size());
    for (size_t j = 0; j < e.grad_inputs.size(); ++j) out[e.grad_inputs[j]] = stack[j].toTensor();
    return out;
  }

  void release_variables() override {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& sv : saved_) sv.reset_data();
  }

  // Inline storage for the usual few tensors and scalars: recording a call allocates no vectors.
  std::shared_ptr<const OpEntry> entry_;
  c10::SmallVector<torch::autograd::SavedVariable, 4> saved_;
  c10::SmallVector<c10::IValue, 2> scalars_;
  c10::SmallVector<c10::SmallVector<c10::SymInt, 5>, 2> out_shapes_;  // symbolic under torch.compile's dynamic shapes
  c10::SmallVector<at::TensorOptions, 2> out_options_;
};

// The Autograd kernel: with grad mode on and a tensor input requiring grad, a JitbridgeNode records the call;
// the op itself always runs below autograd through the dispatcher (CUDA kernel, or fake/functional modes).
class AutogradKernel final : public c10::OperatorKernel {
 public:
  explicit AutogradKernel(std::shared_ptr<Slot> slot) : slot_(std::move(slot)) {}
  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
    auto entry = slot_->get();
    const OpEntry& e = *entry;
    auto args = arguments(stack, e.n_inputs, e.name);
    bool needs = false;
    for (size_t i : e.tensor_inputs) needs = needs || args[i].toTensor().requires_grad();
    needs = needs && at::GradMode::is_enabled() && e.backward_op.has_value();
    if (!needs) {
      at::AutoDispatchBelowADInplaceOrView guard;
      op.redispatchBoxed(ks & c10::after_ADInplaceOrView_keyset, stack);
      return;
    }
    std::shared_ptr<JitbridgeNode> node(new JitbridgeNode(entry), torch::autograd::deleteNode);
    torch::autograd::edge_list edges;  // as collect_next_edges makes them, without copying the tensors first
    edges.reserve(e.tensor_inputs.size());
    for (size_t i : e.tensor_inputs) {
      const at::Tensor& t = args[i].toTensor();
      if (t.defined()) edges.push_back(torch::autograd::impl::gradient_edge(t));
      else edges.emplace_back();
    }
    node->set_next_edges(std::move(edges));
    node->scalars_.reserve(e.scalars.size());
    for (size_t i : e.scalars) node->scalars_.push_back(args[i]);
    c10::SmallVector<at::Tensor, kInline> saved_inputs(e.n_inputs);
    for (const auto& [is_output, index] : e.saved)
      if (!is_output) saved_inputs[index] = args[index].toTensor();
    {
      at::AutoDispatchBelowADInplaceOrView guard;
      op.redispatchBoxed(ks & c10::after_ADInplaceOrView_keyset, stack);
    }
    auto outs = arguments(stack, e.n_outputs, e.name);
    node->out_shapes_.reserve(outs.size());
    node->out_options_.reserve(outs.size());
    for (const auto& v : outs) {
      const at::Tensor& t = v.toTensor();
      if (torch::autograd::isDifferentiableType(t.scalar_type()))
        torch::autograd::set_history(t, node);
      else
        node->add_input_metadata(torch::autograd::Node::undefined_input());
      node->out_shapes_.emplace_back(t.sym_sizes().begin(), t.sym_sizes().end());
      node->out_options_.push_back(t.options());
    }
    node->saved_.reserve(e.saved.size());
    for (const auto& [is_output, index] : e.saved)
      node->saved_.emplace_back(is_output ? outs[index].toTensor() : saved_inputs[index], is_output);
  }

 private:
  std::shared_ptr<Slot> slot_;
};

// Per op: its slot and the torch::Library fragments holding its kernel registrations (never freed: the
// registrations must outlive every call, and the process's exit must not run torch or jitbridge teardown here).
struct Registered {
  std::shared_ptr<Slot> slot;
  std::vector<std::unique_ptr<torch::Library>> libraries;
};
std::map<std::string, Registered>* g_registered = new std::map<std::string, Registered>();

std::vector<std::vector<std::string>> split_lines(const char* text) {
  std::vector<std::vector<std::string>> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    auto tokens = jtn::split_tokens(line);
    if (!tokens.empty()) out.push_back(std::move(tokens));
  }
  return out;
}

void copy_message(char* why, size_t size, const std::string& text) {
  if (why && size) std::snprintf(why, size, "%s", text.c_str());
}

std::vector<size_t> indices(const std::vector<std::string>& t) {
  std::vector<size_t> out;
  for (size_t j = 1; j < t.size(); ++j) out.push_back(static_cast<size_t>(to_int(t[j])));
  return out;
}

void register_op(const char* description, void* const* py_kernels, size_t n_kernels) {
  std::vector<jitbridge_kernel*> kernels;
  struct Releaser {
    std::vector<jitbridge_kernel*>& k;
    ~Releaser() {
      for (auto* p : k) g_api->kernel_release(p);
    }
  } releaser{kernels};
  for (size_t i = 0; i < n_kernels; ++i) {
    jitbridge_kernel* k = nullptr;
    int rc = g_api->kernel_from_python(py_kernels[i], &k);
    if (rc != JITBRIDGE_OK) {
      const char* message = nullptr;
      g_api->last_error(&message, nullptr);
      throw std::invalid_argument(std::string("kernel ") + std::to_string(i) + ": " + (message ? message : "?"));
    }
    kernels.push_back(k);
  }
  auto lines = split_lines(description);
  auto entry = std::make_shared<OpEntry>();
  std::string backward_name;
  for (size_t i = 0; i < lines.size(); ++i) {
    const auto& t = lines[i];
    const std::string& w = t[0];
    if (w == "op") {
      entry->name = t.at(1);
      entry->n_inputs = static_cast<size_t>(to_int(t.at(2)));
      entry->n_outputs = static_cast<size_t>(to_int(t.at(3)));
    } else if (w == "tensor_inputs") {
      entry->tensor_inputs = indices(t);
    } else if (w == "saved") {
      entry->saved.emplace_back(t.at(1) == "o", static_cast<size_t>(to_int(t.at(2))));
    } else if (w == "scalars") {
      entry->scalars = indices(t);
    } else if (w == "grad_outputs") {
      entry->grad_outputs = indices(t);
    } else if (w == "grad_inputs") {
      entry->grad_inputs = indices(t);
    } else if (w == "backward_op") {
      backward_name = t.at(1);
    } else if (w == "phase") {
      std::string title = t.at(1);
      ++i;
      auto phase = parse_phase(entry->name, title, lines, i, kernels);
      (title == "forward" ? entry->forward : entry->backward) = std::move(phase);
    } else {
      throw std::invalid_argument("unknown record '" + w + "'");
    }
  }
  if (!backward_name.empty()) {
    auto handle = c10::Dispatcher::singleton().findSchema({backward_name, ""});
    if (!handle) throw std::invalid_argument("the backward op " + backward_name + " is not defined");
    entry->backward_op = *handle;
  }
  auto found = g_registered->find(entry->name);
  std::shared_ptr<const OpEntry> before = found != g_registered->end() ? found->second.slot->get() : nullptr;
  validate_entry(*entry, before.get());
  // The registered schemas (the kernels' stacks) must have the arities the description's phases take.
  auto check_schema = [](const c10::OperatorHandle& op, size_t n_args, size_t n_returns) {
    const auto& schema = op.schema();
    if (schema.arguments().size() != n_args || schema.returns().size() != n_returns) {
      std::ostringstream text;
      text << "the registered schema " << schema << " does not match the description (" << n_args
           << " arguments, " << n_returns << " returns)";
      throw std::invalid_argument(text.str());
    }
  };
  auto op = c10::Dispatcher::singleton().findSchema({entry->name, ""});
  if (!op) throw std::invalid_argument("the op " + entry->name + " is not defined");
  check_schema(*op, entry->n_inputs, entry->n_outputs);
  if (entry->backward) check_schema(*entry->backward_op, entry->backward->kinds.size(), entry->grad_inputs.size());
  if (found != g_registered->end()) {  // a re-declaration (same schema: validate_entry), new kernels and plans
    std::lock_guard<std::mutex> lock(found->second.slot->mutex);
    found->second.slot->entry = entry;
    return;
  }
  Registered reg;
  reg.slot = std::make_shared<Slot>();
  reg.slot->entry = entry;
  auto colon = entry->name.find("::");
  std::string ns = entry->name.substr(0, colon), short_name = entry->name.substr(colon + 2);
  auto impl = [&](c10::DispatchKey key, const std::string& name, std::unique_ptr<c10::OperatorKernel> kernel) {
    auto lib = std::make_unique<torch::Library>(torch::Library::IMPL, ns, key, __FILE__, __LINE__);
    if (auto* k = dynamic_cast<PhaseKernel*>(kernel.get())) {
      kernel.release();
      lib->impl(name.c_str(), torch::CppFunction::makeFromBoxedFunctor(std::unique_ptr<PhaseKernel>(k)));
    } else {
      auto* a = static_cast<AutogradKernel*>(kernel.release());
      lib->impl(name.c_str(), torch::CppFunction::makeFromBoxedFunctor(std::unique_ptr<AutogradKernel>(a)));
    }
    reg.libraries.push_back(std::move(lib));
  };
  for (auto key : {c10::DispatchKey::CUDA, c10::DispatchKey::CPU}) {
    impl(key, short_name, std::make_unique<PhaseKernel>(reg.slot, false));
    if (entry->backward) impl(key, short_name + "_backward", std::make_unique<PhaseKernel>(reg.slot, true));
  }
  if (entry->backward) impl(c10::DispatchKey::Autograd, short_name, std::make_unique<AutogradKernel>(reg.slot));
  (*g_registered)[entry->name] = std::move(reg);
}

}  // namespace

extern "C" {

// Takes _core's C interface table (from the capsule, read by Python). Returns 0, or 1 with the reason in `why`.
__attribute__((visibility("default"))) int jitbridge_torch_native_init(const void* table, char* why, size_t size) {
  const auto* api = static_cast<const JitbridgeCApi*>(table);
  if (!jitbridge_c_api_check(api, JITBRIDGE_C_API_MAJOR, JITBRIDGE_C_API_MINOR, why, size)) return 1;
  g_api = api;
  return 0;
}

// Registers (or, for a name registered before, replaces) the native kernels of one op from its description;
// `py_kernels` are the RawKernel objects the description refers to by index. Needs the GIL (ctypes.PyDLL holds
// it). Returns 0, or 1 with the reason in `why`; nothing is registered then.
__attribute__((visibility("default"))) int jitbridge_torch_native_register(const char* description,
                                                                            void* const* py_kernels,
                                                                            size_t n_kernels, char* why,
                                                                            size_t size) {
  if (!g_api) {
    copy_message(why, size, "jitbridge_torch_native_init was not called");
    return 1;
  }
  try {
    register_op(description, py_kernels, n_kernels);
    return 0;
  } catch (const std::exception& e) {
    copy_message(why, size, e.what());
    return 1;
  } catch (...) {
    copy_message(why, size, "unknown C++ exception");
    return 1;
  }
}

}  // extern "C"
