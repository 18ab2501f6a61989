# Relais — the two commands that matter: `make demo` and `make test`.
SHELL := /bin/bash
SWIFT ?= swift
## SwiftPM passes swift-protobuf's two default traits to the compiler as defines in the order of a
## Swift Set, which changes from one process to the next: without a fixed hash seed, one build in
## two recompiles swift-protobuf and what depends on it (about 40 s in debug) for nothing. Only the
## builds get the fixed seed; tests and the programs they start keep random hashing.
SWIFT_BUILD := SWIFT_DETERMINISTIC_HASHING=1 $(SWIFT) build
DEBIAN_PACKAGES := libcurl4-openssl-dev libssl-dev libhiredis-dev libqrencode-dev redis-server pkg-config openssl python3 python3-pip curl
BENCH_PACKAGES := wrk nghttp2-client curl apache2 libapache2-mod-auth-openidc
E2E_PACKAGES := chromium chromium-driver fonts-liberation nginx-light

## `relais --version` names the commit: it travels in the ELF build id, "RL" (0x524c), the
## commit's 20 bytes, then 0x0000, or 0x2d44 ("-D") when the tree differs from the commit
## (Sources/relais/RelaisVersion.swift). Only the link reads it: a new commit relinks the binary,
## nothing else. Without git, or with a plain `swift build`, the commit reads "unknown".
RELAIS_COMMIT := $(shell git rev-parse --verify --quiet HEAD 2>/dev/null)
RELAIS_DIRTY := $(if $(RELAIS_COMMIT),$(shell git diff --quiet HEAD -- 2>/dev/null && echo 0000 || echo 2d44))
RELAIS_VERSION_FLAGS := $(if $(RELAIS_COMMIT),-Xlinker --build-id=0x524c$(RELAIS_COMMIT)$(RELAIS_DIRTY))

.PHONY: deps bench-deps e2e-deps build release test test-fast asan lint format e2e demo bench check-config clean image image-test link-order instructions

## The release binary `make demo` and `make release` build, rebuilt only when a source, the
## manifest, the pinned versions or the version flags changed: SwiftPM would otherwise plan the
## whole graph again, seconds for a build that changes nothing.
RELEASE_BINARY := .build/release/relais
RELEASE_INPUTS := Package.swift $(wildcard Package.resolved) $(shell find Sources -type f 2>/dev/null)
$(RELEASE_BINARY): $(RELEASE_INPUTS) .build/version-flags
	$(SWIFT_BUILD) -c release --product relais $(RELAIS_VERSION_FLAGS)
	@touch $@

## Rewritten only when the flags differ from the last build's: a new commit relinks, nothing else.
.build/version-flags: FORCE
	@mkdir -p .build
	@echo '$(RELAIS_VERSION_FLAGS)' | cmp -s - $@ || echo '$(RELAIS_VERSION_FLAGS)' > $@

FORCE:

## Install the Debian packages Relais builds and tests with, only those missing; and joserfc and
## requests (PyPI), the independent client the cross-check tests compare against.
deps:
	@scripts/ensure-debian-packages.sh $(DEBIAN_PACKAGES)
	@scripts/ensure-python-packages.sh

e2e-deps: deps
	@scripts/ensure-debian-packages.sh $(E2E_PACKAGES)
	@scripts/ensure-python-packages.sh e2e

bench-deps: deps
	@scripts/ensure-debian-packages.sh $(BENCH_PACKAGES)
	@scripts/ensure-python-packages.sh bench

build: deps
	$(SWIFT_BUILD)

release: deps $(RELEASE_BINARY)

## Build and run every test. Tests start their own redis-server processes on free loopback ports.
test: deps
	$(SWIFT_BUILD) --build-tests
	$(SWIFT) test --skip-build

## Only the tests that need no process, no Redis and no socket: pure code, and routes through the
## router test framework; under a minute once built (docs/testing.md). They carry the `.fast` tag
## (Tests/RelaisTestSupport/FastTests.swift), which scripts/fast-tests.py turns into a --filter
## (SwiftPM cannot filter by tag); with RELAIS_TEST_FAST=1 every test helper that would start a
## process, a server or a listener throws, so a test tagged fast by mistake fails here.
test-fast: deps
	$(SWIFT_BUILD) --build-tests
	@filter="$$(scripts/fast-tests.py)" && RELAIS_TEST_FAST=1 $(SWIFT) test --skip-build --filter "$$filter"

## The whole suite built with AddressSanitizer (a build of its own in .build-asan, 11 to 13 minutes
## from nothing on 2 cores, the run about 2): a use after free, a double free or an overflow in our
## code or shims stops it with the sanitiser's report. The C libraries are not instrumented, but
## their frees go through the sanitiser's allocator. Leaks are not reported (process-lifetime
## caches). Not in CI (its build would double CI's time); run it after touching unsafe code.
asan: deps
	$(SWIFT_BUILD) --build-tests --sanitize=address --scratch-path .build-asan
	ASAN_OPTIONS=detect_leaks=0:halt_on_error=1 $(SWIFT) test --skip-build --sanitize=address --scratch-path .build-asan

## The code's layout as .swift-format describes it (today's style: 4 spaces, 180 columns), checked
## with the toolchain's swift-format; `make format` rewrites the files to it.
lint:
	$(SWIFT) format lint --strict --recursive --parallel Sources Tests

format:
	$(SWIFT) format format --in-place --recursive --parallel Sources Tests

## End-to-end checks with software nobody here wrote: real Chromium (Selenium), Authlib as a
## standard OAuth client, oidc-provider-mock as a third-party upstream provider, Debian's nginx
## with auth_request, schemathesis on docs/openapi.yaml.
## Screenshots and reports land in e2e/artifacts/.
e2e: e2e-deps
	$(SWIFT_BUILD) --product relais && $(SWIFT_BUILD) --product relais-app
	python3 -m unittest discover -s e2e -p 'test_*.py' -v

## Run the development provider (http://127.0.0.1:8081/api/v2) and Relais (http://127.0.0.1:8080),
## both on embedded storage; Ctrl-C stops both.
demo: deps $(RELEASE_BINARY)
	scripts/demo.sh

## Throughput benchmarks (release build, wrk, real redis-server), with Apache + mod_auth_openidc side
## by side on the same provider; writes bench/results.md.
bench: bench-deps
	scripts/bench.sh

## Regenerates docker/relais.order.gz, the layout of the image's code (valgrind; a few minutes):
## after changes that rename many functions, when make bench finds few of its functions in the build.
link-order: bench-deps
	@scripts/ensure-debian-packages.sh valgrind
	scripts/link-order.sh

## Instructions per sign-in and per request (callgrind, the image's build; about three minutes):
## the figure to compare two builds by, steady within half a percent where CPU time moves by 10%.
instructions: bench-deps
	@scripts/ensure-debian-packages.sh valgrind
	scripts/instructions.sh

## The container image (docker/Dockerfile) with podman, at most 150 MB, non-root, read-only root.
## IMAGE_BASE=local (default) builds FROM a Debian base made here with debootstrap and the host's
## Swift toolchain; IMAGE_BASE=public FROM debian:bookworm-slim and swift:6.3-bookworm.
IMAGE ?= localhost/relais:latest
IMAGE_BASE ?= local
image:
	IMAGE=$(IMAGE) IMAGE_BASE=$(IMAGE_BASE) SWIFT=$(SWIFT) scripts/image-build.sh

## Runs the image with podman: Redis (AOF) and the development provider in containers, a sign-in
## through it, the session across restarts, check-config, non-root, read-only, HEALTHCHECK, and
## docker/compose.yaml with podman-compose (e2e/image/test_image.py); the compose demo
## (docker/compose.demo.yaml) walked in Chromium by the e2e journeys (e2e/image/test_compose_demo.py).
image-test: image e2e-deps
	IMAGE=$(IMAGE) IMAGE_BASE=$(IMAGE_BASE) scripts/image-test.sh

check-config: build
	.build/debug/relais check-config config/relais.example.yaml

clean:
	rm -rf .build
