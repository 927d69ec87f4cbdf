// link.cpp — jitbridge.link(): converts the Python inputs (programs, files, (kind, bytes) pairs) and links with the GIL released; LinkError; Program's link attributes.
#include <fmt/format.h>

#include <string>
#include <vector>

#include "bindings.hpp"
#include "common/checked_args.hpp"
#include "common/initialised.hpp"
#include "jitbridge/link.hpp"

namespace jitbridge::python {
namespace {

const char* const kKinds = "'cubin', 'ptx', 'ltoir', 'fatbin', 'library' or 'object'";

// A str path, or an os.PathLike's; nullopt for anything else.
std::optional<std::string> path_of(py::handle item, const std::string& name) {
  py::object value = py::reinterpret_borrow<py::object>(item);
  if (!PyUnicode_Check(item.ptr())) {
    PyObject* path = PyOS_FSPath(item.ptr());
    if (!path) {
      PyErr_Clear();
      return std::nullopt;
    }
    value = py::reinterpret_steal<py::object>(path);
    if (!PyUnicode_Check(value.ptr()))
      throw py::type_error(fmt::format("{}: os.fspath() gave {}; a str path is needed", name, type_name(value)));
  }
  std::string out = text_arg(value, name);
  if (out.find('\0') != std::string::npos) throw py::value_error(name + ": contains a NUL character");
  if (out.empty()) throw py::value_error(name + ": the path is empty");
  return out;
}

LinkInput input_of(py::handle item, std::size_t i) {
  const std::string name = fmt::format("inputs[{}]", i);
  if (py::isinstance<ProgramHandle>(item)) {
    const ProgramHandle& h = item.cast<const ProgramHandle&>();
    if (!h.program) throw py::type_error(name + ": the Program was not initialised");
    return LinkInput::from_program(h.program, h.program_name);
  }
  if (PyTuple_Check(item.ptr())) {
    const Py_ssize_t n = PyTuple_GET_SIZE(item.ptr());
    if (n != 2 && n != 3)
      throw py::type_error(fmt::format("{}: expected a (kind, data) or (kind, data, name) tuple, got {} items", name, n));
    py::tuple t = py::reinterpret_borrow<py::tuple>(item);  // holds every item while they are read
    const std::string kind_text = text_arg(t[0], name + "[0] (kind)");
    std::optional<LinkInput::Kind> kind = parse_link_kind(kind_text);
    if (!kind || *kind == LinkInput::Kind::program)
      throw py::value_error(fmt::format("{}: unknown kind '{}'; expected {}", name, kind_text, kKinds));
    py::handle data = t[1];
    if (PyUnicode_Check(data.ptr()))
      throw py::type_error(fmt::format("{}: ('{}', data) needs data as bytes, got str (encode text with .encode())",
                                       name, kind_text));
    if (!PyBytes_Check(data.ptr()) && !PyByteArray_Check(data.ptr()))
      throw py::type_error(fmt::format("{}: ('{}', data) needs data as bytes, got {}", name, kind_text, type_name(data)));
    std::string bytes = PyBytes_Check(data.ptr())
                            ? std::string(PyBytes_AS_STRING(data.ptr()), static_cast<std::size_t>(PyBytes_GET_SIZE(data.ptr())))
                            : std::string(PyByteArray_AS_STRING(data.ptr()),
                                          static_cast<std::size_t>(PyByteArray_GET_SIZE(data.ptr())));
    std::string label = n == 3 ? text_arg(t[2], name + "[2] (name)") : std::string();
    return LinkInput::from_bytes(*kind, std::move(bytes), std::move(label));
  }
  if (PyBytes_Check(item.ptr()) || PyByteArray_Check(item.ptr()))
    throw py::type_error(fmt::format("{}: bytes need a kind: pass ('cubin', data), ('ltoir', data), ... ({})", name, kKinds));
  if (std::optional<std::string> path = path_of(item, name)) {
    std::string p = *path;
    py::gil_scoped_release release;
    return LinkInput::from_file(p);
  }
  throw py::type_error(fmt::format(
      "{}: expected a Program, a path (str or os.PathLike) or a (kind, bytes) tuple, got {}", name, type_name(item)));
}

ProgramHandle link_py(const py::args& inputs, const py::object& arch, const py::object& lto, const py::object& options,
                      const py::object& device_runtime) {
  std::vector<LinkInput> in;
  std::size_t i = 0;
  for (py::handle item : inputs) in.push_back(input_of(item, i++));
  LinkOptions o;
  if (!arch.is_none()) o.arch = text_arg(arch, "arch");
  if (!lto.is_none()) {
    if (!PyBool_Check(lto.ptr())) throw py::type_error(fmt::format("lto: expected bool or None, got {}", type_name(lto)));
    o.lto = lto.ptr() == Py_True;
  }
  if (PyUnicode_Check(options.ptr()) || PyBytes_Check(options.ptr()) || !PySequence_Check(options.ptr()))
    throw py::type_error(fmt::format("options: expected a sequence of str, got {}", type_name(options)));
  std::size_t k = 0;
  for (py::handle opt : options) o.options.push_back(text_arg(opt, fmt::format("options[{}]", k++)));
  if (device_runtime.is_none()) {
    o.device_runtime = LinkOptions::DeviceRuntime::automatic;
  } else if (PyBool_Check(device_runtime.ptr())) {
    o.device_runtime = device_runtime.ptr() == Py_True ? LinkOptions::DeviceRuntime::always
                                                       : LinkOptions::DeviceRuntime::never;
  } else {
    throw py::type_error(fmt::format("device_runtime: expected bool or None, got {}", type_name(device_runtime)));
  }
  std::shared_ptr<const Program> program;
  std::string name = in.size() == 1 ? in[0].name : std::string("linked");
  {
    py::gil_scoped_release release;
    program = link(in, o);
  }
  // Kept for Program.cubin & co. (output_of): the inputs moved, not copied; alive as long as the result's handles.
  auto call = std::make_shared<LinkCall>(LinkCall{std::move(in), std::move(o)});
  return ProgramHandle{std::move(program), name.empty() ? std::string("linked") : name, std::move(call)};
}

void raise_link_error(const LinkError& e) noexcept {
  try {
    static py::object* cls = new py::object(py::module_::import("jitbridge._errors").attr("LinkError"));
    const LinkError::Details& d = e.details();
    py::dict kw;
    kw["error_log"] = text(d.error_log);
    kw["info_log"] = text(d.info_log);
    py::tuple undefined(d.undefined.size());
    for (std::size_t j = 0; j < d.undefined.size(); ++j) undefined[j] = text(d.undefined[j]);
    kw["undefined"] = undefined;
    kw["input"] = d.input.empty() ? py::object(py::none()) : py::object(text(d.input));
    kw["code"] = d.code;
    py::object exc = (*cls)(text(e.what()), **kw);
    PyErr_SetObject(cls->ptr(), exc.ptr());
  } catch (py::error_already_set& err) {
    err.restore();
  } catch (...) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
}

}  // namespace

void bind_link(py::module_& m) {
  m.attr("LinkError") = py::module_::import("jitbridge._errors").attr("LinkError");
  py::register_local_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const LinkError& e) {
      raise_link_error(e);
    }
  });
  m.def("link", &link_py, py::kw_only(), py::arg("arch") = py::none(), py::arg("lto") = py::none(),
        py::arg("options") = py::tuple(), py::arg("device_runtime") = py::none(),
        R"(Link programs and device code into one Program with nvJitLink (or fetch it from the cache).

inputs          each one of: a Program compiled with options ('-dc',) / ('-rdc=true',) or ('-dlto',)
                (its kernels keep their names and signatures); a path (str or os.PathLike) whose
                extension says the kind (.cubin, .ptx, .ltoir, .fatbin, .a, .o); a (kind, bytes) or
                (kind, bytes, name) tuple, kind one of 'cubin', 'ptx', 'ltoir', 'fatbin', 'library', 'object'.
arch            'sm_90' & co.; None: the first program's arch, else default_arch().
lto             link-time optimisation; None: on when an input is LTO-IR.
options         more nvJitLink options: ['-O3'], ['-lineinfo'], ['-maxrregcount=64'], ...
device_runtime  link libcudadevrt.a (dynamic parallelism): None: when an input needs it; True: always;
                False: never.

Returns a linked Program (Program.linked is True); its cubin property is linked once more, on first use, from
the programs as their sources alone build them (no jitbridge symbols). Raises LinkError (undefined symbols named,
demangled; error_log and info_log), ValueError for bad inputs (none, a program not compiled for
linking, empty data, another arch, an unknown kind), TypeError for arguments of the wrong type,
CudaNotFoundError when nvJitLink or a needed device runtime is missing. The GIL is released while linking.)");

  py::object cls = m.attr("Program");
  py::object property = py::module_::import("builtins").attr("property");
  py::setattr(cls, "linked",
              property(py::cpp_function(initialised([](const ProgramHandle& h) { return h.program->linked; }),
                                        py::is_method(cls)),
                       py::none(), py::none(),
                       "True when the binary is nvJitLink's output (a -dc/-rdc/-dlto program, or link()'s result)."));
  py::setattr(cls, "link_input",
              property(py::cpp_function(initialised([](const ProgramHandle& h) { return py::bytes(output_of(h)->link_input); }),
                                        py::is_method(cls)),
                       py::none(), py::none(),
                       "What link() takes from this program: the relocatable cubin (-dc, -rdc=true) or the "
                       "LTO-IR (-dlto); b'' for other programs. Built without the probe, as cubin."));
  py::setattr(cls, "link_input_kind",
              property(py::cpp_function(initialised([](const ProgramHandle& h) -> py::object {
                                          if (h.program->link_input.empty()) return py::none();
                                          return text(h.program->link_input_is_ltoir ? "ltoir" : "cubin");
                                        }),
                                        py::is_method(cls)),
                       py::none(), py::none(), "'cubin', 'ltoir' or None: the kind of link_input."));
}

}  // namespace jitbridge::python
