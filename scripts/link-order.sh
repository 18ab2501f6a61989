#!/usr/bin/env bash
# Regenerates docker/relais.order.gz: the functions of the image's build (static Swift runtime)
# that a relay runs, in the order it first runs them, for the linker (lld --symbol-ordering-file).
#
# Why: the kernel maps a binary's code in windows of 64 KB around each page a process touches
# (fault-around), so code run at start-up and per request, scattered over the 35 MB of text of a
# static build, kept about 20 MB of it resident. Laid out together it takes a few MB (make bench,
# "Resident memory"). A function missing from the list (renamed, new) only sits elsewhere, so a
# stale list costs memory, never correctness; make bench says how much of it the build still has.
#
# How: the static build runs under valgrind's callgrind (every function executed, not a sample)
# through start-up, sign-ins against the development provider, and the resource endpoints.
# Needs valgrind, redis-server, wrk and python3. Takes a few minutes. Usage: make link-order
set -euo pipefail
cd "$(dirname "$0")/.."

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
wait_for() { for _ in $(seq 1 600); do curl -fs "$1" >/dev/null 2>&1 && return 0; sleep 0.2; done; echo "timed out waiting for $1" >&2; return 1; }

command -v valgrind >/dev/null || { echo "link-order: valgrind is needed (apt-get install valgrind)" >&2; exit 1; }
echo "Building the image's binary and the tools..."
swift build -c release --product relais --static-swift-stdlib --scratch-path .build-static >/dev/null
swift build -c release --product relais >/dev/null
swift build -c release --product relais-bench >/dev/null

work=$(mktemp -d)
cleanup() {
    for pid in ${relais_pid:-} ${provider_pid:-} ${redis_pid:-}; do kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

# valgrind 3.19 (Debian 12) cannot read the DWARF 5 the toolchain writes: symbols are enough.
binary="$work/relais"
cp "$(swift build -c release --static-swift-stdlib --scratch-path .build-static --show-bin-path)/relais" "$binary"
strip --strip-debug "$binary"

redis_port=$(free_port)
relais_port=$(free_port)
provider_port=$(free_port)
redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no --loglevel warning >"$work/redis.log" 2>&1 &
redis_pid=$!
cat >"$work/provider.yaml" <<YAML
server: {environment: development, port: $provider_port}
log: {level: warning}
provider: {identities_file: $PWD/config/dev-identities.yaml}
clients:
  relais:
    secret: link-order-provider-secret-0123456789-0123456789
    redirect_uris: [http://127.0.0.1:$relais_port/callback]
YAML
cat >"$work/relais.yaml" <<YAML
server: {environment: development, port: $relais_port, public_base_url: "http://127.0.0.1:$relais_port"}
log: {level: warning}
store: {kind: redis, redis: {url: "redis://127.0.0.1:$redis_port"}}
rate_limit: {enabled: false}
providers:
  fc:
    preset: franceconnect-v2
    issuer: http://127.0.0.1:$provider_port/api/v2
    client_id: relais
    client_secret: link-order-provider-secret-0123456789-0123456789
apps:
  bench-app:
    redirect_uris: [http://127.0.0.1/cb]
    scopes: [openid, profile, email]
resource_servers:
  bench-api:
    secret: link-order-introspection-secret
YAML
.build/release/relais dev-provider --config "$work/provider.yaml" >"$work/provider.log" 2>&1 &
provider_pid=$!
echo "Running a relay under callgrind (start-up, sign-ins, /auth, /userinfo, /introspect)..."
valgrind --tool=callgrind --callgrind-out-file="$work/callgrind.out" --dump-instr=no --compress-strings=no --compress-pos=no \
    --demangle=no "$binary" serve --config "$work/relais.yaml" >"$work/relais.log" 2>&1 &
relais_pid=$!
wait_for "http://127.0.0.1:$provider_port/readyz"
wait_for "http://127.0.0.1:$relais_port/readyz"
relay="http://127.0.0.1:$relais_port"
.build/release/relais-bench signin --relay "$relay" --seconds 20 --concurrency 2 >/dev/null
token=$(.build/release/relais-bench signin --relay "$relay" --print-tokens | awk -F= '$1=="access_token" {print $2}')
for _ in $(seq 1 20); do
    curl -s -o /dev/null "$relay/healthz"
    curl -s -o /dev/null -H "Authorization: Bearer $token" "$relay/auth?session=1"
    curl -s -o /dev/null -H "Authorization: Bearer $token" "$relay/userinfo"
    curl -s -o /dev/null -u bench-api:link-order-introspection-secret -d "token=$token" "$relay/introspect"
done
wrk -t1 -c8 -d5s -H "Authorization: Bearer $token" "$relay/auth?session=1" >/dev/null
# A graceful stop: callgrind writes its profile when the process exits.
kill -INT "$relais_pid"
wait "$relais_pid" || true
relais_pid=

python3 - "$work/callgrind.out" "$binary" "$work/relais.order" <<'PY'
import subprocess, sys
profile, binary, out = sys.argv[1:4]
defined = set(subprocess.run(["nm", "--defined-only", binary], capture_output=True, text=True, check=True).stdout.split())
names, seen, in_binary = [], set(), False
for line in open(profile, errors="replace"):
    if line.startswith("ob="):
        in_binary = line.strip() == "ob=" + binary
    elif line.startswith("fn=") and in_binary:
        name = line[3:].strip()
        if name in defined and name not in seen:
            seen.add(name)
            names.append(name)
if len(names) < 1000:
    sys.exit(f"link-order: only {len(names)} functions seen run: is the profile whole?")
open(out, "w").write("\n".join(names) + "\n")
print(f"{len(names)} functions")
PY
gzip -9n <"$work/relais.order" >docker/relais.order.gz
echo "Wrote docker/relais.order.gz"
