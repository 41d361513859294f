# Convenience front end over CMake. `make demo` and `make test` install what is missing first.
BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=
# extra ctest arguments of test, asan and clang (e.g. CTEST_ARGS='-LE slow' skips the slow tests)
CTEST_ARGS ?=

.PHONY: all setup configure build demo test asan clang fuzz bench install clean

all: build

setup:
	@bash scripts/setup.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)

configure: $(BUILD)/CMakeCache.txt

build: configure
	cmake --build $(BUILD) -j $(JOBS)

demo: setup
	@$(MAKE) --no-print-directory build
	bash scripts/demo.sh $(BUILD)

test:
	@bash scripts/setup.sh --test
	@$(MAKE) --no-print-directory build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) $(CTEST_ARGS)

# The same tests under AddressSanitizer and UndefinedBehaviorSanitizer.
asan:
	@bash scripts/setup.sh --test
	@$(MAKE) --no-print-directory BUILD=build-asan CMAKE_FLAGS="-DTSC_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug $(CMAKE_FLAGS)" build
	cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j $(JOBS) $(CTEST_ARGS)

# The same tests built with clang (a second compiler's warnings and code generation).
clang:
	@bash scripts/setup.sh --test
	@command -v clang >/dev/null || bash scripts/setup.sh --ci
	@$(MAKE) --no-print-directory BUILD=build-clang CMAKE_FLAGS="-DCMAKE_C_COMPILER=clang $(CMAKE_FLAGS)" build
	cd build-clang && ctest --output-on-failure -j $(JOBS) $(CTEST_ARGS)

# libFuzzer on the readers of untrusted input (clang), FUZZ_SECONDS per target (docs/FUZZING.md).
FUZZ_SECONDS ?= 10
fuzz:
	bash scripts/fuzz.sh $(FUZZ_SECONDS)

bench:
	@bash scripts/setup.sh --bench
	@$(MAKE) --no-print-directory build
	bash bench/run_all.sh $(BUILD)

install: build
	cmake --install $(BUILD)

clean:
	rm -rf $(BUILD) build-asan build-clang build-fuzz
