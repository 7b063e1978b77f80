# Finds the Debian-packaged dependencies, in system paths or in the offline prefix
# (RECIPE_DEPS_PREFIX/usr, laid out by dpkg -x). pkg-config files of a dpkg -x prefix point at /usr,
# so plain find_path/find_library are used instead.
# Debian's multiarch triplet (x86_64-linux-gnu, aarch64-linux-gnu): CMake derives it from the
# compiler, a cross toolchain included (cmake/toolchains/).
set(_multiarch "${CMAKE_LIBRARY_ARCHITECTURE}")
if(NOT _multiarch)
  set(_multiarch ${CMAKE_SYSTEM_PROCESSOR}-linux-gnu)
endif()

find_package(Threads REQUIRED)
find_package(ZLIB REQUIRED)  # CRC32 of checkpoint chunks

# Lua 5.4
find_path(LUA_INCLUDE_DIR lua.hpp PATH_SUFFIXES lua5.4 include/lua5.4 REQUIRED)
find_library(LUA_LIBRARY NAMES lua5.4 lua54 PATH_SUFFIXES lib/${_multiarch} REQUIRED)
# Debian's luaconf.h includes <lua5.4-deb-multiarch.h> from the multiarch include folder, which is a
# system path normally but must be named for a dpkg -x prefix.
find_path(LUA_MULTIARCH_INCLUDE_DIR lua5.4-deb-multiarch.h PATH_SUFFIXES include/${_multiarch} ${_multiarch})
add_library(recipe::lua INTERFACE IMPORTED)
target_include_directories(recipe::lua INTERFACE ${LUA_INCLUDE_DIR})
if(LUA_MULTIARCH_INCLUDE_DIR)
  target_include_directories(recipe::lua INTERFACE ${LUA_MULTIARCH_INCLUDE_DIR})
endif()
target_link_libraries(recipe::lua INTERFACE ${LUA_LIBRARY} ${CMAKE_DL_LIBS} m)

# toml++ (header-only use)
# Debian's toml++ 3.3 ships toml++/toml.h (newer releases add toml.hpp): code includes toml.h.
find_path(TOMLPP_INCLUDE_DIR NAMES toml++/toml.h toml++/toml.hpp REQUIRED)
add_library(recipe::toml INTERFACE IMPORTED)
target_include_directories(recipe::toml INTERFACE ${TOMLPP_INCLUDE_DIR})
# TOML_FLOAT_CHARCONV: shortest round-trip float printing (3e-4, not 0.00029999999999999997).
target_compile_definitions(recipe::toml INTERFACE TOML_HEADER_ONLY=1 TOML_EXCEPTIONS=1 TOML_FLOAT_CHARCONV=1)

# nlohmann-json
find_path(NLOHMANN_INCLUDE_DIR nlohmann/json.hpp REQUIRED)
if(NOT TARGET nlohmann_json::nlohmann_json)
  add_library(nlohmann_json::nlohmann_json INTERFACE IMPORTED)
  target_include_directories(nlohmann_json::nlohmann_json INTERFACE ${NLOHMANN_INCLUDE_DIR})
endif()

# CLI11
find_path(CLI11_INCLUDE_DIR CLI/CLI.hpp REQUIRED)
if(NOT TARGET CLI11::CLI11)
  add_library(CLI11::CLI11 INTERFACE IMPORTED)
  target_include_directories(CLI11::CLI11 INTERFACE ${CLI11_INCLUDE_DIR})
endif()

# doctest
find_path(DOCTEST_INCLUDE_DIR doctest/doctest.h REQUIRED)
add_library(recipe::doctest INTERFACE IMPORTED)
target_include_directories(recipe::doctest INTERFACE ${DOCTEST_INCLUDE_DIR})

# OpenBLAS (cblas interface)
find_path(CBLAS_INCLUDE_DIR cblas.h
          PATH_SUFFIXES include/${_multiarch}/openblas-pthread include/openblas include/${_multiarch}
          REQUIRED)
find_library(OPENBLAS_LIBRARY NAMES openblas
             PATH_SUFFIXES lib/${_multiarch}/openblas-pthread lib/${_multiarch} REQUIRED)
add_library(recipe::blas INTERFACE IMPORTED)
target_include_directories(recipe::blas INTERFACE ${CBLAS_INCLUDE_DIR})
target_link_libraries(recipe::blas INTERFACE ${OPENBLAS_LIBRARY})

# SentencePiece (tokenizer)
find_path(SENTENCEPIECE_INCLUDE_DIR sentencepiece_processor.h REQUIRED)
find_library(SENTENCEPIECE_LIBRARY NAMES sentencepiece PATH_SUFFIXES lib/${_multiarch} REQUIRED)
add_library(recipe::sentencepiece INTERFACE IMPORTED)
target_include_directories(recipe::sentencepiece INTERFACE ${SENTENCEPIECE_INCLUDE_DIR})
target_link_libraries(recipe::sentencepiece INTERFACE ${SENTENCEPIECE_LIBRARY})

# utf8proc (Unicode normalization: the NFC normalizer of Qwen2's tokenizer.json)
find_path(UTF8PROC_INCLUDE_DIR utf8proc.h REQUIRED)
find_library(UTF8PROC_LIBRARY NAMES utf8proc PATH_SUFFIXES lib/${_multiarch} REQUIRED)
add_library(recipe::utf8proc INTERFACE IMPORTED)
target_include_directories(recipe::utf8proc INTERFACE ${UTF8PROC_INCLUDE_DIR})
target_link_libraries(recipe::utf8proc INTERFACE ${UTF8PROC_LIBRARY})

# Cairo (PNG output of `recipe runs plot`). Optional: GPU clusters without it still build, and
# `runs plot -o x.png` then says how to get it.
find_package(PkgConfig QUIET)
if(PKG_CONFIG_FOUND)
  pkg_check_modules(CAIRO IMPORTED_TARGET cairo)
endif()
set(RECIPE_WITH_CAIRO ${CAIRO_FOUND})

# Open MPI (multi-rank worlds). Optional for a single-process build.
find_package(MPI COMPONENTS CXX)
set(RECIPE_WITH_MPI ${MPI_CXX_FOUND})

# CUDA: detected, not assumed.
set(RECIPE_WITH_CUDA OFF)
if(RECIPE_ENABLE_CUDA)
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(CMAKE_CUDA_ARCHITECTURES ${RECIPE_CUDA_ARCHITECTURES})
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(RECIPE_WITH_CUDA ON)
    find_library(CUDNN_LIBRARY NAMES cudnn HINTS ${CUDAToolkit_LIBRARY_DIR} PATH_SUFFIXES lib/${_multiarch})
    find_path(CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
    find_library(NCCL_LIBRARY NAMES nccl HINTS ${CUDAToolkit_LIBRARY_DIR} PATH_SUFFIXES lib/${_multiarch})
    find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
    if(NOT RECIPE_CUDNN_FRONTEND_INCLUDE)
      find_package(Python3 COMPONENTS Interpreter QUIET)
      if(Python3_FOUND)
        execute_process(COMMAND ${Python3_EXECUTABLE} -c "import sysconfig;print(sysconfig.get_paths()['purelib'])"
                        OUTPUT_VARIABLE _purelib OUTPUT_STRIP_TRAILING_WHITESPACE)
        set(RECIPE_CUDNN_FRONTEND_INCLUDE "${_purelib}/include")
      endif()
    endif()
    find_path(CUDNN_FRONTEND_INCLUDE_DIR cudnn_frontend.h
              HINTS ${RECIPE_CUDNN_FRONTEND_INCLUDE} ${RECIPE_DEPS_PREFIX}/cudnn_frontend/include)
    message(STATUS "recipe: CUDA ${CMAKE_CUDA_COMPILER_VERSION}, archs ${CMAKE_CUDA_ARCHITECTURES}")
    message(STATUS "recipe: cuDNN ${CUDNN_LIBRARY}, NCCL ${NCCL_LIBRARY}, cudnn-frontend ${CUDNN_FRONTEND_INCLUDE_DIR}")
  endif()
endif()
if(NOT RECIPE_WITH_CUDA)
  message(STATUS "recipe: no CUDA compiler found (or disabled): CPU-only build")
endif()

# SentencePiece's trainer library: only the tests use it (to train a tiny model to tokenize with).
find_library(SENTENCEPIECE_TRAIN_LIBRARY NAMES sentencepiece_train PATH_SUFFIXES lib/${_multiarch})
