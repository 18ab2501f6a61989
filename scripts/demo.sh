#!/usr/bin/env bash
# `make demo`: three development providers (FranceConnect, FranceConnect+ and ProConnect look-alikes)
# and the relay (http://127.0.0.1:8080), all on embedded storage. Ctrl-C stops them all.
# The banner comes once everything answers, so each link it prints works when it is printed.
# DEMO_BINARY picks another build (the browser e2e runs this script with the debug binary); not
# RELAIS_*, which Relais reads as configuration.
set -euo pipefail
cd "$(dirname "$0")/.."
binary=${DEMO_BINARY:-.build/release/relais}

pids=()
trap 'kill -TERM "${pids[@]}" 2>/dev/null || true; wait "${pids[@]}" 2>/dev/null || true' EXIT INT TERM

# Waits until http://127.0.0.1:PORT/healthz answers, or says which process did not start.
await() {
    local port=$1 what=$2
    for _ in $(seq 1 300); do
        if curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1; then return 0; fi
        for pid in "${pids[@]}"; do
            if ! kill -0 "$pid" 2>/dev/null; then echo "$what did not start (is port $port free?)" >&2; exit 1; fi
        done
        sleep 0.1
    done
    echo "$what did not answer on port $port" >&2
    exit 1
}

# FranceConnect (8081), FranceConnect+ (8082, the step-up provider) and ProConnect (8083).
for config in dev-provider dev-provider-fcplus dev-provider-proconnect; do
    "$binary" dev-provider --config "config/$config.yaml" &
    pids+=($!)
done
for port in 8081 8082 8083; do await "$port" "a development provider"; done

RELAIS_STORE_KIND=embedded "$binary" serve --config config/relais.example.yaml &
relais=$!
pids+=("$relais")
await 8080 "Relais"

cat <<'TEXT'

  The demo app (a mobile app, played in the browser): open
    http://127.0.0.1:8080/demo/
  A desktop that signs in with the phone (a QR code, approved in the demo app or at /device):
    http://127.0.0.1:8080/demo/desktop

  Relais, on port 8080:
    discovery: http://127.0.0.1:8080/.well-known/openid-configuration
    health:    http://127.0.0.1:8080/healthz  http://127.0.0.1:8080/readyz  metrics: http://127.0.0.1:8080/metrics
  The development providers the demo's buttons lead to (test identities: config/dev-identities.yaml,
  agents: config/dev-identities-proconnect.yaml):
    FranceConnect look-alike:  http://127.0.0.1:8081/api/v2/.well-known/openid-configuration
    FranceConnect+ look-alike: http://127.0.0.1:8082/api/v2/.well-known/openid-configuration (step-up, eidas2/eidas3)
    ProConnect look-alike:     http://127.0.0.1:8083/api/v2/.well-known/openid-configuration

  Ctrl-C stops everything.

TEXT
wait "$relais"
