// bindings.hpp — what the binding files of jitbridge._core share: the Python-side handles and the bind_* entry points.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>
#include <string>
#include <string_view>

#include "jitbridge/jit.hpp"
#include "jitbridge/link.hpp"

namespace jitbridge::python {

namespace py = pybind11;

// A compiled program as Python holds it: the C++ Program stays alive as long as any handle does
// (the cache may drop it meanwhile). program_name is what compile() was given; Program lacks it.
// What link() was given, kept by its result's handles (the inputs' programs and bytes with them) for output_of.
struct LinkCall {
  std::vector<LinkInput> inputs;
  LinkOptions options;
};

struct ProgramHandle {
  std::shared_ptr<const Program> program;
  std::string program_name;
  std::shared_ptr<const LinkCall> link_call;  // link()'s result: how it was linked; null otherwise
};

// What Program.cubin, .ptx, .fatbin and .link_input show: output_program(h.program), or for link()'s result
// output_link(h.link_call) (built without the layout probe, through the global cache, with the GIL released, on
// first use). Throws as compile() and link() do.
std::shared_ptr<const Program> output_of(const ProgramHandle& h);

// One kernel of a program; keeps the whole program (and so `kernel`) alive.
struct KernelHandle {
  ProgramHandle owner;
  const Kernel* kernel = nullptr;  // points into owner.program->kernels
};

// C++ text as a Python str; bytes that are not UTF-8 (a log echoing a Latin-1 source) become U+FFFD.
py::str text(std::string_view s);

// Python's name for the type of `obj` ("int", "list", "Path"), for error messages.
std::string type_name(py::handle obj);

// Inside a catch block: sets the Python error for the C++ exception being handled (pybind11's translators,
// jitbridge's included) and returns nullptr. For raw C-API entry points, which must not let exceptions out.
PyObject* translate_current_exception();

// `cls`, a class of the public API, named jitbridge.<Name> (the package re-exports it) from the start: the
// signatures pybind11 writes into the docstrings of everything bound after it (what help() and the stubs
// show) then name jitbridge.Program, not jitbridge._core.Program.
template <class Cls>
Cls public_class(Cls cls) {
  cls.attr("__module__") = "jitbridge";
  return cls;
}

// Gives `cls` (a class of the public API that only other calls make) an __init__ that raises TypeError
// "jitbridge.<Name> is not made directly: <by>", documented "Not made directly: <by>." for help(), in place of
// pybind11's "No constructor defined!" and Python's "Initialize self" boilerplate. `by` names what gives them.
void not_made_directly(py::handle cls, const std::string& by);

void bind_errors(py::module_& m);       // errors.cpp
void bind_program(py::module_& m);      // program.cpp
void bind_compile(py::module_& m);      // compile.cpp
void bind_link(py::module_& m);         // jit/link.cpp
void bind_cache(py::module_& m);        // cache.cpp
void bind_environment(py::module_& m);  // environment.cpp
void install_warning_handler();         // warnings.cpp
void bind_kernels(py::module_& m);      // kernels.cpp
void bind_internals(py::module_& m);    // internals.cpp: the _internals capsule
void bind_c_api(py::module_& m);        // launch/c_api_capsule.cpp: the _c_api capsule (jitbridge/c_api.h)
void bind_event_timer(py::module_& m);  // launch/event_timer.cpp: _EventTimer, for jitbridge.benchmark

}  // namespace jitbridge::python
