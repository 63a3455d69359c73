# Where the dependencies come from.
#   LibTorch: the torch package of ENGRAM_PYTHON (torch.utils.cmake_prefix_path), the pinned PyPI
#             wheel of scripts/install-deps.sh, which scripts/build.sh passes; or -DENGRAM_TORCH_DIR
#             (a folder holding TorchConfig.cmake, or a prefix), which takes precedence.
#   cuDNN:    the nvidia-cudnn wheel beside that torch (the library LibTorch itself loads).
#   The rest: Debian's packages in /usr, or -DENGRAM_DEPS_PREFIX=DIR where scripts/unpack-deps.sh
#             unpacked the .deb bundle of scripts/bundle-deps.sh (a GPU machine without apt).
set(ENGRAM_PYTHON python3 CACHE STRING "Python whose torch package provides LibTorch")
set(ENGRAM_TORCH_DIR "" CACHE PATH "LibTorch's TorchConfig.cmake folder or prefix")
set(ENGRAM_DEPS_PREFIX "" CACHE PATH "Prefix of the unpacked dependency bundle")

# A folder with TorchConfig.cmake becomes Torch_DIR; anything else is a prefix to search.
function(engram_use_torch_dir dir)
  if(EXISTS ${dir}/TorchConfig.cmake)
    set(Torch_DIR ${dir} CACHE PATH "LibTorch's TorchConfig.cmake folder" FORCE)
  elseif(EXISTS ${dir}/Torch/TorchConfig.cmake)
    set(Torch_DIR ${dir}/Torch CACHE PATH "LibTorch's TorchConfig.cmake folder" FORCE)
  elseif(EXISTS ${dir}/share/cmake/Torch/TorchConfig.cmake)
    set(Torch_DIR ${dir}/share/cmake/Torch CACHE PATH "LibTorch's TorchConfig.cmake folder" FORCE)
  else()
    message(FATAL_ERROR "engram: no TorchConfig.cmake in ${dir}, ${dir}/Torch or "
                        "${dir}/share/cmake/Torch")
  endif()
  message(STATUS "engram: LibTorch from ${Torch_DIR}")
endfunction()

# The Python torch package: its CMake prefix, version, CUDA, and the folder of its site-packages
# (where the nvidia-* wheels it depends on live).
set(ENGRAM_PYTHON_SITE "")
if(ENGRAM_TORCH_DIR)
  engram_use_torch_dir(${ENGRAM_TORCH_DIR})
else()
  execute_process(
    COMMAND ${ENGRAM_PYTHON} -c
            "import os, torch; print(torch.utils.cmake_prefix_path); print(torch.__version__); print(torch.version.cuda); print(int(torch._C._GLIBCXX_USE_CXX11_ABI)); print(os.path.dirname(os.path.dirname(torch.__file__)))"
    OUTPUT_VARIABLE out RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "engram: '${ENGRAM_PYTHON}' cannot import torch (${err}). Build with "
                        "scripts/build.sh, which installs the pinned PyTorch and passes its "
                        "python as -DENGRAM_PYTHON, or give -DENGRAM_TORCH_DIR.")
  endif()
  string(REPLACE "\n" ";" out "${out}")
  list(GET out 0 prefix)
  list(GET out 1 version)
  list(GET out 2 cuda)
  list(GET out 3 abi)
  list(GET out 4 ENGRAM_PYTHON_SITE)
  set(ENGRAM_TORCH_CUDA_VERSION ${cuda})
  message(STATUS "engram: Python torch ${version} (CUDA ${cuda}, _GLIBCXX_USE_CXX11_ABI=${abi})")
  # TorchConfig's and our find_* results are cached: a build folder configured against one
  # environment would mix its libraries with another's headers.
  if(DEFINED CACHE{ENGRAM_CONFIGURED_SITE} AND NOT ENGRAM_CONFIGURED_SITE STREQUAL ENGRAM_PYTHON_SITE)
    message(FATAL_ERROR "engram: this build folder was configured against the torch of "
                        "${ENGRAM_CONFIGURED_SITE}, not ${ENGRAM_PYTHON_SITE}: remove the folder "
                        "(or build into another one) to change environments")
  endif()
  set(ENGRAM_CONFIGURED_SITE ${ENGRAM_PYTHON_SITE} CACHE INTERNAL "site-packages of the torch")
  if(NOT EXISTS ${prefix}/Torch/TorchConfig.cmake)
    message(FATAL_ERROR "engram: ${prefix} (torch.utils.cmake_prefix_path of ${ENGRAM_PYTHON}) "
                        "has no Torch/TorchConfig.cmake: that torch is not a PyPI wheel with "
                        "LibTorch; give -DENGRAM_TORCH_DIR instead")
  endif()
  engram_use_torch_dir(${prefix})
endif()

if(ENGRAM_DEPS_PREFIX)
  if(NOT EXISTS ${ENGRAM_DEPS_PREFIX}/usr/include)
    message(FATAL_ERROR "engram: ENGRAM_DEPS_PREFIX=${ENGRAM_DEPS_PREFIX} has no usr/include; "
                        "unpack the bundle there with scripts/unpack-deps.sh")
  endif()
  set(usr ${ENGRAM_DEPS_PREFIX}/usr)
  # Debian's config files live in lib/x86_64-linux-gnu/cmake and share/cmake; the first is only
  # searched under a prefix where CMAKE_LIBRARY_ARCHITECTURE is set (Debian, Ubuntu), so it is
  # also given as a prefix of its own (<prefix>/<name>*/ is searched everywhere).
  list(PREPEND CMAKE_PREFIX_PATH ${usr} ${usr}/lib/x86_64-linux-gnu/cmake ${usr}/share/cmake)
  # The unpacked .pc files point into the prefix (scripts/unpack-deps.sh rewrote them); the
  # bundle's pkg-config is a wrapper in bin/, used only when the machine has none.
  set(ENV{PKG_CONFIG_PATH}
      "${usr}/lib/x86_64-linux-gnu/pkgconfig:${usr}/share/pkgconfig:$ENV{PKG_CONFIG_PATH}")
  list(APPEND CMAKE_PROGRAM_PATH ${ENGRAM_DEPS_PREFIX}/bin)
  if(EXISTS ${ENGRAM_DEPS_PREFIX}/bin/pkg-config)
    # The wrapper, not usr/bin/pkg-config: that one needs LD_LIBRARY_PATH for libpkgconf.
    set(PKG_CONFIG_EXECUTABLE ${ENGRAM_DEPS_PREFIX}/bin/pkg-config CACHE FILEPATH "pkg-config")
  endif()
  message(STATUS "engram: other dependencies from ${ENGRAM_DEPS_PREFIX}")
endif()

# After find_package(Torch): LibTorch's C++ ABI must match the C++ libraries linked with it
# (Debian's GoogleTest and Google Benchmark use the new ABI). TorchConfig.cmake puts
# -D_GLIBCXX_USE_CXX11_ABI=0 into CMAKE_CXX_FLAGS for wheels built with the old ABI (pip wheels
# before the manylinux_2_28 ones, torch 2.7 and earlier).
function(engram_check_torch_abi)
  if("${TORCH_CXX_FLAGS}" MATCHES "_GLIBCXX_USE_CXX11_ABI=0")
    message(FATAL_ERROR
            "engram: this LibTorch uses the old C++ ABI (_GLIBCXX_USE_CXX11_ABI=0) and Debian's "
            "C++ libraries the new one; use a PyTorch whose torch._C._GLIBCXX_USE_CXX11_ABI is True "
            "(the pinned one of scripts/python/requirements.lock is)")
  endif()
endfunction()
