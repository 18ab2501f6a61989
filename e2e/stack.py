"""The parts of an end-to-end run, started for real on loopback: redis-server, the development
provider and Relais (the debug binary that `make e2e` builds), each on a free port, stopped after.
"""
import base64
import http.server
import json
import threading
import hashlib
import os
import random
import re
import secrets
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from urllib.parse import parse_qs, urlencode, urlsplit

import requests

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BINARY = os.path.join(ROOT, ".build", "debug", "relais")
ARTIFACTS = os.path.join(ROOT, "e2e", "artifacts")
PROVIDER_SECRET = "e2e-provider-secret-0123456789-0123456789"


_handed_out = set()


def free_port():
    """A free port below the kernel's ephemeral range: a port from that range can be taken as the
    source port of an outgoing connection before the server that was meant to have it binds it."""
    with open("/proc/sys/net/ipv4/ip_local_port_range") as handle:
        first_ephemeral = int(handle.read().split()[0])
    for _ in range(200):
        port = random.randrange(10000, max(first_ephemeral, 10001))
        if port in _handed_out:
            continue
        _handed_out.add(port)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def free_cluster_port():
    """A free port for a Redis Cluster node whose cluster bus port (10,000 above it) is free too and
    handed out to no one else: a node whose bus port another process (or node) holds never starts."""
    for _ in range(200):
        port = free_port()
        bus = port + 10000
        if bus in _handed_out or bus > 65535:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", bus))
            except OSError:
                continue
        _handed_out.add(bus)
        return port
    raise RuntimeError("no free port pair for a Redis Cluster node")


def wait_for(url, process, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{url}: the process exited ({process.returncode})")
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"timed out waiting for {url}")


class Stack:
    """Redis, the development provider and one Relais, wired together."""

    def __init__(self, relay_extra="", providers_extra="", trusted_proxies=(), apps_extra="", fcplus=False, proconnect=False,
                 env=None, provider_trusted_proxies=()):
        self.directory = tempfile.mkdtemp(prefix="relais-e2e-")
        self.redis_port, self.provider_port, self.relay_port = free_port(), free_port(), free_port()
        # More development providers: FranceConnect+ (the step-up provider) and ProConnect.
        self.extra_providers = {mode: free_port() for mode, wanted in (("fcplus", fcplus), ("proconnect", proconnect)) if wanted}
        self.relay_extra = relay_extra
        self.trusted_proxies = list(trusted_proxies)
        self.providers_extra = providers_extra
        self.apps_extra = apps_extra
        # Extra environment for every Relais process (OTEL_* for the tracing test).
        self.env = {**os.environ, **(env or {})}
        self.provider_server = f"environment: development, trusted_proxies: [{', '.join(provider_trusted_proxies)}]"
        self.processes = {}
        self.logs = {}

    @property
    def relay(self):
        return f"http://127.0.0.1:{self.relay_port}"

    @property
    def provider_issuer(self):
        return f"http://127.0.0.1:{self.provider_port}/api/v2"

    def start(self):
        self.processes["redis"] = subprocess.Popen(
            ["redis-server", "--port", str(self.redis_port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._write("provider.yaml", f"""
server: {{{self.provider_server}, port: {self.provider_port}}}
log: {{level: warning}}
provider: {{identities_file: {ROOT}/config/dev-identities.yaml}}
clients:
  relais:
    secret: {PROVIDER_SECRET}
    redirect_uris: [{self.relay}/callback]
    post_logout_redirect_uris: [{self.relay}/logout/callback]
""")
        extra_providers = ""
        for mode, port in self.extra_providers.items():
            identities = "dev-identities-proconnect.yaml" if mode == "proconnect" else "dev-identities.yaml"
            # FranceConnect+ encrypts to the key Relais publishes (generated in development).
            keys = f"\n    jwks_uri: {self.relay}/jwks/provider.json" if mode == "fcplus" else ""
            self._write(f"provider-{mode}.yaml", f"""
server: {{{self.provider_server}, port: {port}}}
log: {{level: warning}}
provider: {{mode: {mode}, identities_file: {ROOT}/config/{identities}}}
clients:
  relais:
    secret: {PROVIDER_SECRET}
    redirect_uris: [{self.relay}/callback]
    post_logout_redirect_uris: [{self.relay}/logout/callback]{keys}
""")
            preset = "franceconnect-plus" if mode == "fcplus" else "proconnect"
            extra_providers += f"""
  {preset}:
    preset: {preset}
    issuer: http://127.0.0.1:{port}/api/v2
    client_id: relais
    client_secret: {PROVIDER_SECRET}
"""
        step_up = "\n    step_up_provider: franceconnect-plus" if "fcplus" in self.extra_providers else ""
        self._write("relais.yaml", f"""
server: {{environment: development, port: {self.relay_port}, public_base_url: "{self.relay}", trusted_proxies: [{", ".join(self.trusted_proxies)}]}}
log: {{level: warning}}
store: {{kind: redis, redis: {{url: "redis://127.0.0.1:{self.redis_port}"}}}}
providers:
  franceconnect:
    preset: franceconnect-v2
    issuer: {self.provider_issuer}
    client_id: relais
    client_secret: {PROVIDER_SECRET}{step_up}
{extra_providers}
{self.providers_extra}
apps:
  demo-app:
    redirect_uris: [{self.relay}/demo/callback]
    post_logout_redirect_uris: [{self.relay}/demo/]
    scopes: [openid, profile, birth, email, usual_name, uid, siret]
    attestation: allowed
  mobile-app:
    redirect_uris: ["com.example.app:/oauth2redirect"]
    post_logout_redirect_uris: ["com.example.app:/logged-out"]
    scopes: [openid, profile, email]
  standard-client:
    redirect_uris: ["http://127.0.0.1/cb"]
    post_logout_redirect_uris: ["http://127.0.0.1:54321/logged-out"]
    scopes: [openid, profile, email]
  short-lived:
    redirect_uris: ["http://127.0.0.1/cb"]
    access_token_lifetime: 1s
  desktop:
    redirect_uris: ["http://127.0.0.1/cb"]
    scopes: [openid, profile, email]
    device_grant: true
    device_approvers: [demo-app, standard-client]
{self.apps_extra}
{self.relay_extra}
""")
        self._launch("provider", ["dev-provider", "--config", os.path.join(self.directory, "provider.yaml")], self.provider_port)
        for mode, port in self.extra_providers.items():
            self._launch(f"provider-{mode}", ["dev-provider", "--config", os.path.join(self.directory, f"provider-{mode}.yaml")], port)
        self._launch("relay", ["serve", "--config", os.path.join(self.directory, "relais.yaml")], self.relay_port)
        return self

    def restart_relay(self):
        self._stop("relay")
        self._launch("relay", ["serve", "--config", os.path.join(self.directory, "relais.yaml")], self.relay_port)

    def stop(self):
        for name in list(self.processes):
            self._stop(name)

    def _write(self, name, text):
        with open(os.path.join(self.directory, name), "w") as handle:
            handle.write(text)

    def _launch(self, name, arguments, port):
        log = open(os.path.join(self.directory, f"{name}.log"), "a")
        self.logs[name] = log
        self.processes[name] = subprocess.Popen([BINARY] + arguments, stdout=log, stderr=subprocess.STDOUT, env=self.env)
        wait_for(f"http://127.0.0.1:{port}/readyz", self.processes[name])

    def _stop(self, name):
        process = self.processes.pop(name, None)
        if process and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        log = self.logs.pop(name, None)
        if log:
            log.close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def sign_in(stack, client_id, identity="angela", redirect_uri="http://127.0.0.1:54321/cb", token_headers=None, authorize_extra=None, raw=False,
            trail=None):
    """A whole sign-in without a browser (requests plays both the person and the app); the token response
    (or, with `raw`, the /token HTTP response itself). A `trail` dict receives every secret that went
    by: the verifier, the URLs of the provider's login page and of the callback, and the app's code."""
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    browser = requests.Session()
    page = browser.get(stack.relay + "/authorize?" + urlencode({
        "response_type": "code", "client_id": client_id, "redirect_uri": redirect_uri, "state": "s",
        "code_challenge": challenge, "code_challenge_method": "S256", **(authorize_extra or {}),
    }), timeout=10)
    action = re.search(r'action="([^"]+)"', page.text).group(1)
    to_relay = browser.post(requests.compat.urljoin(page.url, action), data={"identity": identity}, allow_redirects=False, timeout=10)
    to_app = browser.get(to_relay.headers["Location"], allow_redirects=False, timeout=10)
    code = parse_qs(urlsplit(to_app.headers["Location"]).query)["code"][0]
    if trail is not None:
        trail.update(verifier=verifier, provider_page=page.url, callback=to_relay.headers["Location"], code=code)
    response = requests.post(stack.relay + "/token", data={
        "grant_type": "authorization_code", "code": code, "redirect_uri": redirect_uri, "client_id": client_id, "code_verifier": verifier,
    }, headers=token_headers or {}, timeout=10)
    if raw:
        return response
    response.raise_for_status()
    return response.json()


def write_nginx_config(directory, http_body, worker_processes=1):
    """An nginx.conf in `directory` that keeps everything (pid, logs, temp files) inside it, with
    `http_body` (server and upstream blocks) in its http block; its path."""
    config = os.path.join(directory, "nginx.conf")
    with open(config, "w") as handle:
        handle.write(f"""
daemon off;
worker_processes {worker_processes};
pid {directory}/nginx.pid;
error_log {directory}/error.log warn;
events {{}}
http {{
    access_log off;
    client_body_temp_path {directory}/body;
    proxy_temp_path {directory}/proxy;
    fastcgi_temp_path {directory}/fastcgi;
    uwsgi_temp_path {directory}/uwsgi;
    scgi_temp_path {directory}/scgi;
{http_body}
}}
""")
    return config


class Nginx:
    """Debian's nginx running the shipped forward-auth recipe (config/nginx-forward-auth.conf) in
    front of an upstream, on a free port."""

    def __init__(self, relay, upstream_port, port=None):
        self.port = port or free_port()
        self.directory = tempfile.mkdtemp(prefix="relais-nginx-")
        with open(os.path.join(ROOT, "config", "nginx-forward-auth.conf")) as handle:
            server = (handle.read().replace("RELAIS_URL", relay)
                      .replace("UPSTREAM_URL", f"http://127.0.0.1:{upstream_port}").replace("LISTEN_PORT", str(self.port)))
        self.config = write_nginx_config(self.directory, server)
        self.process = None

    def start(self):
        self.process = subprocess.Popen(["/usr/sbin/nginx", "-p", self.directory, "-c", self.config], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                requests.get(f"http://127.0.0.1:{self.port}/", timeout=1)
                break
            except requests.ConnectionError:
                time.sleep(0.05)
        return self

    def stop(self):
        if self.process:
            self.process.terminate()
            self.process.wait(timeout=10)


def identity_headers():
    """The identity headers Relais answers at /auth, as its code names them (ForwardAuthSettings'
    defaults): a gateway recipe must set or clear each one on every location, so a header added
    there and forgotten in a recipe fails the recipe tests."""
    with open(os.path.join(ROOT, "Sources", "RelaisConfig", "RelayConfiguration.swift")) as handle:
        source = handle.read()
    settings = re.search(r"struct ForwardAuthSettings\b.*?\n}\n", source, re.S).group(0)
    names = re.findall(r'var \w+Header = "([^"]+)"', settings)
    if len(names) < 6:
        raise RuntimeError(f"ForwardAuthSettings names only {names}: has its shape changed?")
    return names


class EchoUpstream(http.server.BaseHTTPRequestHandler):
    """The API behind the gateway: answers every method with the X-Relais-* and Authorization
    headers it received, as JSON, and keeps them in `seen` (and, with the path and every header
    line as sent, repeated ones included, in `received`)."""
    seen = []
    received = []

    def do_GET(self):  # noqa: N802 - http.server's naming
        headers = {name.lower(): value for name, value in self.headers.items() if name.lower().startswith("x-relais") or name.lower() == "authorization"}
        EchoUpstream.seen.append(headers)
        EchoUpstream.received.append((self.path, list(self.headers.items())))
        body = json.dumps(headers).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    # The guarded API takes writes too; the upstream answers every method alike.
    do_POST = do_PUT = do_DELETE = do_PATCH = do_GET  # noqa: N815

    def log_message(self, *args):
        pass

    @staticmethod
    def start():
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), EchoUpstream)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server


class RedisCluster:
    """A real Redis Cluster on loopback: `masters` redis-servers with `replicas` each, joined by
    `redis-cli --cluster create`, quick to notice a failed node (1 s)."""

    def __init__(self, masters=3, replicas=1, extra_arguments=()):
        self.masters, self.replicas = masters, replicas
        self.directory = tempfile.mkdtemp(prefix="relais-cluster-")
        self.ports = [free_cluster_port() for _ in range(masters * (1 + replicas))]
        # More redis-server arguments, after the defaults (a later --appendonly yes wins).
        self.extra_arguments = list(extra_arguments)
        self.processes = []

    @property
    def nodes(self):
        return [f"127.0.0.1:{port}" for port in self.ports]

    def start(self):
        for port in self.ports:
            os.makedirs(os.path.join(self.directory, str(port)))
            self.processes.append(self._spawn(port))
        for port in self.ports:
            self._wait(lambda: self.cli(port, "ping") == "PONG", f"redis-server on {port}")
        created = subprocess.run(["redis-cli", "--cluster", "create", *self.nodes, "--cluster-replicas", str(self.replicas), "--cluster-yes"],
                                 capture_output=True, text=True, timeout=60)
        if created.returncode != 0:
            raise RuntimeError(f"redis-cli --cluster create: {created.stdout}{created.stderr}")
        self._wait(self._healthy, "a healthy cluster", timeout=30)
        return self

    def _spawn(self, port):
        """redis-server for `port`, in its own directory (nodes.conf, and the AOF with appendonly)."""
        return subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", os.path.join(self.directory, str(port)), "--save", "",
             "--appendonly", "no", "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "1000",
             "--repl-diskless-sync-delay", "0", "--cluster-replica-validity-factor", "0", *self.extra_arguments],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def kill(self, port):
        """SIGKILL: no shutdown, no final AOF fsync beyond what the fsync policy already did."""
        process = self.processes[self.ports.index(port)]
        process.kill()
        process.wait()

    def restart(self, port):
        """The node again on its port, from its own files (as a supervisor would restart it)."""
        self.processes[self.ports.index(port)] = self._spawn(port)

    def role(self, port):
        """master, slave (with its link up), or None (down, or a replica still syncing)."""
        info = self.cli(port, "info", "replication") or ""
        if "role:master" in info:
            return "master"
        return "slave" if "master_link_status:up" in info else None

    def master_ports(self):
        return [port for port in self.ports if self.role(port) == "master"]

    def cli(self, port, *arguments):
        result = subprocess.run(["redis-cli", "-p", str(port), *arguments], capture_output=True, text=True, timeout=10)
        return result.stdout.strip() if result.returncode == 0 else None

    def _healthy(self):
        masters = synced = 0
        for port in self.ports:
            info = self.cli(port, "info", "replication") or ""
            if "role:master" in info:
                if "cluster_state:ok" not in (self.cli(port, "cluster", "info") or ""):
                    return False
                masters += 1
            elif "master_link_status:up" in info:
                synced += 1
        return masters == self.masters and synced == self.masters * self.replicas

    @staticmethod
    def _wait(condition, what, timeout=10):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if condition():
                return
            time.sleep(0.1)
        raise RuntimeError(f"timed out waiting for {what}")

    def stop(self):
        for process in self.processes:
            if process.poll() is None:
                process.kill()
                process.wait()
