# The two commands of the README, as a thin layer over CMake.
#   make run    install what is missing, build, run the kNN demo on the devices found
#   make check  install what is missing, build, run every test
# Variables: BUILD (build folder), JOBS, CMAKE_ARGS.
BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_ARGS ?=

.PHONY: all deps build run check check-sanitize check-clang check-tsan fuzz soak format clean

all: build

deps:
	@scripts/install-deps.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_ARGS)

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

run: build
	scripts/demo.sh $(BUILD)

check: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# The same suite built with AddressSanitizer and UndefinedBehaviorSanitizer (a test whose only
# fault is LeakSanitizer's tracer crashing at exit is rerun, up to twice: scripts/ctest-sanitized.sh).
check-sanitize: deps
	cmake -S . -B $(BUILD)-sanitize -DCMAKE_BUILD_TYPE=Debug -DLOOM_SANITIZE=ON \
	  -DLOOM_TEST_CACHE_DIR=$(abspath $(BUILD))/test-cache $(CMAKE_ARGS)
	cmake --build $(BUILD)-sanitize -j $(JOBS)
	scripts/ctest-sanitized.sh $(BUILD)-sanitize -j $(JOBS)

# The same suite built with clang (CI builds with both compilers).
check-clang: deps
	cmake -S . -B $(BUILD)-clang -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DLOOM_TEST_CACHE_DIR=$(abspath $(BUILD))/test-cache $(CMAKE_ARGS)
	cmake --build $(BUILD)-clang -j $(JOBS)
	cd $(BUILD)-clang && ctest --output-on-failure -j $(JOBS)

# The suite under ThreadSanitizer (TSAN_TESTS: a ctest -R regex; default every test).
TSAN_TESTS ?= .
check-tsan: deps
	cmake -S . -B $(BUILD)-tsan -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug -DLOOM_TSAN=ON \
	  -DLOOM_TEST_CACHE_DIR=$(abspath $(BUILD))/test-cache $(CMAKE_ARGS)
	cmake --build $(BUILD)-tsan -j $(JOBS)
	cd $(BUILD)-tsan && ctest --output-on-failure -j $(JOBS) -R '$(TSAN_TESTS)'

# libFuzzer: builds tests/fuzz with clang, ASan and UBSan (no GPU backends: the targets reach
# the parser, planner and readers only), then runs each target FUZZ_SECONDS on its corpus in
# tests/fuzz/corpus/<target>, which keeps what the run adds. Crashes land in $(BUILD)-fuzz.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS = fuzz_lir fuzz_npy fuzz_specs fuzz_safetensors fuzz_json fuzz_onnx
fuzz: deps
	cmake -S . -B $(BUILD)-fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DLOOM_FUZZ=ON -DLOOM_SANITIZE=ON -DLOOM_BUILD_TESTS=OFF -DLOOM_CUDA=OFF -DLOOM_OPENCL=OFF $(CMAKE_ARGS)
	cmake --build $(BUILD)-fuzz -j $(JOBS) --target $(FUZZ_TARGETS)
	for t in $(FUZZ_TARGETS); do \
	  mkdir -p tests/fuzz/corpus/$$t && \
	  $(BUILD)-fuzz/tests/fuzz/$$t -max_total_time=$(FUZZ_SECONDS) -timeout=30 -rss_limit_mb=4096 \
	    -print_final_stats=1 -artifact_prefix=$(BUILD)-fuzz/$$t- \
	    -dict=tests/fuzz/$$t.dict tests/fuzz/corpus/$$t || exit 1; \
	done

# The soak test (issue 32, tests/soak/soak.c): processes and threads running random graphs
# under random limits on cpu0 and PoCL, some killed, some with allocation failures injected, and
# loom-run interrupted while it writes, for SOAK_SECONDS (at most 600); checks limits, results,
# leftovers and leaks, in a build with the sanitizers (LeakSanitizer checks every process).
SOAK_SECONDS ?= 600
SOAK_ENV = POCL_DEVICES=pthread POCL_MEMORY_LIMIT=1 POCL_CACHE_DIR=$(abspath $(BUILD))/test-cache/pocl \
  LOOM_CACHE_DIR=$(abspath $(BUILD))/test-cache/loom LOOM_MEM_LIMIT= LOOM_STAGE_HISTORY=0 OMP_NUM_THREADS=2 \
  ASAN_OPTIONS=new_delete_type_mismatch=0 \
  LSAN_OPTIONS=suppressions=$(abspath tests/lsan.supp):print_suppressions=0
soak: deps
	@test $(SOAK_SECONDS) -ge 1 -a $(SOAK_SECONDS) -le 600 || { echo "SOAK_SECONDS: 1 to 600"; exit 2; }
	cmake -S . -B $(BUILD)-soak -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLOOM_SANITIZE=ON $(CMAKE_ARGS)
	cmake --build $(BUILD)-soak -j $(JOBS) --target loom_soak loom-run
	rm -rf $(BUILD)-soak/soak-work
	$(SOAK_ENV) timeout $$(( $(SOAK_SECONDS) + 60 )) $(BUILD)-soak/tests/soak/loom_soak \
	  --seconds $(SOAK_SECONDS) --tool $(BUILD)-soak/loom-run --dir $(BUILD)-soak/soak-work

# Rewrites every C source and header to follow .clang-format (ctest's `format` checks it).
format:
	scripts/check-format.sh --fix

clean:
	rm -rf $(BUILD) $(BUILD)-sanitize $(BUILD)-clang $(BUILD)-tsan $(BUILD)-fuzz $(BUILD)-soak
