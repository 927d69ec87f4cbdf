// module.cpp — the jitbridge._core extension module: puts the pieces bound in the other files together.
#include "interop/allocators.hpp"
#include "interop/arrays.hpp"
#include "interop/host_copy.hpp"
#include "bindings.hpp"

PYBIND11_MODULE(_core, m) {
  namespace jp = jitbridge::python;
  m.doc() = "jitbridge's compiled core: NVRTC compilation, the kernel cache and the environment. "
            "Use it through the jitbridge package.";
  jp::bind_errors(m);
  jp::bind_program(m);
  jp::bind_compile(m);
  jp::bind_link(m);
  jp::bind_cache(m);
  jp::bind_environment(m);
  jp::bind_arrays(m);
  jp::bind_allocators(m);
  jp::bind_tensors(m);
  jp::bind_host_copy(m);
  jp::bind_kernels(m);
  jp::bind_internals(m);
  jp::bind_c_api(m);
  jp::bind_event_timer(m);
  jp::install_warning_handler();
}
