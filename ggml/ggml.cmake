# Find ggml as installed by the PyPI package libggml-python (built from its sdist with
# GGML_NATIVE/GGML_LLAMAFILE, or its prebuilt wheel). The wheel puts the CMake package under
# lib64, which CMake on Debian does not search, so ask the build's Python where it lives.
execute_process(
  COMMAND "${Python_EXECUTABLE}" -c "import libggml, os; print(os.path.dirname(libggml.__file__))"
  OUTPUT_VARIABLE LIBGGML_DIR
  OUTPUT_STRIP_TRAILING_WHITESPACE
  RESULT_VARIABLE LIBGGML_RC)
if(NOT LIBGGML_RC EQUAL 0)
  message(FATAL_ERROR "libggml-python is not importable by ${Python_EXECUTABLE}; "
                      "pip install libggml-python==0.20.2.post1")
endif()

find_package(ggml CONFIG REQUIRED
  HINTS "${LIBGGML_DIR}/lib64/cmake/ggml" "${LIBGGML_DIR}/lib/cmake/ggml")

# The exported target carries an $ORIGIN run-path that Ninja escapes into garbage; we set our own.
foreach(tgt ggml::ggml ggml::ggml-base ggml::ggml-cpu)
  if(TARGET ${tgt})
    set_property(TARGET ${tgt} PROPERTY INTERFACE_LINK_OPTIONS "")
  endif()
endforeach()
message(STATUS "omnivoice: ggml from ${LIBGGML_DIR}")
