"""Compiler flags shared by memoryd's own targets."""

# Our C is warning-free: every warning is an error.
MEMORYD_COPTS = ["-Wall", "-Wextra", "-Werror", "-std=gnu11", "-D_GNU_SOURCE"]

MEMORYD_CXXOPTS = ["-Wall", "-Wextra", "-Werror", "-std=c++17"]

# libpq installs its headers outside /usr/include's top level.
PQ_COPTS = ["-isystem", "/usr/include/postgresql"]

def memoryd_module(name = None, srcs = None, hdrs = None, deps = [], copts = []):
    """One C library of service/: named after its folder unless name is given.

    srcs and hdrs default to the folder's files: every .c file and the
    *_internal.h headers are sources, every other .h is the module's API.
    Every module is visible to the rest of the build.
    """
    native.cc_library(
        name = name or native.package_name().split("/")[-1],
        srcs = srcs if srcs != None else native.glob(["*.c", "*_internal.h"]),
        hdrs = hdrs if hdrs != None else native.glob(["*.h"], exclude = ["*_internal.h"]),
        copts = MEMORYD_COPTS + PQ_COPTS + copts,
        deps = deps,
        visibility = ["//visibility:public"],
    )

# What every tier's gRPC side builds on: the runtime, tokens, the audit
# trail, the tier kit and the shared plumbing.
TIER_DEPS = [
    "//protos:api_c",
    "//service/audit",
    "//service/auth",
    "//service/auth:authn",
    "//service/core",
    "//service/pb",
    "//service/pii",
    "//service/rpc",
    "//service/store",
    "//service/tier",
    "//service/tier:record",
]
