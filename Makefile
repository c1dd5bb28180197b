# memoryd developer entry points. `make` (or `make help`) lists the targets.
#
# Variables (environment or `make VAR=value`):
#   MEMORYD_LISTEN          address of `make run`'s memoryd (default 127.0.0.1:50051)
#   MEMORYD_BIN             binary `make run` starts (default bazel-bin/service/memoryd)
#   MEMORYD_DEV_PG_PORT     private PostgreSQL port (default 55432)
#   MEMORYD_DEV_REDIS_PORT  private Redis port (default 56379)
#   BAZEL_BUILD_FLAGS       extra flags for `bazel build`
#   BAZEL_TEST_FLAGS        extra flags for `bazel test`
#   CI                      CI=true: `make test` stops the dev stack when done

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.ONESHELL:
.DEFAULT_GOAL := help
MAKEFLAGS += --no-print-directory

ROOT := $(patsubst %/,%,$(dir $(abspath $(lastword $(MAKEFILE_LIST)))))
BAZEL ?= bazel
DEVSTACK := $(ROOT)/scripts/devstack.sh
MEMORYD_LISTEN ?= 127.0.0.1:50051
export MEMORYD_LISTEN
MEMORYD_BIN ?= $(ROOT)/bazel-bin/service/memoryd

.PHONY: help deps build run stop test test-asan faults bench format format-check clean distclean

help: ## list the targets
	@echo "memoryd -- make targets:"
	awk 'BEGIN { FS = ":.*## " } /^[a-z][a-zA-Z0-9_-]*:.*## / { printf "  %-13s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)
	echo
	echo "Variables: MEMORYD_LISTEN (127.0.0.1:50051), MEMORYD_DEV_PG_PORT (55432),"
	echo "  MEMORYD_DEV_REDIS_PORT (56379), MEMORYD_BIN, BAZEL_BUILD_FLAGS, BAZEL_TEST_FLAGS, CI=true"

deps: ## install missing Debian packages (apt-get) and the Node packages' npm dependencies (npm ci); fast no-op when all present
	@"$(ROOT)/scripts/install-deps.sh"
	"$(ROOT)/scripts/install-node-modules.sh"

build: deps ## bazel build //...
	@cd "$(ROOT)"
	echo "+ $(strip $(BAZEL) build //... $(BAZEL_BUILD_FLAGS))"
	$(BAZEL) build //... $(BAZEL_BUILD_FLAGS)

run: deps build ## build, start Postgres + Redis + memoryd in the background (.local/)
	@cd "$(ROOT)"
	"$(DEVSTACK)" start
	"$(DEVSTACK)" start-memoryd "$(MEMORYD_BIN)"

stop: ## stop memoryd, Postgres and Redis
	@"$(DEVSTACK)" stop

# $(call bazel_test,extra bazel flags): start the dev stack, run bazel test
# against it and exit with bazel's status. With CI=true the stack is stopped
# at the end whatever happens; otherwise it is left running for the next run.
# (With .ONESHELL, make strips a leading -, + or @ from every recipe line, so
# no recipe line may start with a --flag.)
define bazel_test
	@cd "$(ROOT)"
	case "$${CI:-}" in true | 1) trap '"$(DEVSTACK)" stop' EXIT ;; esac
	"$(DEVSTACK)" start
	source .local/env
	rc=0
	args=(//... $(1) $(BAZEL_TEST_FLAGS))
	args+=("--test_env=MEMORYD_TEST_PG_URL=$$MEMORYD_PG_URL")
	args+=("--test_env=MEMORYD_TEST_REDIS_URL=$$MEMORYD_REDIS_URL")
	echo "+ $(BAZEL) test $${args[*]}"
	$(BAZEL) test "$${args[@]}" 2>&1 | tee .local/last-test.log || rc=$$?
	# One closing line CI can read: test targets passed and failed.
	passed=$$(grep -cE '^//[^ ]+ +(\(cached\) )?PASSED in' .local/last-test.log || true)
	failed=$$(grep -cE '^//[^ ]+ +(\(cached\) )?(FAILED|TIMEOUT|NO STATUS|INCOMPLETE|FLAKY)' .local/last-test.log || true)
	if ((rc != 0)); then echo "make: bazel test exited with status $$rc" >&2; fi
	echo "targets: $$passed passed, $$failed failed"
	exit $$rc
endef

test: deps ## start Postgres + Redis, bazel test //... against them
	$(call bazel_test,)

test-asan: deps ## like test, with --config=asan (ASan + UBSan)
	$(call bazel_test,--config=asan)

faults: deps ## the fault suite alone (SIGKILL, PostgreSQL stopped/frozen, Redis killed, SIGTERM under load), with its figures
	@cd "$(ROOT)"
	mkdir -p .local
	rc=0
	$(BAZEL) test //tests/server:fault_test --nocache_test_results --test_output=all $(BAZEL_TEST_FLAGS) > .local/last-faults.log 2>&1 || rc=$$?
	grep -E '^fault-suite:|^\[  (FAILED|PASSED|  OK) |Failure$$' .local/last-faults.log || true
	if ((rc != 0)); then echo "make: the fault suite failed (.local/last-faults.log)" >&2; fi
	exit $$rc

bench: deps build ## build, start Postgres + Redis, run the benchmarks: vs grpc++, auth cost, GlobalMemory vs libpq, Cache vs Redis, EpisodicMemory vs FAISS, Blackboard vs its Lua script, metrics on vs off, 3 replicas behind nginx vs 1 direct, WorkingMemory.Render vs libpq, text recall's cost and quality
	@cd "$(ROOT)"
	"$(DEVSTACK)" start
	if [[ ! -f bench/run.sh ]]; then
	  echo "make bench: bench/run.sh does not exist yet; nothing to run"
	  exit 0
	fi
	set -a
	source .local/env
	set +a
	export BENCH_SUMMARY=$$(mktemp "$${TMPDIR:-/tmp}/memoryd-bench-summary.XXXXXX")
	trap 'bash bench/summary.sh "$$BENCH_SUMMARY"; rm -f "$$BENCH_SUMMARY"' EXIT
	bash bench/run.sh
	BENCH_MODE=auth BENCH_SKIP_BUILD=1 bash bench/run.sh
	# GetEntity at 4, 16 and 64 calls in flight, and with one worker.
	for c in 4 16 64; do BENCH_CONCURRENCY=$$c BENCH_SKIP_BUILD=1 bash bench/global.sh; done
	BENCH_CONCURRENCY=16 BENCH_SERVER_THREADS=1 BENCH_SKIP_BUILD=1 bash bench/global.sh
	bash bench/cache.sh
	bash bench/episodic.sh
	bash bench/blackboard.sh
	bash bench/router.sh
	bash bench/privacy.sh
	bash bench/metrics.sh
	BENCH_SKIP_BUILD=1 bash bench/replicas.sh
	# WorkingMemory.Render: latency alone (1 in flight), then under load (4).
	for c in 1 4; do BENCH_CONCURRENCY=$$c bash bench/working.sh; done
	# EpisodicMemory.Search by text vs by vector, and the embedder directly.
	BENCH_SKIP_BUILD=1 bash bench/embedder.sh
	# Text recall: its cost (lexical vs vector search), then its quality
	# (recall@k and MRR against a textbook BM25).
	BENCH_SKIP_BUILD=1 bash bench/recall.sh
	BENCH_SKIP_BUILD=1 bash bench/recall_quality.sh
	# Ranked text queries in PostgreSQL (Entries.Search, QueryEntities).
	for n in 10000 100000; do BENCH_RANKED_ROWS=$$n BENCH_SKIP_BUILD=1 bash bench/ranked.sh; done

format: ## clang-format every C/C++ source in place (.clang-format, service/.clang-format)
	scripts/format.sh

format-check: ## fail naming the sources clang-format would change (CI runs it)
	scripts/format.sh --check

clean: ## bazel clean (keeps .local/)
	@cd "$(ROOT)"
	$(BAZEL) clean

distclean: ## stop everything, delete .local/, bazel clean --expunge
	@cd "$(ROOT)"
	"$(DEVSTACK)" destroy
	$(BAZEL) clean --expunge
