# Installs the built kcl into a scratch prefix and builds a program that uses
# find_package(kcl) against it (and the examples/ programs), then runs that program.
file(REMOVE_RECURSE ${KCL_SMOKE_WORK})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${KCL_BINARY_DIR} --prefix ${KCL_SMOKE_WORK}/prefix
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(rc)
  message(FATAL_ERROR "install failed: ${rc}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S ${KCL_SMOKE_SOURCE} -B ${KCL_SMOKE_WORK}/build
                        -DCMAKE_PREFIX_PATH=${KCL_SMOKE_WORK}/prefix
                        -DKCL_EXAMPLES_DIR=${KCL_EXAMPLES_DIR}
                        "-DCMAKE_CXX_FLAGS=${KCL_SMOKE_CXX_FLAGS}"
                        "-DCMAKE_EXE_LINKER_FLAGS=${KCL_SMOKE_CXX_FLAGS}" RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "configuring the consumer failed: ${rc}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${KCL_SMOKE_WORK}/build RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "building the consumer failed: ${rc}")
endif()
execute_process(COMMAND ${KCL_SMOKE_WORK}/build/consumer RESULT_VARIABLE rc OUTPUT_VARIABLE out)
if(rc OR NOT out MATCHES "kcl ok")
  message(FATAL_ERROR "the consumer failed: ${rc} ${out}")
endif()
message(STATUS "find_package(kcl) smoke test passed: ${out}")
