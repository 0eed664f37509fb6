# Turns the dashboard's files into one C++ header holding each as a std::string_view in a table of
# {name, content} (run at build time by service/CMakeLists.txt). Usage:
#   cmake -DOUT=header -DFILES="a.html|b.js|..." -P embed_assets.cmake   (names are the base names)
string(REPLACE "|" ";" files "${FILES}")
set(body "")
foreach(f IN LISTS files)
  file(READ "${f}" content)
  string(FIND "${content}" ")tessera_embed" clash)
  if(NOT clash EQUAL -1)
    message(FATAL_ERROR "${f} contains the raw-string delimiter )tessera_embed")
  endif()
  get_filename_component(base "${f}" NAME)
  string(APPEND body "    {\"${base}\", R\"tessera_embed(${content})tessera_embed\"},\n")
endforeach()
file(WRITE "${OUT}.tmp"
  "// Generated at build time from the dashboard's files by embed_assets.cmake; do not edit.\n"
  "#pragma once\n#include <string_view>\n\nnamespace tessera::cache {\n"
  "struct EmbeddedFile {\n  std::string_view name, content;\n};\n"
  "inline constexpr EmbeddedFile kEmbeddedUiFiles[] = {\n${body}};\n"
  "}  // namespace tessera::cache\n")
# Rewrite only on change so dependents do not rebuild needlessly.
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
