# Installs the build into a scratch prefix, then builds and runs a consumer
# twice: through find_package(vattn CONFIG) and through pkg-config.
# Args: BUILD_DIR, SRC_DIR, WORK_DIR, C_COMPILER.
file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix}
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install failed")
endif()
file(GLOB_RECURSE sonames ${prefix}/lib*/libvattn.so.0)
if(NOT sonames)
  message(FATAL_ERROR "no libvattn.so.0 (SONAME link) installed under ${prefix}")
endif()
# 1. CMake package.
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SRC_DIR}/consumer -B ${WORK_DIR}/cm
                        -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_C_COMPILER=${C_COMPILER}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "find_package(vattn) consumer configure failed:\n${out}\n${err}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}/cm RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "consumer build failed:\n${out}\n${err}")
endif()
file(GLOB libdirs LIST_DIRECTORIES true ${prefix}/lib*)
set(ENV{LD_LIBRARY_PATH} "${libdirs}")
execute_process(COMMAND ${WORK_DIR}/cm/consumer RESULT_VARIABLE rc OUTPUT_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "consumer (CMake package) failed to run: ${out}")
endif()
message(STATUS "${out}")
# 2. pkg-config.
find_program(PKG_CONFIG pkg-config)
if(PKG_CONFIG)
  file(GLOB_RECURSE pcs ${prefix}/*/vattn.pc)
  list(GET pcs 0 pc)
  get_filename_component(pcdir ${pc} DIRECTORY)
  set(ENV{PKG_CONFIG_PATH} ${pcdir})
  execute_process(COMMAND ${PKG_CONFIG} --cflags --libs vattn OUTPUT_VARIABLE flags RESULT_VARIABLE rc
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "pkg-config vattn failed")
  endif()
  separate_arguments(flags UNIX_COMMAND "${flags}")
  # dlpack.h is a public dependency of vattn.h (Debian libdlpack-dev in /usr/include).
  execute_process(COMMAND ${C_COMPILER} ${SRC_DIR}/consumer/main.c ${flags} -o ${WORK_DIR}/pc_consumer
                  RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "pkg-config consumer build failed: ${err}")
  endif()
  execute_process(COMMAND ${WORK_DIR}/pc_consumer RESULT_VARIABLE rc OUTPUT_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "consumer (pkg-config) failed to run")
  endif()
  message(STATUS "${out}")
else()
  message(STATUS "pkg-config not found: pkg-config consumer not checked")
endif()
