# Turns a text file into a C++ header holding it as a std::string_view (run at build time by
# service/CMakeLists.txt). Usage: cmake -DIN=file -DOUT=header -DNAME=identifier -P embed_file.cmake
file(READ "${IN}" content)
string(FIND "${content}" ")tessera_embed" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${IN} contains the raw-string delimiter )tessera_embed")
endif()
get_filename_component(base "${IN}" NAME)
file(WRITE "${OUT}.tmp"
  "// Generated at build time from ${base} by embed_file.cmake; do not edit.\n"
  "#pragma once\n#include <string_view>\n\nnamespace tessera::cache {\n"
  "inline constexpr std::string_view ${NAME} = R\"tessera_embed(${content})tessera_embed\";\n"
  "}  // namespace tessera::cache\n")
# Rewrite only on change so dependents do not rebuild needlessly.
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
