// program.cpp — the read-only Python views of a compiled program: Program, Kernel, Signature, Param, Resources.
#include <fmt/format.h>
#include <pybind11/stl.h>  // Param.dtype: std::optional<std::string> is str | None

#include <optional>
#include <string>

#include "bindings.hpp"
#include "common/checked_args.hpp"
#include "jitbridge/arguments.hpp"
#include "common/initialised.hpp"

namespace jitbridge::python {
namespace {

const char* origin_name(Origin o) {
  switch (o) {
    case Origin::compiled: return "compiled";
    case Origin::memory_cache: return "memory";
    case Origin::disk_cache: return "disk";
  }
  return "compiled";
}

const char* kind_name(Param::Kind k) { return k == Param::Kind::pointer ? "pointer" : "value"; }

// What the launch checks make of one parameter (launch/src/arguments.cpp, plan_signature): the one place that knows
// which type takes which dtype.
ParamPlan plan_of(const Param& p) {
  Signature one;
  one.params.push_back(p);
  return plan_signature(one).front();
}

// The one dtype a parameter takes (plan_dtype), as a NumPy-style name; None when it takes any (void*), several
// (char*: int8 or uint8) or none (structs).
std::optional<std::string> param_dtype(const Param& p) {
  const ParamPlan plan = plan_of(p);
  const std::optional<DLDataType> dtype = plan_dtype(plan);
  if (!dtype || plan.char_like) return std::nullopt;
  return dtype_name(*dtype);
}

std::string kernel_names(const Program& p) {
  std::string out;
  for (const Kernel& k : p.kernels) out += (out.empty() ? "" : ", ") + k.name;
  return out.empty() ? "none" : out;
}

py::tuple kernels_of(const ProgramHandle& h) {
  const auto& kernels = h.program->kernels;
  py::tuple out(kernels.size());
  for (std::size_t i = 0; i < kernels.size(); ++i) out[i] = py::cast(KernelHandle{h, &kernels[i]});
  return out;
}

py::tuple params_of(const Signature& s) {
  py::tuple out(s.params.size());
  for (std::size_t i = 0; i < s.params.size(); ++i) out[i] = py::cast(s.params[i]);
  return out;
}

py::dict resources_dict(const Resources& r) {
  py::dict d;
  d["known"] = r.known;
  d["registers"] = r.registers;
  d["barriers"] = r.barriers;
  d["shared_bytes"] = r.shared_bytes;
  d["local_bytes"] = r.local_bytes;
  d["const_bytes"] = r.const_bytes;
  d["spill_store_bytes"] = r.spill_store_bytes;
  d["spill_load_bytes"] = r.spill_load_bytes;
  return d;
}

py::list text_list(const std::vector<std::string>& items) {
  py::list out;
  for (const std::string& i : items) out.append(text(i));
  return out;
}

// The compile request as compile()'s keyword arguments (code and header texts as bytes, exactly as
// given); None for programs not made by compile(). What pickling keeps (python/jitbridge/_pickle.py).
py::object request_dict(const ProgramHandle& h) {
  const CompileRequest* r = h.program->request.get();
  if (!r) return py::none();
  py::dict d;
  d["code"] = py::bytes(r->source);
  d["options"] = text_list(r->options.options);
  d["name_expressions"] = text_list(r->options.name_expressions);
  py::list headers;
  for (const Header& hd : r->options.headers) headers.append(py::make_tuple(text(hd.name), py::bytes(hd.text)));
  d["headers"] = headers;
  d["include_paths"] = text_list(r->options.include_paths);
  d["arch"] = r->options.arch.empty() ? py::object(py::none()) : py::object(text(r->options.arch));
  d["ptx"] = r->options.ptx;
  d["program_name"] = text(r->options.program_name);
  return d;
}

std::string kernel_repr(const Kernel& k) {
  std::string regs = k.resources.known ? std::to_string(k.resources.registers) : "?";
  return fmt::format("<Kernel {}{} regs={}>", k.name, k.signature ? k.signature->to_string() : "(?)", regs);
}

}  // namespace

std::shared_ptr<const Program> output_of(const ProgramHandle& h) {
  if (h.link_call) {
    py::gil_scoped_release release;
    return output_link(h.link_call->inputs, h.link_call->options);
  }
  const CompileRequest* request = h.program->request.get();
  if (!request || !request->options.layout_probe) return h.program;
  py::gil_scoped_release release;
  return output_program(h.program);
}

void bind_program(py::module_& m) {
  public_class(py::class_<Param>(m, "Param", "One kernel parameter, as the compiler sees it after macros and typedefs. "
                                              "Read-only; made by Signature, never by hand."))
      .def_property_readonly("kind", initialised([](const Param& p) { return kind_name(p.kind); }),
                             "'pointer' or 'value'.")
      .def_property_readonly("type", initialised([](const Param& p) { return text(p.type); }),
                             "The pointee type for pointers, else the value type, without top-level "
                             "const: 'float', '__half', 'Params'.")
      .def_property_readonly("is_const", initialised_field(&Param::is_const),
                             "For pointers: whether the pointee is const.")
      .def_property_readonly("size", initialised_field(&Param::size),
                             "Bytes the parameter occupies in the argument buffer.")
      .def_property_readonly("align", initialised_field(&Param::align), "Its alignment in the argument buffer.")
      .def_property_readonly("pointee_size", initialised_field(&Param::pointee_size),
                             "For pointers: sizeof the pointee (0 for void and incomplete types).")
      .def_property_readonly("pointee_align", initialised_field(&Param::pointee_align),
                             "For pointers: alignof the pointee (0 for void and incomplete types).")
      .def_property_readonly("spelling", initialised([](const Param& p) { return text(p.spelling); }),
                             "The whole type as the compiler printed it: 'float const*'.")
      .def_property_readonly("dtype", initialised([](const Param& p) { return param_dtype(p); }),
                             "The dtype the parameter takes, as launches check it: a pointer's or tensor view's "
                             "element ('float const*' -> 'float32', '__half*' -> 'float16', 'float4*' -> 'float32' "
                             "with lanes 4), or a scalar's ('int' -> 'int32', '__nv_bfloat16' -> 'bfloat16'). None for "
                             "void* (any dtype), char* (int8 or uint8) and structs.")
      .def_property_readonly("lanes", initialised([](const Param& p) { return plan_of(p).lanes; }),
                             "For pointers to CUDA vector types: the dtype's elements per pointee (4 for float4*; "
                             "arrays hold a multiple of it). 1 otherwise.")
      .def_property_readonly("rank", initialised([](const Param& p) { return plan_of(p).rank; }),
                             "For jitbridge::Tensor<T, N> views: N. 0 for every other parameter.")
      .def_property_readonly("element_const", initialised([](const Param& p) { return plan_of(p).pointee_const; }),
                             "For pointers and tensor views: whether the element is const (const float*, "
                             "Tensor<const float, 2>). False for other parameters.")
      .def("__repr__", initialised([](const Param& p) {
        return text(fmt::format("<Param {} {} size={} align={}>", kind_name(p.kind), p.spelling, p.size,
                                p.align));
      }), "<Param pointer float const* size=8 align=8>: kind, spelling, size and alignment.");

  public_class(py::class_<Signature>(
      m, "Signature", "A kernel's parameters, a read-only sequence of Param (len(), iteration, indexing). str() gives "
                      "'(float const*, __half*, int)'."))
      .def_property_readonly("params", initialised([](const Signature& s) { return params_of(s); }),
                             "The parameters, as a tuple of Param.")
      .def("__str__", initialised([](const Signature& s) { return text(s.to_string()); }),
           "The parameter types as the compiler printed them: '(float const*, __half*, int)'.")
      .def("__repr__", initialised([](const Signature& s) { return text("<Signature " + s.to_string() + ">"); }),
           "<Signature (float const*, float*, int)>.")
      .def("__len__", initialised([](const Signature& s) { return s.params.size(); }), "The number of parameters.")
      .def("__iter__", initialised([](const Signature& s) { return py::iter(params_of(s)); }),
           "The parameters in order, as Param.")
      .def(
          "__getitem__",
          initialised([](const Signature& s, const py::object& index) -> py::object {
            py::tuple params = params_of(s);
            return params[index];  // ints, negative ints and slices, as a tuple takes them
          }),
          py::arg("index"),
          "The Param at `index` (negative indices count from the end), or a tuple of them for a slice. "
          "IndexError out of range, TypeError for other index types.");

  public_class(py::class_<Resources>(m, "Resources",
                                     "What ptxas reported for one kernel (read-only; Kernel.resources). known is "
                                     "False for PTX-only builds (compute_XX targets), and every count is 0 then."))
      .def_property_readonly("known", initialised_field(&Resources::known),
                             "Whether ptxas reported on this kernel (False for PTX-only builds).")
      .def_property_readonly("registers", initialised_field(&Resources::registers), "Registers per thread.")
      .def_property_readonly("barriers", initialised_field(&Resources::barriers), "Named barriers the kernel uses.")
      .def_property_readonly("shared_bytes", initialised_field(&Resources::shared_bytes),
                             "Static shared memory, bytes per block.")
      .def_property_readonly("local_bytes", initialised_field(&Resources::local_bytes),
                             "Stack frame, bytes per thread.")
      .def_property_readonly("const_bytes", initialised_field(&Resources::const_bytes),
                             "cmem[0]: kernel parameters and constants, bytes.")
      .def_property_readonly("spill_store_bytes", initialised_field(&Resources::spill_store_bytes),
                             "Bytes of register spill stores per thread (0 when nothing spills).")
      .def_property_readonly("spill_load_bytes", initialised_field(&Resources::spill_load_bytes),
                             "Bytes of register spill loads per thread.")
      .def("as_dict", initialised([](const Resources& r) { return resources_dict(r); }),
           "The fields as a new dict (known, registers, barriers, shared_bytes, local_bytes, const_bytes, "
           "spill_store_bytes, spill_load_bytes).")
      .def("__repr__", initialised([](const Resources& r) {
        if (!r.known) return std::string("<Resources unknown>");
        return fmt::format("<Resources regs={} smem={} lmem={} cmem={} spills={}/{} barriers={}>", r.registers,
                           r.shared_bytes, r.local_bytes, r.const_bytes, r.spill_store_bytes,
                           r.spill_load_bytes, r.barriers);
      }), "<Resources regs=16 smem=0 lmem=0 cmem=376 spills=0/0 barriers=1>, or <Resources unknown>.");

  public_class(py::class_<KernelHandle>(m, "Kernel", "One kernel of a Program (Program.kernels, Program.kernel()): "
                                                        "what the compiler made of it. Read-only; keeps its program "
                                                        "alive. To launch it: RawModule.from_program(p)."
                                                        "get_function(name)."))
      .def_property_readonly("name", initialised([](const KernelHandle& k) { return text(k.kernel->name); }),
                             "extern \"C\" kernels: their name; templates: the name expression as given; "
                             "other C++ kernels: the qualified name ('ns::scale').")
      .def_property_readonly("lowered_name",
                             initialised([](const KernelHandle& k) { return text(k.kernel->lowered_name); }),
                             "The symbol in the binary.")
      .def_property_readonly(
          "signature",
          initialised([](const KernelHandle& k) -> py::object {
            if (!k.kernel->signature) return py::none();
            return py::cast(*k.kernel->signature);
          }),
          "The Signature, or None if the compiler could not be asked.")
      .def_property_readonly("resources", initialised([](const KernelHandle& k) { return k.kernel->resources; }),
                             "What ptxas reported (registers, shared memory, spills) as Resources.")
      .def("__repr__", initialised([](const KernelHandle& k) { return text(kernel_repr(*k.kernel)); }),
           "<Kernel saxpy(float const*, float*, int) regs=16>: name, signature and registers ('?' if unknown).");

  public_class(py::class_<ProgramHandle>(m, "Program", "An immutable compiled program, as returned by compile() and "
                                                          "link(). Holds its binary and kernels; safe to share "
                                                          "between threads. Pickles as its compile request (a "
                                                          "linked one raises TypeError)."))
      .def_property_readonly("arch", initialised([](const ProgramHandle& h) { return text(h.program->arch); }),
                             "The target actually used: 'sm_90'.")
      .def_property_readonly("program_name", initialised([](const ProgramHandle& h) { return text(h.program_name); }),
                             "The file name given to compile() (diagnostics refer to it).")
      .def_property_readonly("cubin", initialised([](const ProgramHandle& h) { return py::bytes(output_of(h)->cubin); }),
                             "The CUBIN (ELF) image; b'' for a virtual (compute_XX) target. The source's own "
                             "binary: built once more without jitbridge's parameter-type probe on first use "
                             "(through the kernel cache), so no internal symbol is in it.")
      .def_property_readonly("fatbin", initialised([](const ProgramHandle& h) { return py::bytes(output_of(h)->fatbin); }),
                             "The fat binary of compile(arch=[...]) (one image per target); b'' otherwise. "
                             "Built without the probe, as cubin.")
      .def_property_readonly("ptx", initialised([](const ProgramHandle& h) { return text(output_of(h)->ptx); }),
                             "The PTX text when compiled with ptx=True or for a compute_XX target, else ''. "
                             "Built without the probe, as cubin.")
      .def_property_readonly("log", initialised([](const ProgramHandle& h) { return text(h.program->log); }),
                             "NVRTC's warnings ('' when there were none).")
      .def_property_readonly(
          "options",
          initialised([](const ProgramHandle& h) {
            const auto& o = h.program->options;
            py::tuple out(o.size());
            for (std::size_t i = 0; i < o.size(); ++i) out[i] = text(o[i]);
            return out;
          }),
          "The options NVRTC was given, in order.")
      .def_property_readonly("kernels", initialised([](const ProgramHandle& h) { return kernels_of(h); }),
                             "The user's kernels, as a tuple of Kernel, in binary order.")
      .def_property_readonly(
          "templates",
          initialised([](const ProgramHandle& h) {
            const auto& t = h.program->templates;
            py::tuple out(t.size());
            for (std::size_t i = 0; i < t.size(); ++i)
              out[i] = py::make_tuple(text(t[i].name), text(t[i].header), text(t[i].example()));
            return out;
          }),
          "The template kernels the source declares, as (name, template header, example instantiation) "
          "tuples: ('scale', 'template <typename T, int N>', 'scale<float, 1>'). Each becomes a kernel only "
          "through a name expression.")
      .def_property_readonly("origin",
                             initialised([](const ProgramHandle& h) { return origin_name(h.program->origin); }),
                             "'compiled', 'memory' (this process's cache) or 'disk' (the on-disk cache).")
      .def_property_readonly("_request", initialised([](const ProgramHandle& h) { return request_dict(h); }),
                             "What compile() was asked, as its keyword arguments (relative include paths made "
                             "absolute; arch None when defaulted), or None. Pickling keeps this.")
      .def_property_readonly("from_cache",
                             initialised([](const ProgramHandle& h) { return h.program->origin != Origin::compiled; }),
                             "True when the program came from the memory or disk cache (origin != 'compiled').")
      .def(
          "kernel",
          initialised([](const ProgramHandle& h, const StrArg& name_obj) {
            const std::string name = text_arg(name_obj, "name");
            const Kernel* k = h.program->find_kernel(name);
            if (!k) throw py::key_error(h.program->missing_kernel_message(name));
            return KernelHandle{h, k};
          }),
          py::arg("name"), "The kernel called `name` (its name or lowered name). KeyError if there is none.")
      .def(
          "lowered_name",
          initialised([](const ProgramHandle& h, const StrArg& expr_obj) {
            const std::string expr = text_arg(expr_obj, "name_expression");
            try {
              return text(h.program->lowered_name(expr));  // blanks between tokens as Program::find_kernel
            } catch (const std::out_of_range&) {
            }
            std::string given;
            for (const auto& entry : h.program->lowered_names) given += (given.empty() ? "" : ", ") + entry.first;
            throw py::key_error(fmt::format("'{}' was not given as a name expression; given: {}",
                                            expr.size() <= 200 ? expr : expr.substr(0, 200) + "[...]",
                                            given.empty() ? "none" : given));
          }),
          py::arg("name_expression"),
          "The lowered (mangled) name of a name expression given to compile(). KeyError otherwise.")
      .def("__repr__", initialised([](const ProgramHandle& h) {
        const Program& p = *h.program;
        return text(fmt::format("<Program {} for {}: {} kernel{} ({}), {}>", h.program_name, p.arch,
                                p.kernels.size(), p.kernels.size() == 1 ? "" : "s", kernel_names(p),
                                origin_name(p.origin)));
      }), "<Program kernel.cu for sm_90: 1 kernel (saxpy), compiled>: name, target, kernels and origin.");

  // help() on these classes shows what gives them instead of Python's "Initialize self" boilerplate.
  not_made_directly(m.attr("Program"), "compile() and link() give Programs");
  not_made_directly(m.attr("Kernel"), "Program.kernels and Program.kernel() give Kernels");
  not_made_directly(m.attr("Signature"), "Kernel.signature gives Signatures");
  not_made_directly(m.attr("Param"), "Signature.params gives Params");
  not_made_directly(m.attr("Resources"), "Kernel.resources gives Resources");
}

}  // namespace jitbridge::python
