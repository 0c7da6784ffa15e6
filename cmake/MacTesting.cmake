# mac_add_test_suite(NAME <name> SOURCES <files...> LIBS <libs...> [LABELS <labels...>])
#
# One Boost.Test executable per suite, registered with CTest. Boost.Test is used
# header-only: exactly one source of each suite defines BOOST_TEST_MODULE and
# includes <boost/test/included/unit_test.hpp>; the others include
# <boost/test/unit_test.hpp>.
function(mac_add_test_suite)
  cmake_parse_arguments(ARG "" "NAME" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${ARG_NAME} ${ARG_SOURCES})
  target_link_libraries(${ARG_NAME} PRIVATE ${ARG_LIBS} Boost::boost mac_warnings)
  target_include_directories(${ARG_NAME} PRIVATE ${PROJECT_SOURCE_DIR}/tests/common)
  target_compile_definitions(${ARG_NAME} PRIVATE
    MAC_SOURCE_DIR="${PROJECT_SOURCE_DIR}" MAC_BINARY_DIR="${PROJECT_BINARY_DIR}")
  set_target_properties(${ARG_NAME} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/tests)
  add_test(NAME ${ARG_NAME} COMMAND ${ARG_NAME} --report_level=short --log_level=message
           WORKING_DIRECTORY ${PROJECT_BINARY_DIR})
  if(ARG_LABELS)
    set_tests_properties(${ARG_NAME} PROPERTIES LABELS "${ARG_LABELS}")
  endif()
endfunction()
