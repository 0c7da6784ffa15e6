// macattn._core: the C++ of MAC-Attention for Python (docs/python.md). Bad input raises
// macattn.InputError (a ValueError) with the reference's one-line message.
#include "bindings.hpp"

namespace nb = nanobind;

NB_MODULE(_core, m) {
  m.doc() = "MAC-Attention: CPU reference, FP64 oracle, mac_io and the CUDA host API";
  nb::exception<mac::InputError>(m, "InputError", PyExc_ValueError);
  nb::object no_cuda = nb::steal(PyErr_NewExceptionWithDoc(
      "macattn._core.NoCudaError",
      "macattn was built without the CUDA kernels, or no CUDA device is usable", PyExc_RuntimeError,
      nullptr));
  m.attr("NoCudaError") = no_cuda;
  m.attr("git_commit") = MAC_GIT_COMMIT;
  // Steppers and engines held by other libraries' registries at exit (a transformers
  // attention function, torch's op registry) are still alive when the interpreter ends:
  // that is not a leak of this module's.
  nb::set_leak_warnings(false);
  macattn::bind_algebra(m);
  macattn::bind_io(m);
  macattn::bind_stepper(m);
  macattn::bind_oracle(m);
  macattn::bind_cuda(m);
}
