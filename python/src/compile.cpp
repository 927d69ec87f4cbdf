// compile.cpp — jitbridge.compile(): checks and converts the Python arguments, then compiles with the GIL released.
#include <fmt/format.h>

#include <string>
#include <vector>

#include "bindings.hpp"
#include "jitbridge/cache.hpp"

// Parameter types that accept any object (compile_py checks them itself, for messages that name the
// argument) but show a precise annotation in the signature help() prints.
namespace jitbridge::python {
inline int any_object(PyObject*) { return 1; }
}  // namespace jitbridge::python

#define JITBRIDGE_ANNOTATED_OBJECT(Cls, annotation)                                   \
  namespace jitbridge::python {                                                       \
  class Cls : public py::object {                                                     \
   public:                                                                            \
    PYBIND11_OBJECT_DEFAULT(Cls, py::object, any_object)                              \
  };                                                                                  \
  }                                                                                   \
  template <>                                                                         \
  struct pybind11::detail::handle_type_name<jitbridge::python::Cls> {                 \
    static constexpr auto name = const_name(annotation);                              \
  };

JITBRIDGE_ANNOTATED_OBJECT(SourceArg, "str | bytes")
JITBRIDGE_ANNOTATED_OBJECT(StrSequenceArg, "collections.abc.Sequence[str]")
JITBRIDGE_ANNOTATED_OBJECT(PathSequenceArg, "collections.abc.Sequence[str | os.PathLike[str]]")
JITBRIDGE_ANNOTATED_OBJECT(HeadersArg, "collections.abc.Mapping[str, str | bytes] | None")
JITBRIDGE_ANNOTATED_OBJECT(ArchArg, "str | None")
JITBRIDGE_ANNOTATED_OBJECT(BoolArg, "bool")
JITBRIDGE_ANNOTATED_OBJECT(StrArg, "str")
#undef JITBRIDGE_ANNOTATED_OBJECT

namespace jitbridge::python {
namespace {

[[noreturn]] void type_error(const std::string& message) { throw py::type_error(message); }

bool is_text(py::handle obj) { return PyUnicode_Check(obj.ptr()) || PyBytes_Check(obj.ptr()); }

void reject_nul(const std::string& value, const std::string& what) {
  if (value.find('\0') != std::string::npos) throw py::value_error(what + ": contains a NUL character");
}

// str or bytes -> the bytes NVRTC gets (str as UTF-8).
std::string source_text(py::handle obj, const std::string& what) {
  if (PyBytes_Check(obj.ptr())) return obj.cast<std::string>();
  if (PyUnicode_Check(obj.ptr())) return obj.cast<std::string>();
  type_error(fmt::format("{}: expected str or bytes, got {}", what, type_name(obj)));
}

// A list, tuple or other sequence (or an iterator) of str; a bare str is refused, since it would
// otherwise be taken one character at a time. With `paths`, os.PathLike items are taken too.
std::vector<std::string> string_list(py::handle obj, const char* what, bool paths = false) {
  const std::string expected = paths ? "a sequence of str or os.PathLike" : "a sequence of str";
  if (is_text(obj) || PyByteArray_Check(obj.ptr()) ||
      !(PySequence_Check(obj.ptr()) || PyIter_Check(obj.ptr())))
    type_error(fmt::format("{}: expected {}, got {}", what, expected, type_name(obj)));
  std::vector<std::string> out;
  std::size_t i = 0;
  for (py::handle item : obj) {
    py::object value = py::reinterpret_borrow<py::object>(item);
    if (paths && !PyUnicode_Check(item.ptr()) && PyObject_HasAttrString(item.ptr(), "__fspath__")) {
      PyObject* path = PyOS_FSPath(item.ptr());
      if (!path) throw py::error_already_set();
      value = py::reinterpret_steal<py::object>(path);
    }
    if (!PyUnicode_Check(value.ptr()))
      type_error(fmt::format("{}[{}]: expected str, got {}", what, i, type_name(value)));
    out.push_back(value.cast<std::string>());
    reject_nul(out.back(), fmt::format("{}[{}]", what, i));
    ++i;
  }
  return out;
}

// None or a mapping of header name -> header text (str or bytes).
std::vector<Header> header_list(py::handle obj) {
  std::vector<Header> out;
  if (obj.is_none()) return out;
  py::object mapping_abc = py::module_::import("collections.abc").attr("Mapping");
  if (!PyDict_Check(obj.ptr()) && !py::isinstance(obj, mapping_abc))
    type_error(fmt::format("headers: expected a dict of str (name) to str (text), got {}", type_name(obj)));
  py::object items = obj.attr("items")();
  for (py::handle item : items) {
    py::tuple pair = py::reinterpret_borrow<py::tuple>(item);
    py::handle name = pair[0], text_obj = pair[1];
    if (!PyUnicode_Check(name.ptr()))
      type_error(fmt::format("headers: names must be str, got {} ({})", type_name(name),
                             py::repr(name).cast<std::string>()));
    Header h;
    h.name = name.cast<std::string>();
    if (!is_text(text_obj))
      type_error(fmt::format("headers['{}']: expected str or bytes, got {}", h.name, type_name(text_obj)));
    h.text = text_obj.cast<std::string>();
    if (h.name.empty()) throw py::value_error("headers: a header name is empty");
    reject_nul(h.name, "headers: the name '" + h.name + "'");
    reject_nul(h.text, "headers['" + h.name + "']");
    out.push_back(std::move(h));
  }
  return out;
}

ProgramHandle compile_py(const SourceArg& code, const StrSequenceArg& options, const StrSequenceArg& name_expressions,
                         const HeadersArg& headers, const PathSequenceArg& include_paths, const ArchArg& arch,
                         const BoolArg& ptx, const StrArg& program_name) {
  const std::string source = source_text(code, "code");
  reject_nul(source, "code");
  CompileOptions o;
  o.options = string_list(options, "options");
  o.name_expressions = string_list(name_expressions, "name_expressions");
  o.headers = header_list(headers);
  o.include_paths = string_list(include_paths, "include_paths", true);
  if (!arch.is_none()) {
    if (!PyUnicode_Check(arch.ptr()))
      type_error(fmt::format("arch: expected str or None, got {}", type_name(arch)));
    o.arch = arch.cast<std::string>();
  }
  if (!PyBool_Check(ptx.ptr())) type_error(fmt::format("ptx: expected bool, got {}", type_name(ptx)));
  o.ptx = ptx.ptr() == Py_True;
  if (!PyUnicode_Check(program_name.ptr()))
    type_error(fmt::format("program_name: expected str, got {}", type_name(program_name)));
  o.program_name = program_name.cast<std::string>();
  if (o.program_name.empty()) throw py::value_error("program_name: must not be empty");
  reject_nul(o.program_name, "program_name");

  std::shared_ptr<const Program> program;
  {
    py::gil_scoped_release release;
    program = compile(source, o);
  }
  return ProgramHandle{std::move(program), o.program_name};
}

}  // namespace

void bind_compile(py::module_& m) {
  m.def("compile", &compile_py, py::arg("code"), py::kw_only(), py::arg("options") = py::tuple(),
        py::arg("name_expressions") = py::tuple(), py::arg("headers") = py::none(),
        py::arg("include_paths") = py::tuple(), py::arg("arch") = py::none(), py::arg("ptx") = false,
        py::arg("program_name") = "kernel.cu",
        R"(Compile CUDA C++ with NVRTC, or fetch the result from the kernel cache.

code             the source, str or bytes.
options          NVRTC options, e.g. ["-DN=4", "-std=c++17", "--use_fast_math"].
name_expressions template instantiations and other names whose lowered names are wanted,
                 e.g. ["scale<float, 4>"]; each naming a __global__ function becomes a Kernel.
headers          in-memory headers: {"config.h": "#define N 4"} lets the source #include "config.h".
include_paths    extra include directories (str or os.PathLike).
arch             "sm_90", "sm_90a", "compute_90", ...; None: the current GPU's, else $JITBRIDGE_ARCH,
                 else sm_90 (see default_arch()).
ptx              also keep the PTX text (Program.ptx).
program_name     the file name diagnostics refer to.

Returns a Program. Raises CompileError for errors in the source or options, ValueError for a
malformed or unsupported arch, NvrtcError when NVRTC itself fails, TypeError for arguments of the
wrong type. The GIL is released while compiling.)");
}

}  // namespace jitbridge::python
