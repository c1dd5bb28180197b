"""Compiler flags shared by memoryd's own targets."""

# Our C is warning-free: every warning is an error.
MEMORYD_COPTS = ["-Wall", "-Wextra", "-Werror", "-std=gnu11", "-D_GNU_SOURCE"]

MEMORYD_CXXOPTS = ["-Wall", "-Wextra", "-Werror", "-std=c++17"]

# libpq installs its headers outside /usr/include's top level.
PQ_COPTS = ["-isystem", "/usr/include/postgresql"]
