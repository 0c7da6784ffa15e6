# pip install . (MAC_PYTHON_ONLY): the CUDA kernels go into macattn only where torch can call
# them, i.e. nvcc is found (the root CMakeLists checks) and the building Python's torch has
# CUDA. Compiling the kernels takes minutes, and a CPU-only venv (CI) has no use for them.
# MACATTN_CUDA=ON forces them (nvcc still required), OFF leaves them out.
set(MACATTN_CUDA "AUTO" CACHE STRING "CUDA kernels in macattn: AUTO (nvcc and torch with CUDA), ON, OFF")
set_property(CACHE MACATTN_CUDA PROPERTY STRINGS AUTO ON OFF)
if(MACATTN_CUDA STREQUAL "OFF")
  set(MAC_ENABLE_CUDA OFF)
elseif(MACATTN_CUDA STREQUAL "AUTO" AND MAC_ENABLE_CUDA)
  find_package(Python 3.9 REQUIRED COMPONENTS Interpreter)
  execute_process(
    COMMAND "${Python_EXECUTABLE}" -c "import sys, torch; sys.exit(0 if torch.version.cuda else 1)"
    RESULT_VARIABLE _macattn_torch_cuda OUTPUT_QUIET ERROR_QUIET TIMEOUT 300)
  if(NOT _macattn_torch_cuda EQUAL 0)
    message(STATUS "macattn: ${Python_EXECUTABLE} has no torch with CUDA: building without the "
                   "CUDA kernels (MACATTN_CUDA=ON builds them anyway)")
    set(MAC_ENABLE_CUDA OFF)
  endif()
elseif(NOT MACATTN_CUDA STREQUAL "ON" AND NOT MACATTN_CUDA STREQUAL "AUTO")
  message(FATAL_ERROR "MACATTN_CUDA = '${MACATTN_CUDA}' is not one of AUTO, ON, OFF")
endif()
