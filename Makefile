# Relais — the two commands that matter: `make demo` and `make test`.
SHELL := /bin/bash
SWIFT ?= swift
DEBIAN_PACKAGES := libcurl4-openssl-dev libssl-dev libhiredis-dev redis-server pkg-config openssl python3 python3-pip curl
BENCH_PACKAGES := wrk curl

.PHONY: deps bench-deps build release test demo bench check-config clean

## Install the Debian packages Relais builds and tests with, only those missing; and joserfc and
## requests (PyPI), the independent client the cross-check tests compare against.
deps:
	@scripts/ensure-debian-packages.sh $(DEBIAN_PACKAGES)
	@scripts/ensure-python-packages.sh

bench-deps: deps
	@scripts/ensure-debian-packages.sh $(BENCH_PACKAGES)

build: deps
	$(SWIFT) build

release: deps
	$(SWIFT) build -c release --product relais

## Build and run every test. Tests start their own redis-server processes on free loopback ports.
test: deps
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build

## Run the development provider (http://127.0.0.1:8081/api/v2) and Relais (http://127.0.0.1:8080),
## both on embedded storage; Ctrl-C stops both.
demo: deps
	$(SWIFT) build -c release --product relais
	scripts/demo.sh

## Throughput benchmarks (release build, wrk, real redis-server); writes bench/results.md.
bench: bench-deps
	scripts/bench.sh

check-config: build
	.build/debug/relais check-config config/relais.example.yaml

clean:
	rm -rf .build
