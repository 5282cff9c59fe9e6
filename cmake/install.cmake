# `cmake --install`: headers, the libraries as exported targets gyre::core, gyre::rt, gyre::rl and gyre::torch (with
# a gyreConfig.cmake for find_package(gyre) and a gyre.pc for pkg-config), and the gyre tool with
# the trainer's, gyre rl's and gyre serve's workers and the benchmarks' programs beside it. docs/install.md shows how a program uses them.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(GYRE_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/gyre)

install(TARGETS gyre_core gyre_rt gyre_rl_envs EXPORT gyreTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
if(TARGET gyre_torch)
  install(TARGETS gyre_torch gyre_data_files EXPORT gyreTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(DIRECTORY include/gyre DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
else()  # no libtorch: the gyre::torch headers would not compile against anything
  install(DIRECTORY include/gyre DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} PATTERN "torch" EXCLUDE
          PATTERN "torch.h" EXCLUDE PATTERN "tensor.h" EXCLUDE PATTERN "serve.h" EXCLUDE)
endif()
foreach(program gyre gyre_train_worker gyre_rl_worker gyre_serve_worker gyre_data_load gyre_mpi_bench)
  if(TARGET ${program})
    install(TARGETS ${program} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  endif()
endforeach()
# The scripts gyre bench runs from beside the tool: the DDP and torchvision baselines, the export.
install(PROGRAMS ${CMAKE_BINARY_DIR}/bin/gyre_ddp_train.py ${CMAKE_BINARY_DIR}/bin/gyre_torchvision_loader.py
                 ${CMAKE_BINARY_DIR}/bin/gyre_export_fashion_mnist.py DESTINATION ${CMAKE_INSTALL_BINDIR})

install(EXPORT gyreTargets NAMESPACE gyre:: DESTINATION ${GYRE_CMAKE_DIR})
set(GYRE_CONFIG_WITH_MPI ${GYRE_WITH_MPI})
set(GYRE_CONFIG_WITH_TORCH ${GYRE_WITH_TORCH})
configure_package_config_file(cmake/gyreConfig.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/gyreConfig.cmake
                              INSTALL_DESTINATION ${GYRE_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/gyreConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/gyreConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/gyreConfigVersion.cmake
        DESTINATION ${GYRE_CMAKE_DIR})

# pkg-config, for the communication core (gyre::torch's users build with CMake, as libtorch's do).
set(GYRE_PC_LIBS "-lgyre_core -lcpp-httplib -lcrypto -lrt -pthread")  # cpp-httplib: the etcd store
set(GYRE_PC_CFLAGS "")
if(GYRE_WITH_MPI)
  string(APPEND GYRE_PC_CFLAGS " -DGYRE_WITH_MPI=1")
  foreach(lib ${MPI_C_LIBRARIES})
    string(APPEND GYRE_PC_LIBS " ${lib}")
  endforeach()
endif()
# The prefix relative to the .pc file, so an install moved with `cmake --install --prefix` works.
file(RELATIVE_PATH GYRE_PC_PREFIX_FROM_PCDIR "${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig" "${CMAKE_INSTALL_PREFIX}")
configure_file(cmake/gyre.pc.in ${CMAKE_CURRENT_BINARY_DIR}/gyre.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/gyre.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
