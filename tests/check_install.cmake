# check_install.cmake: `cmake --install` into a scratch prefix puts a working statebench in bin/,
# the plugin API headers in include/statebench/ and the example plugin where the docs say
# (run by ctest as the `install` test: cmake -DBUILD=... -DPREFIX=... -P check_install.cmake).
file(REMOVE_RECURSE ${PREFIX})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD} --prefix ${PREFIX} RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install ${BUILD} --prefix ${PREFIX} failed (${rc})")
endif()
foreach(f bin/statebench include/statebench/plugin.hpp include/statebench/plugin_abi.h include/statebench/rng.hpp
          lib/statebench/plugins/libstatebench_example_plugin.so)
  if(NOT EXISTS ${PREFIX}/${f})
    message(FATAL_ERROR "cmake --install did not install ${f}")
  endif()
endforeach()
execute_process(COMMAND ${PREFIX}/bin/statebench --plugin ${PREFIX}/lib/statebench/plugins/libstatebench_example_plugin.so
                        tasks show modular_counter
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "length parameter: length")
  message(FATAL_ERROR "the installed statebench did not load the installed example plugin (${rc}): ${out}${err}")
endif()
file(REMOVE_RECURSE ${PREFIX})
