# Turns the bundle runtime's C files into a C++ header (bundle/runtime_embed.h) so that `tessera
# bundle` writes them from its own binary. Usage:
#   cmake -DOUT=header -DFILES="a.c|b.h" -P embed_runtime.cmake
string(REPLACE "|" ";" files "${FILES}")
set(body "")
foreach(f IN LISTS files)
  file(READ "${f}" content)
  string(FIND "${content}" ")tessera_rt" clash)
  if(NOT clash EQUAL -1)
    message(FATAL_ERROR "${f} contains the raw-string delimiter )tessera_rt")
  endif()
  get_filename_component(base "${f}" NAME)
  string(APPEND body "    {\"${base}\", R\"tessera_rt(${content})tessera_rt\"},\n")
endforeach()
file(WRITE "${OUT}.tmp"
  "// Generated at build time from bundle/runtime/ by embed_runtime.cmake; do not edit.\n"
  "#pragma once\n#include <string_view>\n\nnamespace tessera::bundle {\n"
  "struct RuntimeFile {\n  std::string_view name, text;\n};\n"
  "inline constexpr RuntimeFile kRuntimeFiles[] = {\n${body}};\n}  // namespace tessera::bundle\n")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
