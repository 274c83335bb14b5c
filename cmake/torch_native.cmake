# meshcomm.torch._native, the torch backend's hot path in C++
# (python/src/torch/native.cc) and torch.ops.meshcomm (operators.cc), built against the torch that
# MESHCOMM_TORCH_PYTHON imports: torch's C++ ABI changes between releases,
# so the module is built for exactly the torch it runs with. With no such
# interpreter the backend runs its Python path alone (the same behaviour,
# more time per call: docs/torch.md).
set(MESHCOMM_TORCH_PYTHON "" CACHE FILEPATH
    "A Python interpreter with torch: build the torch backend's native part against its torch")

if(MESHCOMM_TORCH_PYTHON)
  execute_process(
    COMMAND ${MESHCOMM_TORCH_PYTHON} -c
            "import os, torch; print(os.path.dirname(torch.__file__)); print(torch.__version__)"
    OUTPUT_VARIABLE torch_probe RESULT_VARIABLE torch_status ERROR_QUIET
    OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT torch_status EQUAL 0)
    message(STATUS "meshcomm: ${MESHCOMM_TORCH_PYTHON} cannot import torch; "
                   "the torch backend's native part is not built")
    return()
  endif()
  string(REPLACE "\n" ";" torch_probe "${torch_probe}")
  list(GET torch_probe 0 TORCH_PACKAGE_DIR)
  list(GET torch_probe 1 TORCH_VERSION_FOUND)
  message(STATUS "meshcomm: the torch backend's native part is built against torch "
                 "${TORCH_VERSION_FOUND} (${TORCH_PACKAGE_DIR})")

  Python_add_library(meshcomm_torch_native MODULE WITH_SOABI
    ${PROJECT_SOURCE_DIR}/python/src/torch/native.cc
    ${PROJECT_SOURCE_DIR}/python/src/torch/blocking.cc
    ${PROJECT_SOURCE_DIR}/python/src/torch/operators.cc
    ${PROJECT_SOURCE_DIR}/python/src/error_names.cc)
  # torch's headers, and its own pybind11 (first: the module must share
  # torch's pybind11 type registry, which another pybind11 cannot), as
  # system headers so that their warnings are not this build's errors.
  target_include_directories(meshcomm_torch_native SYSTEM BEFORE PRIVATE
    ${TORCH_PACKAGE_DIR}/include
    ${TORCH_PACKAGE_DIR}/include/torch/csrc/api/include)
  target_link_libraries(meshcomm_torch_native PRIVATE meshcomm
    ${TORCH_PACKAGE_DIR}/lib/libtorch_python.so
    ${TORCH_PACKAGE_DIR}/lib/libtorch_cpu.so
    ${TORCH_PACKAGE_DIR}/lib/libc10.so)
  set_target_properties(meshcomm_torch_native PROPERTIES
    OUTPUT_NAME _native
    LIBRARY_OUTPUT_DIRECTORY ${PY_OUT}/torch
    CXX_VISIBILITY_PRESET hidden
    BUILD_RPATH "${TORCH_PACKAGE_DIR}/lib;${PROJECT_BINARY_DIR}/lib"
    INSTALL_RPATH "${TORCH_PACKAGE_DIR}/lib;${CMAKE_INSTALL_FULL_LIBDIR}")
  install(TARGETS meshcomm_torch_native LIBRARY DESTINATION ${MESHCOMM_PY_INSTALL_DIR}/meshcomm/torch)
endif()
