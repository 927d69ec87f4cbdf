# fake_cuda.cmake — jitbridge_fake_cuda_library(): the fake libcuda.so.1 (fake_cuda.cpp) as a target, for the fuzz
# targets (tests/fuzz) and the CPU tests that launch on made-up GPUs (tests/CMakeLists.txt).
set(_jitbridge_fake_cuda_dir "${CMAKE_CURRENT_LIST_DIR}")

# <target>: a shared library named libcuda.so.1 in <output_dir>. It is the environment, not the code under test:
# built without sanitizers or coverage.
function(jitbridge_fake_cuda_library target output_dir)
  add_library(${target} SHARED "${_jitbridge_fake_cuda_dir}/fake_cuda.cpp" "${_jitbridge_fake_cuda_dir}/fake_params.cpp")
  target_include_directories(${target} SYSTEM PRIVATE ${JITBRIDGE_CUDA_INCLUDE_DIRS})
  target_compile_options(${target} PRIVATE ${JITBRIDGE_WARNINGS} -fno-sanitize=all)
  target_link_options(${target} PRIVATE -fno-sanitize=all)
  set_target_properties(${target} PROPERTIES
    OUTPUT_NAME cuda SOVERSION 1 VERSION 1
    LIBRARY_OUTPUT_DIRECTORY "${output_dir}")
endfunction()
