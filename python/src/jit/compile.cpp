// compile.cpp — jitbridge.compile(): checks and converts the Python arguments, then compiles with the GIL released.
#include <fmt/format.h>

#include <filesystem>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "common/checked_args.hpp"
#include "jitbridge/cache.hpp"
#include "jitbridge/fatbin.hpp"

JITBRIDGE_ANNOTATED_OBJECT(SourceArg, "str | bytes")
JITBRIDGE_ANNOTATED_OBJECT(StrSequenceArg, "collections.abc.Sequence[str]")
JITBRIDGE_ANNOTATED_OBJECT(PathSequenceArg, "collections.abc.Sequence[str | os.PathLike[str]]")
JITBRIDGE_ANNOTATED_OBJECT(HeadersArg, "collections.abc.Mapping[str, str | bytes] | None")
JITBRIDGE_ANNOTATED_OBJECT(ArchArg, "str | collections.abc.Sequence[str] | None")
JITBRIDGE_ANNOTATED_OBJECT(BoolArg, "bool")
#undef JITBRIDGE_ANNOTATED_OBJECT

namespace jitbridge::python {
namespace {

[[noreturn]] void type_error(const std::string& message) { throw py::type_error(message); }

bool is_text(py::handle obj) { return PyUnicode_Check(obj.ptr()) || PyBytes_Check(obj.ptr()); }

void reject_nul(const std::string& value, const std::string& what) {
  if (value.find('\0') != std::string::npos) throw py::value_error(what + ": contains a NUL character");
}

// Whether `item`'s type has __fspath__ (as os.fspath asks); an error other than AttributeError
// from the lookup propagates.
bool has_fspath(py::handle item) {
  PyObject* method = PyObject_GetAttrString(reinterpret_cast<PyObject*>(Py_TYPE(item.ptr())), "__fspath__");
  if (method) {
    Py_DECREF(method);
    return true;
  }
  if (!PyErr_ExceptionMatches(PyExc_AttributeError)) throw py::error_already_set();
  PyErr_Clear();
  return false;
}

// A list, tuple or other sequence (or an iterator) of str; a bare str is refused, since it would
// otherwise be taken one character at a time. With `paths`, os.PathLike items are taken too.
std::vector<std::string> string_list(py::handle obj, const char* what, bool paths = false) {
  const std::string expected = paths ? "a sequence of str or os.PathLike" : "a sequence of str";
  if (PyUnicode_Check(obj.ptr())) {
    // options="-DX=1": show the one-item tuple meant (the value cut at 200 characters).
    std::string value = text_arg(obj, what);
    if (value.size() > 200) value = value.substr(0, 200) + "...";
    type_error(fmt::format("{}: expected {}, got str; for one item write a tuple or list: {}=({},)", what, expected,
                           what, py::repr(py::str(value)).cast<std::string>()));
  }
  if (is_text(obj) || PyByteArray_Check(obj.ptr()) ||
      !(PySequence_Check(obj.ptr()) || PyIter_Check(obj.ptr())))
    type_error(fmt::format("{}: expected {}, got {}", what, expected, type_name(obj)));
  std::vector<std::string> out;
  std::size_t i = 0;
  for (py::handle item : obj) {  // the iterator holds each item while it is converted
    const std::string name = fmt::format("{}[{}]", what, i);
    py::object value = py::reinterpret_borrow<py::object>(item);
    if (paths && !PyUnicode_Check(item.ptr()) && has_fspath(item)) {
      PyObject* path = PyOS_FSPath(item.ptr());
      if (!path)
        raise_from_current(PyExc_TypeError,
                           fmt::format("{}: os.fspath() of the {} failed", name, type_name(item)));
      value = py::reinterpret_steal<py::object>(path);
    }
    if (!PyUnicode_Check(value.ptr()))
      type_error(fmt::format("{}: expected str, got {}", name, type_name(value)));
    out.push_back(text_arg(value, name));
    reject_nul(out.back(), name);
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
  for (py::handle item : items) {  // the iterator holds each (name, text) pair while it is converted
    if (!PyTuple_Check(item.ptr()) || PyTuple_GET_SIZE(item.ptr()) != 2)
      type_error(fmt::format("headers: items() must give (name, text) pairs, got a {}", type_name(item)));
    py::handle name = PyTuple_GET_ITEM(item.ptr(), 0), text_obj = PyTuple_GET_ITEM(item.ptr(), 1);
    if (!PyUnicode_Check(name.ptr()))
      type_error(fmt::format("headers: names must be str, got {} ({})", type_name(name), describe(name.ptr())));
    Header h;
    h.name = text_arg(name, "headers: a header name");
    if (!is_text(text_obj))
      type_error(fmt::format("headers['{}']: expected str or bytes, got {}", h.name, type_name(text_obj)));
    h.text = text_arg(text_obj, fmt::format("headers['{}']", h.name), true);
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
  const std::string source = text_arg(code, "code", true);
  reject_nul(source, "code");
  if (source.find_first_not_of(" \t\r\n\f\v") == std::string::npos)
    throw py::value_error(source.empty() ? "code: the source is empty (nothing to compile)"
                                         : "code: the source is only blanks (nothing to compile)");
  CompileOptions o;
  o.options = string_list(options, "options");
  o.name_expressions = string_list(name_expressions, "name_expressions");
  o.headers = header_list(headers);
  o.include_paths = string_list(include_paths, "include_paths", true);
  for (std::size_t i = 0; i < o.include_paths.size(); ++i) {
    std::error_code ec;
    const std::string& dir = o.include_paths[i];
    if (!std::filesystem::is_directory(dir, ec))
      throw py::value_error(fmt::format(
          "include_paths[{}]: '{}' is not a directory{}{}", i, dir,
          std::filesystem::exists(dir, ec) ? " (it is a file: give the directory that holds it)" : " (no such directory)",
          !dir.empty() && dir[0] == '/' ? "" : fmt::format("; relative paths are taken from the current directory, {}",
                                                           std::filesystem::current_path(ec).string())));
  }
  std::vector<std::string> fat_targets;  // arch=[...]: a fat binary for these targets
  const bool fat = PyList_Check(arch.ptr()) || PyTuple_Check(arch.ptr());
  if (fat) {
    fat_targets = string_list(arch, "arch");
  } else if (!arch.is_none()) {
    if (!PyUnicode_Check(arch.ptr()))
      type_error(fmt::format("arch: expected str, a list of str or None, got {}", type_name(arch)));
    o.arch = text_arg(arch, "arch");
  }
  if (!PyBool_Check(ptx.ptr())) type_error(fmt::format("ptx: expected bool, got {}", type_name(ptx)));
  o.ptx = ptx.ptr() == Py_True;
  if (!PyUnicode_Check(program_name.ptr()))
    type_error(fmt::format("program_name: expected str, got {}", type_name(program_name)));
  o.program_name = text_arg(program_name, "program_name");
  if (o.program_name.empty()) throw py::value_error("program_name: must not be empty");
  reject_nul(o.program_name, "program_name");

  std::shared_ptr<const Program> program;
  {
    py::gil_scoped_release release;
    program = fat ? compile_fatbin(source, o, fat_targets) : compile(source, o);
  }
  return ProgramHandle{std::move(program), o.program_name, nullptr};
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
                 else sm_90 (see default_arch()); kernels then build for each GPU's own architecture
                 at their first launch there. A list (["sm_80", "sm_90", "compute_90"]): a fat binary
                 (Program.fatbin) with one image per target, joined by nvFatbin (pip install
                 nvidia-nvfatbin; CudaNotFoundError without it); the driver picks the image per GPU.
ptx              also keep the PTX text (Program.ptx).
program_name     the file name diagnostics refer to.

Returns a Program; NVRTC's warnings about it are issued as jitbridge.CompileWarning (once, when
NVRTC compiles it: not for cache hits). Raises CompileError for errors in the source or options,
ValueError for a malformed or unsupported arch, an empty source or an include path that is not a
directory, NvrtcError when NVRTC itself fails, TypeError for arguments of the wrong type. The GIL
is released while compiling.)");
}

}  // namespace jitbridge::python
