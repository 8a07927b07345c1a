# SPDX-License-Identifier: BSD-3-Clause
# Thin front end over CMake. `make demo` is the main job, `make test` the tests.
# Both install what they need on a fresh Debian 12 machine (scripts/setup.sh).
BUILD      ?= build
JOBS       ?= $(shell nproc)
CMAKE_ARGS ?=
PREFIX     ?= /usr/local
DESTDIR    ?=

.PHONY: all setup build dist demo peer-root test test-release test-asan test-tsan peer-tests fabtests compare install deb clean

all: build

setup:
	bash scripts/setup.sh

build: setup
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_ARGS) >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

# The main job: build weft (and the UCP and RSM libraries the README uses
# next; the build's output goes to $(BUILD)/demo-build.log), show it answering
# a real libfabric client, run weft-perf on shm, then weft beside Debian's
# libfabric (scripts/demo.sh).
demo: setup
	CMAKE_ARGS="$(CMAKE_ARGS)" bash scripts/demo.sh $(BUILD) $(JOBS)

# Every test, three times: a release build, AddressSanitizer+UBSan, ThreadSanitizer.
# The Debian 13 root that the peer.trixie_* tests use is made in the
# background meanwhile (once per machine; mostly downloads and unpacking, so
# it overlaps the builds; the tests wait for it).
test: setup peer-root test-release test-asan test-tsan

peer-root:
	@mkdir -p $${WEFT_PEER_CACHE:-/var/cache/weft-peer}
	@nohup bash tests/peer/trixie_root.sh make >$${WEFT_PEER_CACHE:-/var/cache/weft-peer}/trixie-root.make.log 2>&1 &

test-release: setup
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_ARGS) >/dev/null
	cmake --build $(BUILD) -j $(JOBS)
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

test-asan: setup
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DWEFT_SANITIZE=address,undefined >/dev/null
	cmake --build build-asan -j $(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -j $(JOBS) -E 'compat\.(fi_info_real|fi_info_v2|trixie_clients|weft_perf_smoke|fi_pingpong_shm|fi_pingpong_tcp|fi_pingpong_lnx|fi_pingpong_dgram|diagnostics|plugin)|netns\.fi_pingpong'

# ThreadSanitizer covers the parts that run threads: blocking reads woken by
# other threads, wait sets, counters, concurrent CQ writers. It builds the
# unit tests only (and the multi-process suites over the plugins, whose
# program is instrumented): the tests that load weft into Debian's programs
# and the fuzz corpus replay are left out.
test-tsan: setup
	cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DWEFT_SANITIZE=thread >/dev/null
	cmake --build build-tsan -j $(JOBS) --target weft_unit_tests weft_plugin_tests delay_link man
	cd build-tsan && TSAN_OPTIONS=halt_on_error=1 ctest --output-on-failure -j $(JOBS) -E 'compat\.|netns\.fi_pingpong|fuzz\.'

# The field's own test suites, whole, over weft and over the real libraries
# side by side (tests/peer): MPICH's test suite built with MPICH and with
# Open MPI, and libfabric 2.1's fabtests (make fabtests alone). `make test`
# runs their CI selection.
peer-tests: build
	bash tests/peer/mpich_testsuite.sh $(BUILD) "" full mpich; a=$$?; \
	bash tests/peer/mpich_testsuite.sh $(BUILD) "" full openmpi; b=$$?; \
	bash tests/peer/fabtests21.sh $(BUILD) . "" full; c=$$?; \
	[ $$a -eq 0 ] && [ $$b -eq 0 ] && [ $$c -eq 0 ]

# libfabric 2.1's fabtests, every set, shm, tcp and lnx, with and without
# libfabric's exclude lists, over weft and over Debian 13's libfabric in the
# Debian 13 root (tests/peer/fabtests21.sh; counts in docs/fabtests.md).
fabtests: build
	bash tests/peer/fabtests21.sh $(BUILD) . "" full

compare: build
	bash bench/compare.sh $(BUILD)

# What install and deb ship, and nothing else: the libraries, plugins, tools
# and man pages (the CMake target dist), no test program.
dist: setup
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_ARGS) >/dev/null
	cmake --build $(BUILD) -j $(JOBS) --target dist

# Install into PREFIX (DESTDIR honoured): the layout is in cmake/install_files.cmake.
install: dist
	DESTDIR="$(DESTDIR)" cmake --install $(BUILD) --prefix "$(PREFIX)"

# The Debian package, $(BUILD)/weft_<version>_<arch>.deb (scripts/deb.sh).
deb: dist
	bash scripts/deb.sh $(BUILD)

clean:
	rm -rf $(BUILD) build-asan build-tsan
