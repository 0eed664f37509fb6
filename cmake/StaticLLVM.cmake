# Static MLIR/LLVM for portable binaries (TESSERA_STATIC_LLVM): Debian builds LLVM 22 with
# LLVM_LINK_LLVM_DYLIB, so every exported MLIR target names the shared "LLVM" (and some "MLIR") in
# its link interface. Those names are taken out and replaced by the static archives, which ld.lld
# searches regardless of order and pulls only the members the program references: the binary
# needs neither libLLVM.so (150 MB) nor libMLIR.so (107 MB) where it runs (bench/gpu/pack_device.sh).

# LLVMSupport's link interface names zstd's CMake target, which Debian's libzstd-dev lacks.
if(NOT TARGET zstd::libzstd_shared)
  find_library(TESSERA_ZSTD_LIBRARY NAMES zstd libzstd.so.1 REQUIRED)
  add_library(zstd::libzstd_shared SHARED IMPORTED)
  set_target_properties(zstd::libzstd_shared PROPERTIES IMPORTED_LOCATION ${TESSERA_ZSTD_LIBRARY})
endif()

# llvm_map_components_to_libnames(... all) expands to nothing in a dylib build: take the list.
set(tessera_llvm_all ${LLVM_AVAILABLE_LIBS})
list(FILTER tessera_llvm_all INCLUDE REGEX "^LLVM.")
list(FILTER tessera_llvm_all EXCLUDE REGEX "Fuzz|FileCheck|TableGen|Exegesis|gtest|Testing|Debuginfod|LineEditor")
get_property(tessera_mlir_all GLOBAL PROPERTY MLIR_ALL_LIBS)
list(FILTER tessera_mlir_all EXCLUDE REGEX "Test|CAPI|^MLIR$|Lsp|Tblgen|TableGen|PDLL|Reduce|OptLib|OptMain|JitRunner|Query|Plugins|_")
set(TESSERA_STATIC_LLVM_LIBS)
foreach(t IN LISTS tessera_mlir_all tessera_llvm_all)
  if(TARGET ${t})
    list(APPEND TESSERA_STATIC_LLVM_LIBS ${t})
  endif()
endforeach()
get_directory_property(tessera_imported IMPORTED_TARGETS)
foreach(t IN LISTS tessera_imported)
  get_target_property(deps ${t} INTERFACE_LINK_LIBRARIES)
  if(deps)
    # Plain names and the $<LINK_ONLY:...> form exported for static libraries' private deps.
    list(FILTER deps EXCLUDE REGEX "^(\\$<LINK_ONLY:)?(LLVM|MLIR|Polly|PollyISL)>?$")
    set_target_properties(${t} PROPERTIES INTERFACE_LINK_LIBRARIES "${deps}")
  endif()
endforeach()
if(NOT CMAKE_CXX_COMPILER_LINKER_ID STREQUAL "LLD")
  add_link_options(-fuse-ld=lld)
endif()
