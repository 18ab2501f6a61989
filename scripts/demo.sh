#!/usr/bin/env bash
# `make demo`: the development provider (FranceConnect-like, http://127.0.0.1:8081/api/v2) and the
# relay (http://127.0.0.1:8080), both on embedded storage. Ctrl-C stops both.
set -euo pipefail
cd "$(dirname "$0")/.."
binary=.build/release/relais

# FranceConnect (8081), FranceConnect+ (8082, the step-up provider) and ProConnect (8083).
pids=()
for config in dev-provider dev-provider-fcplus dev-provider-proconnect; do
    "$binary" dev-provider --config "config/$config.yaml" &
    pids+=($!)
done
trap 'kill -TERM "${pids[@]}" 2>/dev/null || true; wait "${pids[@]}" 2>/dev/null || true' EXIT INT TERM

for port in 8081 8082 8083; do
    for _ in $(seq 1 100); do
        if curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1; then break; fi
        for pid in "${pids[@]}"; do
            if ! kill -0 "$pid" 2>/dev/null; then echo "a development provider did not start" >&2; exit 1; fi
        done
        sleep 0.1
    done
done

cat <<'TEXT'

  Development providers: FranceConnect v2 look-alike on http://127.0.0.1:8081/api/v2,
  FranceConnect+ look-alike (step-up, eidas2/eidas3) on http://127.0.0.1:8082/api/v2,
  ProConnect look-alike (agents, config/dev-identities-proconnect.yaml) on http://127.0.0.1:8083/api/v2
    discovery: http://127.0.0.1:8081/api/v2/.well-known/openid-configuration
    try a sign-in in a browser (client relais-local, test identities from config/dev-identities.yaml):
    http://127.0.0.1:8081/api/v2/authorize?response_type=code&client_id=relais-local&redirect_uri=http%3A%2F%2F127.0.0.1%3A8080%2Fcallback&scope=openid+profile+birth+email&state=demo-state&nonce=demo-nonce-0123456789abcdef&acr_values=eidas1
  Relais on http://127.0.0.1:8080 (health: /healthz, /readyz, /metrics)
    the demo app: http://127.0.0.1:8080/demo/   a desktop signing in with the phone: http://127.0.0.1:8080/demo/desktop

TEXT
RELAIS_STORE_KIND=embedded "$binary" serve --config config/relais.example.yaml
