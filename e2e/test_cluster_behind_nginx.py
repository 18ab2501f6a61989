"""Three Relais instances behind Debian's nginx (round-robin) on one real Redis Cluster (3 masters,
3 replicas): every sign-in crosses instances, and one instance is killed in the middle of a run of
concurrent sign-ins. Only the sign-ins with a step in flight on it may fail; the others, and every
sign-in after it, succeed."""
import base64
import hashlib
import os
import re
import secrets
import signal
import subprocess
import tempfile
import threading
import time
import unittest
from urllib.parse import parse_qs, urlencode, urljoin, urlsplit

import requests

from stack import BINARY, PROVIDER_SECRET, ROOT, RedisCluster, free_port, wait_for, write_nginx_config

INSTANCES = 3


class LoadBalancer:
    """nginx, one worker, round-robin over the instances. A connection refused by a dead instance is
    passed to the next one (nginx's default `proxy_next_upstream error timeout`, which never resends
    a POST that reached an upstream). `X-Upstream` tells the test which instance answered."""

    def __init__(self, port, upstreams):
        self.port = port
        self.directory = tempfile.mkdtemp(prefix="relais-lb-")
        servers = "\n".join(f"        server 127.0.0.1:{upstream} max_fails=1 fail_timeout=30s;" for upstream in upstreams)
        self.config = write_nginx_config(self.directory, f"""
    upstream relais {{
{servers}
        keepalive 16;
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://relais;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $http_host;
            proxy_set_header X-Forwarded-For $remote_addr;
            proxy_connect_timeout 1s;
            add_header X-Upstream $upstream_addr always;
        }}
    }}
""")
        self.process = None

    def start(self):
        self.process = subprocess.Popen(["/usr/sbin/nginx", "-p", self.directory, "-c", self.config],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(f"http://127.0.0.1:{self.port}/healthz", self.process)
        return self

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)


class Failure(Exception):
    def __init__(self, step, response):
        super().__init__(f"{step}: {response.status_code} from {tried_ports(response)}")
        self.step, self.status, self.tried = step, response.status_code, tried_ports(response)


def tried_ports(response):
    """The ports of the instances nginx tried for this request, in order (it lists each one)."""
    return [int(address.rsplit(":", 1)[1]) for address in response.headers.get("X-Upstream", "").replace(",", " ").split() if ":" in address]


def upstream_port(response):
    """The port of the instance that finally answered."""
    tried = tried_ports(response)
    return tried[-1] if tried else None


class ClusterBehindNginx(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cluster = RedisCluster().start()
        cls.gateway_port, cls.provider_port = free_port(), free_port()
        cls.relay_ports = [free_port() for _ in range(INSTANCES)]
        cls.gateway = f"http://127.0.0.1:{cls.gateway_port}"
        cls.directory = tempfile.mkdtemp(prefix="relais-e2e-cluster-")
        cls.processes, cls.logs = {}, []
        cls._write("provider.yaml", f"""
server: {{environment: development, port: {cls.provider_port}}}
log: {{level: warning}}
provider: {{identities_file: {ROOT}/config/dev-identities.yaml}}
clients:
  relais:
    secret: {PROVIDER_SECRET}
    redirect_uris: [{cls.gateway}/callback]
""")
        cls._launch("provider", ["dev-provider", "--config", os.path.join(cls.directory, "provider.yaml")], cls.provider_port)
        nodes = ", ".join(cls.cluster.nodes)
        for port in cls.relay_ports:
            # One public URL for all (the gateway's); development keys live in the shared store.
            cls._write(f"relais-{port}.yaml", f"""
server: {{environment: development, port: {port}, public_base_url: "{cls.gateway}", trusted_proxies: [127.0.0.1/32]}}
log: {{level: warning}}
store: {{kind: redis, redis: {{url: "redis://127.0.0.1", cluster: [{nodes}], command_timeout: 2s}}}}
rate_limit: {{per_ip: 100000, per_client: 100000}}
providers:
  franceconnect:
    preset: franceconnect-v2
    issuer: http://127.0.0.1:{cls.provider_port}/api/v2
    client_id: relais
    client_secret: {PROVIDER_SECRET}
apps:
  standard-client:
    redirect_uris: ["http://127.0.0.1/cb"]
    scopes: [openid, profile, email]
""")
            cls._launch(f"relay-{port}", ["serve", "--config", os.path.join(cls.directory, f"relais-{port}.yaml")], port)
        cls.balancer = LoadBalancer(cls.gateway_port, cls.relay_ports).start()

    @classmethod
    def tearDownClass(cls):
        cls.balancer.stop()
        for process in cls.processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    process.kill()
        for log in cls.logs:
            log.close()
        cls.cluster.stop()

    @classmethod
    def _write(cls, name, text):
        with open(os.path.join(cls.directory, name), "w") as handle:
            handle.write(text)

    @classmethod
    def _launch(cls, name, arguments, port):
        log = open(os.path.join(cls.directory, f"{name}.log"), "a")
        cls.logs.append(log)
        cls.processes[name] = subprocess.Popen([BINARY] + arguments, stdout=log, stderr=subprocess.STDOUT)
        wait_for(f"http://127.0.0.1:{port}/readyz", cls.processes[name])

    def sign_in(self, identity="angela"):
        """A sign-in through the gateway: the instances that served /authorize, /callback and /token,
        and the token response. Raises Failure at the first step that did not answer as expected."""
        verifier = secrets.token_urlsafe(48)
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
        redirect_uri = "http://127.0.0.1:54321/cb"
        browser = requests.Session()
        authorize = browser.get(self.gateway + "/authorize?" + urlencode({
            "response_type": "code", "client_id": "standard-client", "redirect_uri": redirect_uri, "state": "s",
            "code_challenge": challenge, "code_challenge_method": "S256", "scope": "openid profile",
        }), allow_redirects=False, timeout=10)
        if authorize.status_code != 302:
            raise Failure("authorize", authorize)
        page = browser.get(authorize.headers["Location"], timeout=10)
        action = re.search(r'action="([^"]+)"', page.text).group(1)
        to_relay = browser.post(urljoin(page.url, action), data={"identity": identity}, allow_redirects=False, timeout=10)
        callback = browser.get(to_relay.headers["Location"], allow_redirects=False, timeout=10)
        location = callback.headers.get("Location", "")
        if callback.status_code != 302 or not location.startswith(redirect_uri):
            raise Failure("callback", callback)
        code = parse_qs(urlsplit(location).query)["code"][0]
        token = requests.post(self.gateway + "/token", data={
            "grant_type": "authorization_code", "code": code, "redirect_uri": redirect_uri, "client_id": "standard-client",
            "code_verifier": verifier,
        }, timeout=10)
        if token.status_code != 200:
            raise Failure("token", token)
        return [upstream_port(authorize), upstream_port(callback), upstream_port(token)], token.json()

    def test_1_each_sign_in_crosses_the_three_instances(self):
        for _ in range(6):
            served, tokens = self.sign_in()
            # Round-robin with one client: each step on the next instance.
            self.assertEqual(sorted(served), sorted(self.relay_ports), served)
            userinfo = requests.get(self.gateway + "/userinfo", headers={"Authorization": "Bearer " + tokens["access_token"]}, timeout=10)
            self.assertEqual(userinfo.status_code, 200, userinfo.text)
            refreshed = requests.post(self.gateway + "/token", data={
                "grant_type": "refresh_token", "refresh_token": tokens["refresh_token"], "client_id": "standard-client"}, timeout=10)
            self.assertEqual(refreshed.status_code, 200, refreshed.text)

    def test_2_an_instance_killed_mid_run_fails_only_what_was_in_flight_on_it(self):
        victim = self.relay_ports[1]
        # Sessions made before the kill, one per instance for its /token, they outlive the instance (another
        # person: the run below makes more sign-ins for angela than sessions.max_per_subject keeps).
        earlier = [self.sign_in(identity="pierre")[1] for _ in range(3)]
        results = []  # (started, ended, error or None, served)
        lock = threading.Lock()
        stop_at = time.monotonic() + 14
        killed_at = []

        def worker():
            while time.monotonic() < stop_at:
                started = time.monotonic()
                try:
                    served, _ = self.sign_in()
                    outcome = (started, time.monotonic(), None, served)
                except Failure as failure:
                    outcome = (started, time.monotonic(), failure, None)
                except requests.RequestException as error:
                    outcome = (started, time.monotonic(), error, None)
                with lock:
                    results.append(outcome)

        workers = [threading.Thread(target=worker) for _ in range(4)]
        for thread in workers:
            thread.start()
        time.sleep(5)
        killed_at.append(time.monotonic())
        self.processes[f"relay-{victim}"].send_signal(signal.SIGKILL)
        for thread in workers:
            thread.join()
        kill = killed_at[0]

        before = [r for r in results if r[1] < kill]
        after = [r for r in results if r[0] > kill]
        spanning = [r for r in results if r[0] <= kill <= r[1]]
        self.assertGreaterEqual(len(before), 8, "too few sign-ins before the kill to mean anything")
        self.assertGreaterEqual(len(after), 8, "too few sign-ins after the kill to mean anything")
        self.assertEqual([r[2] for r in before if r[2]], [])
        # Every sign-in that started after the kill succeeded, on the surviving instances.
        self.assertEqual([str(r[2]) for r in after if r[2]], [])
        self.assertTrue(all(victim not in r[3] for r in after), "nginx still sent requests to the dead instance")
        # Of those in flight at the kill, only one whose failing step reached the victim may have
        # failed: nginx's 502 (a POST it may not resend), or a GET it passed on to a survivor after
        # the victim had already used up its one-time state (the survivor's 400 says so).
        for started, ended, error, _ in spanning:
            if error is not None:
                self.assertIsInstance(error, Failure, str(error))
                self.assertEqual(error.tried[0], victim, str(error))
                self.assertIn(error.status, (400, 502), str(error))
        for tokens in earlier:
            userinfo = requests.get(self.gateway + "/userinfo", headers={"Authorization": "Bearer " + tokens["access_token"]}, timeout=10)
            self.assertEqual(userinfo.status_code, 200, userinfo.text)
            self.assertNotEqual(upstream_port(userinfo), victim)
            refreshed = requests.post(self.gateway + "/token", data={
                "grant_type": "refresh_token", "refresh_token": tokens["refresh_token"], "client_id": "standard-client"}, timeout=10)
            self.assertEqual(refreshed.status_code, 200, refreshed.text)


if __name__ == "__main__":
    unittest.main()
