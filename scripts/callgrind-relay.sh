# Sourced by scripts/link-order.sh and scripts/instructions.sh: builds the image's binary (static
# Swift runtime) and the tools, and starts Redis, the development provider and a relay under
# valgrind's callgrind, which counts every instruction of every function run. Sets `work` (removed
# on exit), `relay` (its URL), `relais_pid` and `binary`; `$1` is callgrind's output file pattern
# inside $work, `$2` the name to print in errors. Needs valgrind, redis-server and python3.

callgrind_tool=$2
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
wait_for() { for _ in $(seq 1 600); do curl -fs "$1" >/dev/null 2>&1 && return 0; sleep 0.2; done; echo "timed out waiting for $1" >&2; return 1; }

command -v valgrind >/dev/null || { echo "$callgrind_tool: valgrind is needed (apt-get install valgrind)" >&2; exit 1; }
echo "Building the image's binary and the tools..." >&2
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
    secret: callgrind-provider-secret-0123456789-0123456789
    redirect_uris: [http://127.0.0.1:$relais_port/callback]
YAML
# As make bench's relay: a FranceConnect-like provider, sessions in Redis, security events on.
cat >"$work/relais.yaml" <<YAML
server: {environment: development, port: $relais_port, public_base_url: "http://127.0.0.1:$relais_port"}
log: {level: warning}
store: {kind: redis, redis: {url: "redis://127.0.0.1:$redis_port"}}
rate_limit: {enabled: false}
sessions: {max_per_subject: 10000}
providers:
  fc:
    preset: franceconnect-v2
    issuer: http://127.0.0.1:$provider_port/api/v2
    client_id: relais
    client_secret: callgrind-provider-secret-0123456789-0123456789
apps:
  bench-app:
    redirect_uris: [http://127.0.0.1/cb]
    scopes: [openid, profile, email]
    access_token_lifetime: 30m
resource_servers:
  bench-api:
    secret: callgrind-introspection-secret
YAML
.build/release/relais dev-provider --config "$work/provider.yaml" >"$work/provider.log" 2>&1 &
provider_pid=$!
echo "Running a relay under callgrind..." >&2
valgrind --tool=callgrind --callgrind-out-file="$work/$1" --dump-instr=no --compress-strings=no --compress-pos=no \
    --demangle=no "$binary" serve --config "$work/relais.yaml" >"$work/relais.log" 2>&1 &
relais_pid=$!
wait_for "http://127.0.0.1:$provider_port/readyz"
wait_for "http://127.0.0.1:$relais_port/readyz"
relay="http://127.0.0.1:$relais_port"
