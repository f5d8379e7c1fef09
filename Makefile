# Thin wrapper over CMake. `make demo` and `make test` work on a fresh Debian 12
# machine: both install the missing packages they need first
# (scripts/install-deps TARGET: each target installs only its own).
BUILD      ?= build
TEST_BUILD ?= build-test
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 20
JOBS       ?= $(shell nproc)
SHARED     ?= ../shared

.PHONY: all deps build test unit fuzz demo bench clean install deb

all: build

deps:
	scripts/install-deps all

build:
	scripts/install-deps build
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DTS_TESTS=OFF >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

# Each fuzz target for a short, bounded time, tesserad and the agent under
# ThreadSanitizer through their end-to-end suites, then the unit tests under
# ASan+UBSan through CTest (last, so its summary closes the output).
test: deps-test fuzz tsan unit

.PHONY: deps-test
deps-test:
	scripts/install-deps test

PG_TESTS ?= ^(store/.*|ctld/(api|array_lazy|privacy|faults|faults_sweep))$$
unit:
	cmake -S . -B $(TEST_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DTS_SANITIZE=ON >/dev/null
	cmake --build $(TEST_BUILD) -j $(JOBS)
	cd $(TEST_BUILD) && ctest --output-on-failure -j $(JOBS)
	# the tests that read TS_TEST_PG_URL once more, against a throwaway
	# PostgreSQL on loopback (stopped whatever the result); the other ctld
	# tests would only run again on SQLite (ctld/ha starts its own server);
	# one at a time: several of them share the one database
	pg=$$(mktemp -d /tmp/tessera-pg.XXXXXX) && url=$$(scripts/pg-test-server start $$pg) && \
	  (cd $(TEST_BUILD) && TS_TEST_PG_URL=$$url ctest --output-on-failure -R '$(PG_TESTS)'); \
	  rc=$$?; scripts/pg-test-server stop $$pg; exit $$rc

fuzz:
	CC=clang cmake -S . -B $(FUZZ_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DTS_FUZZ=ON \
	  -DTS_SANITIZE=ON -DTS_TESTS=OFF >/dev/null
	cmake --build $(FUZZ_BUILD) -j $(JOBS)
	scripts/run-fuzz $(FUZZ_BUILD) $(FUZZ_SECONDS)

# tesserad and tessera-agent under ThreadSanitizer, through the API and agent
# end-to-end tests; a reported race stops tesserad (halt_on_error), which
# fails its test.
TSAN_BUILD ?= build-tsan
TSAN_TESTS ?= ^(ctld/(api|agent_protocol|agent_locks|agent_races|dependency|faults|ha|reads)|agent/e2e|agent/e2e_resilience)$$
.PHONY: tsan
tsan: deps-test
	cmake -S . -B $(TSAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DTS_TSAN=ON >/dev/null
	cmake --build $(TSAN_BUILD) -j $(JOBS) --target tesserad tessera-agent fake_nvml
	cd $(TSAN_BUILD) && TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
	  ctest --output-on-failure -R '$(TSAN_TESTS)'

demo:
	scripts/install-deps demo
	$(MAKE) build
	scripts/demo $(BUILD)
	scripts/demo-controller $(BUILD)
	scripts/demo-cluster $(BUILD)

bench: build
	bench/run-all $(BUILD) $(SHARED)

# Installs under PREFIX (default /usr/local), staged under DESTDIR if given:
#   make install PREFIX=/usr DESTDIR=/tmp/stage   (docs/install.md)
PREFIX ?= /usr/local
install: build
	cmake -S . -B $(BUILD) -DCMAKE_INSTALL_PREFIX=$(PREFIX) >/dev/null
	DESTDIR=$(DESTDIR) cmake --install $(BUILD)

# The Debian packages (tessera-controller, tessera-agent, tessera-client,
# libtessera-cuda) into build-deb/, then lintian on them.
deb:
	scripts/install-deps deb
	dpkg-checkbuilddeps
	DEB_BUILD_OPTIONS="parallel=$(JOBS)" debian/rules binary
	lintian --fail-on error build-deb/*.deb

clean:
	rm -rf $(BUILD) $(TEST_BUILD) $(FUZZ_BUILD)
