# Sourced by scripts/bench.sh: Apache + mod_auth_openidc (Debian's packages) as the relying party of
# the same development provider, its sessions in a Redis of its own, so that `make bench` measures
# the anchor issue 15 compares Relais with in the same run, on the same machine.
#
# anchor_start APACHE_PORT REDIS_PORT ISSUER CLIENT_ID CLIENT_SECRET [generic]: writes the
# configuration to a folder of its own (anchor_dir), starts both; sets anchor_apache_pid (the parent
# process) and anchor_redis_pid. anchor_stop ends both and removes the folder. Without `generic`,
# the module is set up as for FranceConnect (ES256 id_token and signed userinfo, acr_values,
# client_secret_post); with it, as for a plain OpenID provider (its defaults: RS256, JSON
# userinfo, client_secret_basic).

anchor_start() {
    local port=$1 redis_port=$2 issuer=$3 client_id=$4 client_secret=$5 profile=${6:-franceconnect}
    local provider_lines='OIDCProviderTokenEndpointAuth client_secret_post
OIDCAuthRequestParams acr_values=eidas1
OIDCIDTokenSignedResponseAlg ES256
OIDCUserInfoSignedResponseAlg ES256'
    [ "$profile" = generic ] && provider_lines='OIDCProviderTokenEndpointAuth client_secret_basic'
    # Apache's children run as www-data when it starts as root: they must read the pages, so the
    # folder is not the caller's private one.
    anchor_dir=$(mktemp -d)
    local dir=$anchor_dir
    mkdir -p "$dir/htdocs/protected"
    echo "signed in" >"$dir/htdocs/protected/index.html"
    chmod 755 "$dir" "$dir/htdocs" "$dir/htdocs/protected"
    local user_lines=""
    [ "$(id -u)" -eq 0 ] && user_lines=$'User www-data\nGroup www-data'
    cat >"$dir/httpd.conf" <<CONF
ServerName 127.0.0.1
Listen 127.0.0.1:$port
PidFile $dir/httpd.pid
ErrorLog $dir/error.log
LogLevel warn
$user_lines
LoadModule mpm_event_module /usr/lib/apache2/modules/mod_mpm_event.so
LoadModule authn_core_module /usr/lib/apache2/modules/mod_authn_core.so
LoadModule authz_core_module /usr/lib/apache2/modules/mod_authz_core.so
LoadModule authz_user_module /usr/lib/apache2/modules/mod_authz_user.so
LoadModule dir_module /usr/lib/apache2/modules/mod_dir.so
LoadModule auth_openidc_module /usr/lib/apache2/modules/mod_auth_openidc.so
# Debian's mpm_event settings.
StartServers 2
MinSpareThreads 25
MaxSpareThreads 75
ThreadsPerChild 25
MaxRequestWorkers 150
DocumentRoot $dir/htdocs
DirectoryIndex index.html

OIDCProviderMetadataURL $issuer/.well-known/openid-configuration
OIDCClientID $client_id
OIDCClientSecret $client_secret
$provider_lines
OIDCRedirectURI http://127.0.0.1:$port/protected/redirect_uri
OIDCCryptoPassphrase bench-anchor-passphrase-0123456789
OIDCScope "openid profile email"
OIDCSSLValidateServer Off
# Sessions in Redis, as Relais keeps them.
OIDCSessionType server-cache
OIDCCacheType redis
OIDCRedisCacheServer 127.0.0.1:$redis_port

<Location /protected>
    AuthType openid-connect
    Require valid-user
</Location>
CONF
    redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no --loglevel warning >"$dir/redis.log" 2>&1 &
    anchor_redis_pid=$!
    /usr/sbin/apache2 -f "$dir/httpd.conf" -DFOREGROUND >"$dir/apache.out" 2>&1 &
    anchor_apache_pid=$!
    for _ in $(seq 1 100); do
        curl -s -o /dev/null "http://127.0.0.1:$port/" && return 0
        sleep 0.1
    done
    echo "Apache + mod_auth_openidc did not start:" >&2
    cat "$dir/apache.out" "$dir/error.log" >&2 || true
    return 1
}

# A number summed over Apache's processes: an awk program reads /proc/PID/FILE of the parent, another
# that of each live child. A child reaped since pgrep listed it has no file left, and adds 0.
anchor_sum() {  # FILE PARENT_PROGRAM CHILD_PROGRAM
    local total
    total=$(awk "$2" "/proc/$anchor_apache_pid/$1")
    for child in $(pgrep -P "$anchor_apache_pid"); do
        total=$((total + $(awk "$3" "/proc/$child/$1" 2>/dev/null || echo 0)))
    done
    echo "$total"
}

# CPU ticks (utime + stime) of Apache: the parent, its live children, and the children it has
# reaped (cutime + cstime), so that a child ended by the MPM between two readings still counts
# (a child reaped between pgrep and its reading is missed once: one child's time at most).
anchor_cpu_ticks() { anchor_sum stat '{print $14 + $15 + $16 + $17}' '{v = $14 + $15} END {print v + 0}'; }

# Resident memory of Apache, all its processes, in KiB (a zombie child has no VmRSS line).
anchor_rss_kib() { anchor_sum status '/^VmRSS:/ {v = $2} END {print v + 0}' '/^VmRSS:/ {v = $2} END {print v + 0}'; }

anchor_stop() {
    [ -n "${anchor_apache_pid:-}" ] && kill "$anchor_apache_pid" 2>/dev/null && wait "$anchor_apache_pid" 2>/dev/null || true
    [ -n "${anchor_redis_pid:-}" ] && kill "$anchor_redis_pid" 2>/dev/null && wait "$anchor_redis_pid" 2>/dev/null || true
    anchor_apache_pid=""
    anchor_redis_pid=""
    [ -n "${anchor_dir:-}" ] && rm -rf "$anchor_dir"
    anchor_dir=""
}
