// kernels.cpp — jitbridge._core._Kernel, _Module and _Configured: kernel objects with a fast call path
// (tp_call straight into launch_from_python, no pybind11 dispatch per launch).
#include <fmt/format.h>

#include <climits>

#include "interop/arrays.hpp"
#include "common/checked_args.hpp"
#include "common/initialised.hpp"
#include "common/vectorcall.hpp"
#include "jitbridge/streams.hpp"
#include "launch/kernels.hpp"

namespace jitbridge::python {
namespace {

struct Options {
  py::object stream;  // the stream= object (held: a keyword's dict may change while arguments convert); empty: none
  int check_args = -1;  // check_args=: 0 or 1; -1: not given (the kernel's own setting)
};

// Dynamic shared memory in bytes (shared_mem=, or k[grid, block, stream, shared_mem]): an int from 0
// to 2**32-1, what cuLaunchKernel's unsigned int takes.
std::size_t parse_shared_mem(PyObject* value) {
  return static_cast<std::size_t>(int_arg(value, {"shared_mem"}, 0, 0xffffffffll, [](const std::string& v) {
    return v[0] == '-' ? fmt::format("shared_mem: {} is negative", v)
                       : fmt::format("shared_mem: {} bytes is out of range (0 to 2**32-1)", v);
  }));
}

// shared_mem=, stream=, cluster=, cooperative=, programmatic_dependent= (keyword only): one of them.
// The name is compared as a str (no UTF-8 form needed: a key with a lone surrogate is just unknown).
void apply_keyword(PyObject* key, PyObject* value, LaunchConfig& c, Options& o) {
  auto is = [key](const char* name) { return PyUnicode_CompareWithASCIIString(key, name) == 0; };
  if (!PyUnicode_Check(key)) {
    throw py::type_error(fmt::format("keyword names must be str, got {}", type_name(key)));
  } else if (is("shared_mem")) {
    c.shared_mem = parse_shared_mem(value);
  } else if (is("stream")) {
    o.stream = py::reinterpret_borrow<py::object>(value);
  } else if (is("cluster")) {
    if (value != Py_None) c.cluster = parse_dim3(value, "cluster");
  } else if (is("cooperative")) {
    c.cooperative = flag_arg(value, {"cooperative"});
  } else if (is("programmatic_dependent")) {
    c.programmatic_dependent = flag_arg(value, {"programmatic_dependent"});
  } else if (is("check_args")) {
    o.check_args = flag_arg(value, {"check_args"}) ? 1 : 0;
  } else {
    throw py::type_error(fmt::format("unexpected keyword argument {} (expected shared_mem, stream, cluster, "
                                     "cooperative, programmatic_dependent, check_args)", describe(key)));
  }
}

// The keywords of a call: a dict (tp_call) or, for vectorcall, the names in `kwnames` with their
// values after the positional arguments in `values`.
struct Keywords {
  PyObject* dict = nullptr;
  PyObject* kwnames = nullptr;
  PyObject* const* values = nullptr;
  // Inline: a call without keywords costs one test here.
  void apply(LaunchConfig& c, Options& o) const {
    if (dict || kwnames) apply_given(c, o);
  }
  [[gnu::noinline]] void apply_given(LaunchConfig& c, Options& o) const {
    if (dict) {
      // PyDict_Next lends its key and value: held here while apply_keyword runs Python code (an
      // __index__, a __bool__) that might change the dict.
      PyObject *key, *value;
      Py_ssize_t pos = 0;
      while (PyDict_Next(dict, &pos, &key, &value)) {
        const py::object held_key = py::reinterpret_borrow<py::object>(key);
        const py::object held_value = py::reinterpret_borrow<py::object>(value);
        apply_keyword(held_key.ptr(), held_value.ptr(), c, o);
      }
    } else if (kwnames) {
      for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kwnames); ++i) apply_keyword(PyTuple_GET_ITEM(kwnames, i), values[i], c, o);
    }
  }
};

// Python subclasses of a kernel type (jitbridge.RawKernel) keep the vectorcall: CPython before
// 3.12 never passes the flag on to heap subclasses, and 3.12 passes it on only when tp_call is not
// overridden. Turned on here only under that same condition (and 3.12 turns it off again if
// __call__ is assigned later). Instances keep the slot where the base put it.
void inherit_vectorcall(py::handle cls, py::handle base) {
  if (!PyType_Check(cls.ptr()) || !PyType_Check(base.ptr()) ||
      !PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(cls.ptr()), reinterpret_cast<PyTypeObject*>(base.ptr())))
    throw py::type_error("_inherit_vectorcall: expected a subclass of the given kernel type");
  PyTypeObject* t = reinterpret_cast<PyTypeObject*>(cls.ptr());
  const PyTypeObject* b = reinterpret_cast<const PyTypeObject*>(base.ptr());
  if (!(b->tp_flags & Py_TPFLAGS_HAVE_VECTORCALL) || t->tp_call != b->tp_call ||
      t->tp_vectorcall_offset != b->tp_vectorcall_offset)
    return;  // __call__ overridden (or no vectorcall to inherit): calls keep going through tp_call
  t->tp_flags |= Py_TPFLAGS_HAVE_VECTORCALL;
  PyType_Modified(t);
}

// help(T.__call__) for a kernel type: CPython's slot wrapper says "Call self as a function.". Replaced in the
// type's dict by a wrapper of the same slot and the same CPython wrapper function (copied from the one there), so
// that subclasses still inherit tp_call as the slot itself (and with it the vectorcall), with `doc` as its text.
// `base` must outlive the type (static storage): the descriptor keeps a pointer to it.
void document_call(py::handle cls, wrapperbase& base, const char* doc) {
  PyTypeObject* t = reinterpret_cast<PyTypeObject*>(cls.ptr());
  PyObject* slot = PyDict_GetItemString(t->tp_dict, "__call__");  // borrowed; used before the dict changes
  if (!slot || !Py_IS_TYPE(slot, &PyWrapperDescr_Type))
    throw std::logic_error("document_call: the type has no __call__ slot wrapper");
  const auto* wrapper = reinterpret_cast<const PyWrapperDescrObject*>(slot);
  base = *wrapper->d_base;
  base.doc = doc;
  py::object mine = py::reinterpret_steal<py::object>(PyDescr_NewWrapper(t, &base, wrapper->d_wrapped));
  if (!mine || PyDict_SetItemString(t->tp_dict, "__call__", mine.ptr()) != 0) throw py::error_already_set();
  PyType_Modified(t);
}

wrapperbase kernel_call, configured_call;

// k(grid, block, args, shared_mem=0, stream=None, ...): CuPy's form. Inlined into its entries (vectorcall_into,
// call_into), as launch_configured: no call of its own per launch.
[[gnu::always_inline]] inline PyObject* launch_kernel(PyObject* self, PyObject* const* args, Py_ssize_t nargs,
                                                     const Keywords& keywords) {
  try {
    const KernelObject& k = value_of<KernelObject>(self);
    if (nargs != 3)
      throw py::type_error(fmt::format("{}: call as kernel(grid, block, args, shared_mem=0, stream=None) or "
                                       "kernel[grid, block](*args); got {} positional arguments",
                                       k.name, nargs));
    LaunchConfig c;
    c.grid = parse_dim3(args[0], "grid", k.last_grid);
    c.block = parse_dim3(args[1], "block", k.last_block);
    PyObject* seq = args[2];
    if (!PyTuple_Check(seq) && !PyList_Check(seq))
      throw py::type_error(fmt::format("args: expected a tuple or list of kernel arguments, got {}", type_name(seq)));
    // The arguments as a tuple: converting them runs Python code (properties, __dlpack__, __index__)
    // that may change a list, whose item array must then not be read any more. A tuple's items
    // cannot change, and the caller's argument array holds the tuple for the call (no reference taken here);
    // a list's copy is held here.
    py::object list_copy;
    PyObject* items = seq;
    if (!PyTuple_Check(seq)) {
      list_copy = py::reinterpret_steal<py::object>(PyList_AsTuple(seq));
      if (!list_copy) throw py::error_already_set();
      items = list_copy.ptr();
    }
    Options o;
    keywords.apply(c, o);
    launch_from_python(k, c, &PyTuple_GET_ITEM(items, 0), PyTuple_GET_SIZE(items), o.stream.ptr(),
                       o.check_args < 0 ? k.check_args : o.check_args != 0);
    Py_RETURN_NONE;
  } catch (...) {
    return translate_current_exception();
  }
}

// k[grid, block](*args, shared_mem=0, stream=None): Numba's form.
[[gnu::always_inline]] inline PyObject* launch_configured(PyObject* self, PyObject* const* args, Py_ssize_t nargs,
                                                         const Keywords& keywords) {
  try {
    const ConfiguredKernel& ck = value_of<ConfiguredKernel>(self);
    LaunchConfig c = ck.config;
    Options o;
    if (!ck.stream.is_none()) o.stream = ck.stream;
    keywords.apply(c, o);
    launch_from_python(*ck.core, c, args, nargs, o.stream.ptr(), o.check_args < 0 ? ck.core->check_args : o.check_args != 0);
    Py_RETURN_NONE;
  } catch (...) {
    return translate_current_exception();
  }
}

using LaunchEntry = PyObject* (*)(PyObject*, PyObject* const*, Py_ssize_t, const Keywords&);

template <LaunchEntry entry>
PyObject* vectorcall_into(PyObject* self, PyObject* const* args, std::size_t nargsf, PyObject* kwnames) {
  const Py_ssize_t n = PyVectorcall_NARGS(nargsf);
  return entry(self, args, n, Keywords{nullptr, kwnames, args + n});
}

// tp_call: installs the vectorcall for the instance's later calls, then launches.
template <LaunchEntry entry>
PyObject* call_into(PyObject* self, PyObject* args, PyObject* kwargs) {
  vectorcall_slot(self) = vectorcall_into<entry>;
  return entry(self, &PyTuple_GET_ITEM(args, 0), PyTuple_GET_SIZE(args), Keywords{kwargs});
}

py::dict attributes(const KernelObject& k) {
  const Device& d = Device::get(current_device());
  const Function& f = k.resolved();
  static const std::pair<const char*, CUfunction_attribute> names[] = {
      {"max_threads_per_block", CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK},
      {"shared_size_bytes", CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES},
      {"const_size_bytes", CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES},
      {"local_size_bytes", CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES},
      {"num_regs", CU_FUNC_ATTRIBUTE_NUM_REGS},
      {"ptx_version", CU_FUNC_ATTRIBUTE_PTX_VERSION},
      {"binary_version", CU_FUNC_ATTRIBUTE_BINARY_VERSION},
      {"cache_mode_ca", CU_FUNC_ATTRIBUTE_CACHE_MODE_CA},
      {"max_dynamic_shared_size_bytes", CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES},
      {"preferred_shared_memory_carveout", CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT},
  };
  py::dict out;
  for (const auto& [name, attr] : names) out[name] = f.attribute(attr, d);
  return out;
}

// A thread count for the occupancy queries (block_size=, block_size_limit=): an int from `lo` to
// 2**31-1 (the driver's int).
int block_size_arg(PyObject* value, const char* what, int lo) {
  return static_cast<int>(int_arg(value, {what}, lo, INT_MAX, [what, lo](const std::string& v) {
    return fmt::format("{}: {} is out of range ({} to 2**31-1)", what, v, lo);
  }));
}

CUfunction function_here(const KernelObject& k, const Device& d) {
  d.make_current();
  CUfunction fn = nullptr;
  check(driver().cuKernelGetFunction(&fn, k.resolved().handle()), "cuKernelGetFunction");
  return fn;
}

}  // namespace

void bind_kernels(py::module_& m) {
  // Declared before _Kernel, whose __getitem__ returns one: their signatures then name the Python types.
  py::class_<ConfiguredKernel> configured(m, "_Configured", py::custom_type_setup([](PyHeapTypeObject* heap) {
                                            set_up_vectorcall(heap, call_into<launch_configured>);
                                          }),
                                          "kernel[grid, block]: a kernel with its launch configuration; call it with "
                                          "the kernel's arguments (keywords as for the kernel's own call).");
  py::class_<ModuleObject, std::shared_ptr<ModuleObject>>(m, "_Module")
      .def(py::init([](const ProgramHandle& program) {
             auto mo = std::make_shared<ModuleObject>();
             mo->program = program;
             mo->modules = std::make_shared<ModuleSet>(program.program);
             return mo;
           }),
           py::arg("program"))
      .def_static("_from_image", [](py::bytes image) {
        auto mo = std::make_shared<ModuleObject>();
        mo->image = image;
        if (mo->image.empty()) throw py::value_error("path: the file is empty");
        mo->modules = std::make_shared<ModuleSet>(mo->image);
        return mo;
      })
      .def_property_readonly("_image", initialised([](const ModuleObject& mo) -> py::object {
        return mo.program.program ? py::object(py::none()) : py::object(py::bytes(mo.image));
      }), "The bytes of a module loaded from a file (None for compiled ones); what pickling keeps.")
      .def_property_readonly("_targets", initialised([](const ModuleObject& mo) {
        py::list out;
        for (const std::string& t : mo.modules->targets()) out.append(text(t));
        return out;
      }), "The targets whose modules are loaded so far, in the order they were built.")
      .def_property_readonly("program", initialised([](const ModuleObject& mo) -> py::object {
        return mo.program.program ? py::cast(mo.program) : py::none();
      }), "The compiled Program, or None for a module loaded from a file.")
      .def("kernel_names", initialised([](const ModuleObject& mo) {
        if (mo.program.program) {
          py::list out;
          for (const Kernel& k : mo.program.program->kernels) out.append(text(k.name));
          return out;
        }
        py::list out;
        for (const std::string& n : mo.loaded().kernel_names()) out.append(text(n));
        return out;
      }), "The kernels' names, as a new list (a file's module is loaded on the current device to list them).")
      .def("_global", initialised([](const ModuleObject& mo, const StrArg& name_obj) {
        const std::string name = text_arg(name_obj, "name");
        const Module& mod = mo.loaded();
        auto [ptr, size] = mod.global(name, Device::get(current_device()));
        return py::make_tuple(static_cast<std::uintptr_t>(ptr), size, current_device());
      }));

  py::class_<KernelObject>(m, "_Kernel", py::custom_type_setup([](PyHeapTypeObject* heap) {
                             set_up_vectorcall(heap, call_into<launch_kernel>);
                           }))
      .def(py::init([](std::shared_ptr<ModuleObject> module, const StrArg& name_obj) {
             const std::string name = text_arg(name_obj, "name");
             KernelObject k;
             k.module = std::move(module);
             k.name = name;
             const Kernel* info = nullptr;
             if (const Program* p = k.module->program.program.get()) {
               info = p->find_kernel(name);
               if (!info) throw py::key_error(p->missing_kernel_message(name));
               k.name = info->name;
             }
             k.launch = std::make_shared<const KernelPlan>(k.module->modules, k.name, info ? info->lowered_name : k.name,
                                                           info);
             return k;
           }),
           py::arg("module"), py::arg("name"))
      .def_property_readonly("name", initialised([](const KernelObject& k) { return text(k.name); }),
                             "The kernel's name: as get_function() was given it, or the C++ name the program "
                             "lists ('ns::scale'); for a template, the name expression ('scale<float>').")
      .def_property_readonly("lowered_name", initialised([](const KernelObject& k) {
        return text(k.launch->lookup_name());
      }), "The symbol in the binary (mangled for C++ kernels).")
      .def_property_readonly("signature", initialised([](const KernelObject& k) -> py::object {
        return k.launch->signature() ? py::cast(*k.launch->signature()) : py::none();
      }), "The parameters as the compiler saw them (a Signature), or None for kernels from files.")
      .def_property_readonly("resources", initialised([](const KernelObject& k) -> py::object {
        return k.launch->info() ? py::cast(k.launch->info()->resources) : py::none();
      }), "What ptxas reported (Resources: registers, shared memory, spills), or None for kernels from files.")
      .def_property_readonly("_module", initialised([](const KernelObject& k) { return k.module; }))
      .def_property("check_args", initialised([](const KernelObject& k) { return k.check_args; }),
                    [](py::object self, py::handle value) {
                      self_of<KernelObject>(self.ptr()).check_args = flag_arg(value.ptr(), {"check_args"});
                    },
                    "Whether launches check each argument against its parameter (default True). False: any "
                    "array into any pointer (dtype, element count, alignment and read-only are not checked); host "
                    "memory and arrays on another device are still refused. A call's check_args= overrides it.")
      .def_property_readonly("attributes", initialised([](const KernelObject& k) { return attributes(k); }),
                             "The driver's cuFuncGetAttribute values for this kernel on the current device, as a "
                             "new dict (num_regs, max_threads_per_block, shared_size_bytes, const_size_bytes, "
                             "local_size_bytes, ptx_version, binary_version, max_dynamic_shared_size_bytes, ...). "
                             "Loads the module there on first use; NoDriverError without a driver, DriverError "
                             "when loading fails.")
      .def("max_active_blocks_per_sm",
           initialised([](const KernelObject& k, const IndexArg& block_size, const IndexArg& shared_mem) {
             const int threads = block_size_arg(block_size.ptr(), "block_size", 1);
             const std::size_t bytes = parse_shared_mem(shared_mem.ptr());
             const Device& d = Device::get(current_device());
             int blocks = 0;
             check(driver().cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, function_here(k, d), threads, bytes),
                   "cuOccupancyMaxActiveBlocksPerMultiprocessor");
             return blocks;
           }),
           py::arg("block_size"), py::arg("shared_mem") = 0,
           "How many blocks of `block_size` threads using `shared_mem` bytes of dynamic shared memory fit on one "
           "multiprocessor of the current device (cuOccupancyMaxActiveBlocksPerMultiprocessor). ValueError for "
           "block_size < 1 or shared_mem out of range, NoDriverError without a driver, DriverError if the "
           "driver refuses.")
      .def("suggest_block_size",
           initialised([](const KernelObject& k, const IndexArg& shared_mem, const IndexArg& block_size_limit) {
             const std::size_t bytes = parse_shared_mem(shared_mem.ptr());
             const int limit = block_size_arg(block_size_limit.ptr(), "block_size_limit", 0);
             const Device& d = Device::get(current_device());
             int min_grid = 0, block = 0;
             check(driver().cuOccupancyMaxPotentialBlockSize(&min_grid, &block, function_here(k, d), nullptr, bytes,
                                                             limit),
                   "cuOccupancyMaxPotentialBlockSize");
             return py::make_tuple(min_grid, block);
           }),
           py::arg("shared_mem") = 0, py::arg("block_size_limit") = 0,
           "(min_grid_size, block_size): the block size with the highest occupancy on the current device and the "
           "grid that fills it (cuOccupancyMaxPotentialBlockSize), for `shared_mem` bytes of dynamic shared memory "
           "per block and at most `block_size_limit` threads (0: no limit). Errors as max_active_blocks_per_sm.")
      .def("__getitem__", [](py::object self, py::object config) {
        KernelObject& k = self_of<KernelObject>(self.ptr());
        const py::tuple t =
            PyTuple_Check(config.ptr()) ? py::reinterpret_borrow<py::tuple>(config) : py::make_tuple(config);
        const std::size_t n = static_cast<std::size_t>(PyTuple_GET_SIZE(t.ptr()));
        if (n < 2 || n > 4)
          throw py::type_error(fmt::format("{}[grid, block] or [grid, block, stream] or [grid, block, stream, shared_mem]; "
                                           "got {} item(s)", k.name, n));
        ConfiguredKernel ck;
        ck.kernel = self;
        ck.core = &k;
        ck.config.grid = parse_dim3(PyTuple_GET_ITEM(t.ptr(), 0), "grid");
        ck.config.block = parse_dim3(PyTuple_GET_ITEM(t.ptr(), 1), "block");
        ck.stream = n > 2 ? py::reinterpret_borrow<py::object>(PyTuple_GET_ITEM(t.ptr(), 2)) : py::none();
        if (n > 3) ck.config.shared_mem = parse_shared_mem(PyTuple_GET_ITEM(t.ptr(), 3));
        return ck;
      }, py::arg("config"),
      "kernel[grid, block], kernel[grid, block, stream] or kernel[grid, block, stream, shared_mem] (Numba's form): "
      "the kernel with that launch configuration, to call with the kernel's arguments. grid and block are an int "
      "or up to 3 ints; stream None means the usual choice (the first array's framework's current stream). "
      "TypeError/ValueError for a malformed configuration.")
      .def("__repr__", initialised([](const KernelObject& k) {
        return fmt::format("<RawKernel {}{}>", k.name, k.launch->signature() ? k.launch->signature()->to_string() : "(...)");
      }), "<RawKernel saxpy(float const*, float*, int)>: the name and signature ('(...)' for kernels from files).");

  configured
      .def_property_readonly("kernel", initialised([](const ConfiguredKernel& ck) { return ck.kernel; }),
                             "The kernel this configuration launches.")
      .def("__repr__", initialised([](const ConfiguredKernel& ck) {
        const LaunchConfig& c = ck.config;
        return fmt::format("<{}[({}, {}, {}), ({}, {}, {})]>", ck.core->name, c.grid.x, c.grid.y, c.grid.z, c.block.x,
                           c.block.y, c.block.z);
      }), "<saxpy[(4, 1, 1), (256, 1, 1)]>: the kernel's name, grid and block.");

  document_call(m.attr("_Kernel"), kernel_call,
                "__call__($self, /, *args, **options)\n--\n\n"
                "Launches the kernel, CuPy's form: kernel(grid, block, args, shared_mem=0, stream=None). grid and block\n"
                "are an int or a tuple of up to 3 ints; args a tuple or list with one entry per kernel parameter, each\n"
                "checked against the parameter's type. Keyword options: shared_mem, stream, cluster, cooperative,\n"
                "programmatic_dependent, check_args (the class says what each does). Runs on the consumer stream and\n"
                "never synchronizes the host. Raises TypeError/ValueError naming the argument that does not fit,\n"
                "LaunchError when the driver refuses the launch, NoDriverError without a driver.");
  document_call(configured, configured_call,
                "__call__($self, /, *args, **options)\n--\n\n"
                "Launches the kernel with the configuration of kernel[grid, block] (or [grid, block, stream,\n"
                "shared_mem]), Numba's form: one positional argument per kernel parameter, checked as kernel(grid,\n"
                "block, args) checks them; keyword options as for that call. Raises as that call does.");

  m.def("_inherit_vectorcall", &inherit_vectorcall, py::arg("cls"), py::arg("base"),
        "Gives a Python subclass of a kernel type its base's vectorcall (when it does not override __call__).");

  m.def("synchronize", [](py::object device) {
    auto not_ordinal = [](const std::string& v) {
      return fmt::format("device: {} is not a device ordinal (0 or more)", v);
    };
    const int ordinal = device.is_none() ? current_device()
                                         : static_cast<int>(int_arg(device.ptr(), "device", 0, INT_MAX, not_ordinal));
    const Device& d = Device::get(ordinal);
    ContextGuard guard(d);
    CUresult rc;
    {
      py::gil_scoped_release release;
      rc = driver().cuCtxSynchronize();
    }
    if (rc != CUDA_SUCCESS) {
      const char* name = nullptr;
      driver().cuGetErrorName(rc, &name);
      throw LaunchError(fmt::format("cuda:{}: a kernel failed ({}); the kernel launched last there was '{}'. The "
                                    "device's context is now unusable: restart the process",
                                    ordinal, name ? name : "?", last_launched_kernel(ordinal)),
                        rc);
    }
  }, py::arg("device") = py::none(),
     "Wait for all work on a device (None: the current one; else an ordinal), every stream of it; the GIL is "
     "released while waiting. Raises LaunchError naming the last kernel if a kernel faulted, TypeError/ValueError "
     "for a device that is not an ordinal of this machine, NoDriverError without a driver.");
}

}  // namespace jitbridge::python
