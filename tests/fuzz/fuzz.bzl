"""memoryd_fuzz_test: a libFuzzer target built as a plain cc_test.

The test links the target's LLVMFuzzerTestOneInput with replay_main.c and
replays corpus/<name>/ plus any generated seeds, then a fixed-seed sweep of
mutated inputs. tests/fuzz/run.sh builds the same sources with clang and
libFuzzer instead.
"""

load("//bazel/system:defs.bzl", "MEMORYD_COPTS")

def memoryd_fuzz_test(name, srcs, deps, extra_copts = [], generated_seeds = [], size = "small"):
    native.cc_test(
        name = name,
        size = size,
        srcs = srcs + ["replay_main.c", "fuzz_target.h"],
        copts = MEMORYD_COPTS + extra_copts,
        deps = deps + ["//bazel/system:pthread"],
        data = native.glob(["corpus/%s/*" % name]) + generated_seeds,
        args = ["tests/fuzz/corpus/" + name] +
               ["$(rootpaths %s)" % s for s in generated_seeds],
    )
