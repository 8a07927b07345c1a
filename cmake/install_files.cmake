# SPDX-License-Identifier: BSD-3-Clause
# Runs at install time (cmake/install.cmake lists the files). The layout:
#   <libdir>/weft/       libfabric.so.1 libucp.so.0 libucs.so.0 libucm.so.0
#                        libuct.so.0
#                        (drop-in: nothing loads them unless asked, `weft run`)
#   <libdir>/libfabric/  libweft_<name>-fi.so, plugins of the system libfabric
#   <libdir>/            libweft_rsm.so*, pkgconfig/weft-rsm.pc
#   include/rsmapi.h     bin/weft bin/weft-perf bin/rsm-perf
#   share/man/man{1,3,7}/  weft.1 weft-perf.1 rsm-perf.1, rsmapi.3 and a page per RSM
#                        call group, weft.7 fi_weft_<name>.7
# <libdir> is lib/<multiarch> under /usr (Debian's, whose libfabric looks
# for plugins in /usr/lib/<multiarch>/libfabric), lib elsewhere.
# DESTDIR is honoured by file(INSTALL); --strip by CMAKE_INSTALL_DO_STRIP.
set(prefix "${CMAKE_INSTALL_PREFIX}")
execute_process(COMMAND gcc -print-multiarch OUTPUT_VARIABLE multiarch OUTPUT_STRIP_TRAILING_WHITESPACE
  ERROR_QUIET)
if(prefix STREQUAL "/usr" AND multiarch)
  set(libdir "lib/${multiarch}")
else()
  set(libdir "lib")
endif()
set(gen "${WEFT_BINARY_DIR}/install/${libdir}")  # files written for this prefix

function(weft_install type dest)
  file(INSTALL DESTINATION "${prefix}/${dest}" TYPE ${type} FILES ${ARGN})
  if(CMAKE_INSTALL_DO_STRIP AND type MATCHES "SHARED_LIBRARY|MODULE|EXECUTABLE")
    foreach(f ${ARGN})
      get_filename_component(name "${f}" NAME)
      if(NOT IS_SYMLINK "${f}")
        execute_process(COMMAND strip --strip-unneeded "$ENV{DESTDIR}${prefix}/${dest}/${name}")
      endif()
    endforeach()
  endif()
endfunction()

weft_install(SHARED_LIBRARY "${libdir}/weft" ${WEFT_DROPIN_FILES})
weft_install(SHARED_LIBRARY "${libdir}" ${WEFT_RSM_FILES})
weft_install(MODULE "${libdir}/libfabric" ${WEFT_PLUGIN_FILES})
weft_install(EXECUTABLE bin ${WEFT_PROGRAMS})
weft_install(FILE include "${WEFT_SOURCE_DIR}/src/rsm/include/rsmapi.h")

# The weft command and the pkg-config file, made for this prefix.
set(WEFT_LIBDIR "${libdir}")
configure_file("${WEFT_SOURCE_DIR}/tools/weft.in" "${gen}/weft" @ONLY)
weft_install(PROGRAM bin "${gen}/weft")
configure_file("${WEFT_SOURCE_DIR}/src/rsm/weft-rsm.pc.in" "${gen}/weft-rsm.pc" @ONLY)
weft_install(FILE "${libdir}/pkgconfig" "${gen}/weft-rsm.pc")

# Man pages (built from docs/man/*.md; none if go-md2man was missing).
foreach(section 1 3 7)
  file(GLOB pages "${WEFT_BINARY_DIR}/man/*.${section}")
  if(pages)
    weft_install(FILE "share/man/man${section}" ${pages})
  endif()
endforeach()
