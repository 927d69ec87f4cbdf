# cmake/JitbridgeCudaHeaders.cmake — finds CUDA headers (cuda.h, nvrtc.h, ...) in a toolkit or in the nvidia-* pip wheels.
# Used by the top-level CMakeLists.txt (build time) and by the installed jitbridgeConfig.cmake (C++ users), so that
# both search the same way. Only headers are looked for: jitbridge links no CUDA library (libcuda and NVRTC are
# loaded at run time).

include_guard(GLOBAL)

# jitbridge_find_cuda_headers(<out> HEADERS <h>... [HINTS <dir>...])
#
# Looks for every header in this order of directories; for each header the first directory holding it wins:
#   1. JITBRIDGE_CUDA_INCLUDE_DIR, a CMake variable or else an environment variable (an explicit choice);
#   2. a CUDA toolkit: CUDAToolkit (found quietly), $CUDA_HOME/include, $CUDA_PATH/include, /usr/local/cuda/include;
#   3. the HINTS (the installed config passes the directory jitbridge was built against);
#   4. the nvidia-* wheels of the Python interpreter CMake uses (Python_EXECUTABLE, Python3_EXECUTABLE, else python3
#      on PATH): <entry>/nvidia/cu13/include for each entry of its sys.path, which inside `pip install` is the
#      isolated build environment (nvidia-cuda-runtime has cuda.h, nvidia-cuda-nvrtc nvrtc.h, nvidia-nvjitlink
#      nvJitLink.h).
# With the environment variable JITBRIDGE_BUILD_CUDA_FROM_WHEELS=1, 4 comes before 2 and 3.
#
# Sets, in the caller's scope:
#   <out>          the include directories, in search order, without duplicates (empty if a header is missing);
#   <out>_FOUND    TRUE when every header was found;
#   <out>_MISSING  the headers not found;
#   <out>_REPORT   one "header: dir (source)" line per header, for a status message.
function(jitbridge_find_cuda_headers out)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "HEADERS;HINTS")

  set(_candidates "")  # pairs flattened as "dir|source"
  if(JITBRIDGE_CUDA_INCLUDE_DIR)
    list(APPEND _candidates "${JITBRIDGE_CUDA_INCLUDE_DIR}|JITBRIDGE_CUDA_INCLUDE_DIR")
  elseif(DEFINED ENV{JITBRIDGE_CUDA_INCLUDE_DIR} AND NOT "$ENV{JITBRIDGE_CUDA_INCLUDE_DIR}" STREQUAL "")
    list(APPEND _candidates "$ENV{JITBRIDGE_CUDA_INCLUDE_DIR}|env JITBRIDGE_CUDA_INCLUDE_DIR")
  endif()

  set(_toolkit "")
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND)
    foreach(_dir IN LISTS CUDAToolkit_INCLUDE_DIRS)
      list(APPEND _toolkit "${_dir}|CUDA toolkit ${CUDAToolkit_VERSION}")
    endforeach()
  endif()
  foreach(_var CUDA_HOME CUDA_PATH)
    if(DEFINED ENV{${_var}} AND NOT "$ENV{${_var}}" STREQUAL "")
      list(APPEND _toolkit "$ENV{${_var}}/include|${_var}")
    endif()
  endforeach()
  list(APPEND _toolkit "/usr/local/cuda/include|/usr/local/cuda")
  foreach(_dir IN LISTS arg_HINTS)
    list(APPEND _toolkit "${_dir}|recorded at jitbridge's build")
  endforeach()

  set(_wheels "")
  set(_python "")
  if(Python_EXECUTABLE)
    set(_python "${Python_EXECUTABLE}")
  elseif(Python3_EXECUTABLE)
    set(_python "${Python3_EXECUTABLE}")
  else()
    find_program(_jitbridge_python3 NAMES python3 python NO_CACHE)
    set(_python "${_jitbridge_python3}")
  endif()
  if(_python)
    execute_process(
      COMMAND "${_python}" -c
        "import os, sys; print(';'.join(sorted({os.path.join(p, 'nvidia', 'cu13', 'include') for p in sys.path if os.path.isdir(os.path.join(p or '.', 'nvidia', 'cu13', 'include'))})))"
      OUTPUT_VARIABLE _wheel_dirs OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _rc ERROR_QUIET)
    if(_rc EQUAL 0)
      foreach(_dir IN LISTS _wheel_dirs)
        list(APPEND _wheels "${_dir}|nvidia-* wheel of ${_python}")
      endforeach()
    endif()
  endif()

  if("$ENV{JITBRIDGE_BUILD_CUDA_FROM_WHEELS}" STREQUAL "1")
    list(APPEND _candidates ${_wheels} ${_toolkit})
  else()
    list(APPEND _candidates ${_toolkit} ${_wheels})
  endif()

  set(_dirs "")
  set(_missing "")
  set(_report "")
  foreach(_header IN LISTS arg_HEADERS)
    set(_hit "")
    foreach(_pair IN LISTS _candidates)
      string(FIND "${_pair}" "|" _bar)
      string(SUBSTRING "${_pair}" 0 ${_bar} _dir)
      math(EXPR _bar "${_bar} + 1")
      string(SUBSTRING "${_pair}" ${_bar} -1 _source)
      if(EXISTS "${_dir}/${_header}")
        get_filename_component(_dir "${_dir}" REALPATH)
        set(_hit "${_dir}")
        list(APPEND _report "${_header}: ${_dir} (${_source})")
        break()
      endif()
    endforeach()
    if(_hit)
      list(APPEND _dirs "${_hit}")
    else()
      list(APPEND _missing "${_header}")
    endif()
  endforeach()
  list(REMOVE_DUPLICATES _dirs)

  if(_missing)
    set(${out} "" PARENT_SCOPE)
    set(${out}_FOUND FALSE PARENT_SCOPE)
  else()
    set(${out} "${_dirs}" PARENT_SCOPE)
    set(${out}_FOUND TRUE PARENT_SCOPE)
  endif()
  set(${out}_MISSING "${_missing}" PARENT_SCOPE)
  set(${out}_REPORT "${_report}" PARENT_SCOPE)
  set(${out}_PYTHON "${_python}" PARENT_SCOPE)
endfunction()
