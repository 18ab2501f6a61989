#!/usr/bin/env bash
# Installs the PyPI packages the cross-checks use, when missing: joserfc (JOSE checks) and requests
# (the development provider check); with the argument `e2e`, also selenium (browser journeys),
# authlib (a standard OAuth client), openapi-spec-validator and schemathesis (the API description),
# oidc-provider-mock (a third-party OpenID Provider), zxing-cpp and pillow (reading Relais' QR codes back),
# opentelemetry-proto (decoding the spans Relais exports over OTLP/HTTP), axe-playwright-python (only for the
# axe.min.js it ships: axe-core, injected with Selenium by the accessibility test); with `bench`, only
# oidc-provider-mock (make bench's provider that closes its connections). Debian's own python3
# refuses plain pip installs (PEP 668); then the user site is used.
set -euo pipefail
wanted=("joserfc:joserfc>=1.6" "requests:requests>=2.28")
if [ "${1:-}" = "e2e" ]; then
    wanted+=("selenium:selenium>=4.10" "authlib:authlib>=1.3" "openapi_spec_validator:openapi-spec-validator>=0.7" "schemathesis:schemathesis>=4.0"
        "oidc_provider_mock:oidc-provider-mock>=0.3,<0.4" "zxingcpp:zxing-cpp>=2.2" "PIL:pillow>=10"
        "opentelemetry.proto:opentelemetry-proto>=1.20" "axe_playwright_python:axe-playwright-python>=0.1.8")
fi
if [ "${1:-}" = "bench" ]; then
    wanted+=("oidc_provider_mock:oidc-provider-mock>=0.3,<0.4")
fi
missing=()
for entry in "${wanted[@]}"; do
    python3 -c "import ${entry%%:*}" 2>/dev/null || missing+=("${entry#*:}")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "Installing from PyPI: ${missing[*]}"
python3 -m pip install --quiet "${missing[@]}" 2>/dev/null \
    || python3 -m pip install --quiet --user --break-system-packages "${missing[@]}"
for entry in "${wanted[@]}"; do python3 -c "import ${entry%%:*}"; done
