# Detection of parasim's optional parts. Each part is looked for first; the option that
# switches it defaults to whether it was found, so a plain configure builds everything the
# machine has, and -DPARASIM_WITH_X=OFF turns a part off. A part switched on but missing
# is an error rather than a silent downgrade.
#
#   PARASIM_WITH_CUDA  CUDA backend: nvcc, cuBLAS, NCCL (default /usr/local/cuda)
#   PARASIM_WITH_MPI   CPU backend:  MPI (C API) and a CBLAS (OpenBLAS preferred)
#   PARASIM_WITH_GUI   dashboard:    Qt 6 Widgets and Charts

include(CheckLanguage)

# --- MPI + BLAS -----------------------------------------------------------------------
find_package(MPI QUIET COMPONENTS C)
set(BLA_VENDOR OpenBLAS)
find_package(BLAS QUIET)
if(NOT BLAS_FOUND)
  unset(BLA_VENDOR)
  find_package(BLAS QUIET)
endif()
find_path(PARASIM_CBLAS_INCLUDE_DIR cblas.h PATH_SUFFIXES openblas x86_64-linux-gnu)
set(_mpi_found OFF)
if(MPI_C_FOUND AND BLAS_FOUND AND PARASIM_CBLAS_INCLUDE_DIR)
  set(_mpi_found ON)
endif()
option(PARASIM_WITH_MPI "Build the CPU backend (MPI + BLAS)" ${_mpi_found})
if(PARASIM_WITH_MPI AND NOT _mpi_found)
  message(FATAL_ERROR "PARASIM_WITH_MPI=ON but MPI (C) or a CBLAS was not found; "
                      "install libopenmpi-dev and libopenblas-dev or pass -DPARASIM_WITH_MPI=OFF")
endif()

# --- CUDA + cuBLAS + NCCL ---------------------------------------------------------------
set(_cuda_found OFF)
if(NOT DEFINED CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
  set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
endif()
check_language(CUDA)
if(CMAKE_CUDA_COMPILER)
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND)
    # NCCL: beside the toolkit, under $NCCL_HOME, or a Python wheel's nvidia/nccl (what a
    # machine with PyTorch has, often only as libnccl.so.2 with no unversioned link).
    set(_nccl_hints ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_INCLUDE_DIRS}/..)
    find_package(Python3 QUIET COMPONENTS Interpreter)
    if(Python3_Interpreter_FOUND)
      execute_process(COMMAND ${Python3_EXECUTABLE} -c "import nvidia.nccl as n; print(list(n.__path__)[0])"
                      OUTPUT_VARIABLE _nccl_wheel OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
      if(_nccl_wheel)
        list(APPEND _nccl_hints ${_nccl_wheel})
      endif()
    endif()
    file(GLOB _nccl_wheels /opt/*/.venv/lib/python3*/site-packages/nvidia/nccl /usr/local/lib/python3*/dist-packages/nvidia/nccl
         /usr/lib/python3/dist-packages/nvidia/nccl)
    list(APPEND _nccl_hints ${_nccl_wheels})
    find_path(PARASIM_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} ENV NCCL_HOME ${_nccl_hints}
              PATH_SUFFIXES include)
    find_library(PARASIM_NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS ${CUDAToolkit_LIBRARY_DIR} ENV NCCL_HOME ${_nccl_hints}
                 PATH_SUFFIXES lib lib64)
    if(TARGET CUDA::cublas AND PARASIM_NCCL_INCLUDE_DIR AND PARASIM_NCCL_LIBRARY)
      set(_cuda_found ON)
    endif()
  endif()
endif()
option(PARASIM_WITH_CUDA "Build the CUDA backend (cuBLAS + NCCL)" ${_cuda_found})
if(PARASIM_WITH_CUDA)
  if(NOT _cuda_found)
    message(FATAL_ERROR "PARASIM_WITH_CUDA=ON but nvcc, cuBLAS or NCCL was not found; "
                        "set CUDAToolkit_ROOT / NCCL_HOME or pass -DPARASIM_WITH_CUDA=OFF")
  endif()
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    # A100 (sm_80) and H100/H200 (sm_90); override for other GPUs.
    set(CMAKE_CUDA_ARCHITECTURES 80 90)
  endif()
  if(NOT DEFINED CMAKE_CUDA_HOST_COMPILER)
    set(CMAKE_CUDA_HOST_COMPILER ${CMAKE_CXX_COMPILER})
  endif()
  enable_language(CUDA)
  set(CMAKE_CUDA_STANDARD 17)  # CMake 3.25 knows no C++20 flag for nvcc 13
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  add_library(parasim_nccl INTERFACE)
  target_include_directories(parasim_nccl INTERFACE ${PARASIM_NCCL_INCLUDE_DIR})
  target_link_libraries(parasim_nccl INTERFACE ${PARASIM_NCCL_LIBRARY})
endif()

# --- Qt 6 -------------------------------------------------------------------------------
find_package(Qt6 QUIET COMPONENTS Widgets Charts Concurrent)
set(_gui_found OFF)
if(Qt6Widgets_FOUND AND Qt6Charts_FOUND AND Qt6Concurrent_FOUND)
  set(_gui_found ON)
endif()
option(PARASIM_WITH_GUI "Build the Qt 6 dashboard" ${_gui_found})
if(PARASIM_WITH_GUI AND NOT _gui_found)
  message(FATAL_ERROR "PARASIM_WITH_GUI=ON but Qt 6 Widgets and Charts were not found; "
                      "install qt6-base-dev and qt6-charts-dev or pass -DPARASIM_WITH_GUI=OFF")
endif()

function(parasim_feature_summary)
  message(STATUS "")
  message(STATUS "parasim ${PROJECT_VERSION} configuration")
  message(STATUS "  build type           ${CMAKE_BUILD_TYPE}")
  message(STATUS "  warnings as errors   ${PARASIM_WERROR}")
  message(STATUS "  sanitizers           ${PARASIM_SANITIZE}")
  if(PARASIM_WITH_MPI)
    message(STATUS "  CPU backend          ON   (MPI ${MPI_C_VERSION}, BLAS ${BLAS_LIBRARIES})")
  else()
    message(STATUS "  CPU backend          OFF  (MPI + BLAS ${_mpi_found} found)")
  endif()
  if(PARASIM_WITH_CUDA)
    message(STATUS "  CUDA backend         ON   (CUDA ${CUDAToolkit_VERSION}, NCCL ${PARASIM_NCCL_LIBRARY}, sm ${CMAKE_CUDA_ARCHITECTURES})")
  else()
    message(STATUS "  CUDA backend         OFF  (nvcc + cuBLAS + NCCL found: ${_cuda_found})")
  endif()
  if(PARASIM_WITH_GUI)
    message(STATUS "  Qt dashboard         ON   (Qt ${Qt6_VERSION})")
  else()
    message(STATUS "  Qt dashboard         OFF  (Qt 6 Widgets + Charts found: ${_gui_found})")
  endif()
  message(STATUS "  tests                ${PARASIM_BUILD_TESTS}")
  message(STATUS "")
endfunction()
