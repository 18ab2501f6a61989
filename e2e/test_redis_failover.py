"""A Redis master killed (SIGKILL) while four clients sign in and refresh flat out, on a real Redis
Cluster (3 masters, a replica each) and on Redis Sentinel (a master, a replica, a sentinel), both
with appendonly yes and min-replicas-to-write 1: what docs/operations.md ("Redis failover") says
is measured here.

The master that holds most sessions is killed; its replica is promoted; the killed node is then
restarted from its own files, as a supervisor would, and rejoins as a replica (with
min-replicas-to-write 1 the promoted master refuses writes until a replica is back). Relais is
never restarted. Checked: every answer is a success or "temporarily unavailable" (a 503 with
Retry-After, or RFC 6749's error=temporarily_unavailable on a redirect back to the app), never a
500 nor another refusal; those answers fall between the kill and the replica's return; every
session acknowledged before the kill is still there; everything after the return succeeds on the
connections Relais reopened itself. The figures go to e2e/artifacts/failover-*.json."""
import base64
import hashlib
import json
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

from stack import ARTIFACTS, BINARY, PROVIDER_SECRET, ROOT, RedisCluster, free_port, wait_for

# Durability settings under test, on every node: each write goes to the append-only file, and a
# master refuses writes while no replica is connected (lag under min-replicas-max-lag, 10 s).
DURABLE = ["--appendonly", "yes", "--appendfsync", "everysec", "--min-replicas-to-write", "1"]
CLIENTS = 4
WARM_UP = 4.0            # seconds of load before the kill
AFTER_RETURN = 3.0       # seconds of load after the killed node is back as a replica
DEADLINE = 60.0          # the whole run, whatever happens
MAX_REQUESTS = 1500      # per client
REDIRECT_URI = "http://127.0.0.1:54321/cb"
IDENTITIES = ("angela", "pierre", "karima")


class Wrong(Exception):
    """An answer that is neither a success nor "temporarily unavailable"."""


class Unavailable(Exception):
    """Temporarily unavailable: the step may be tried again."""


class Load:
    """Clients that sign in and refresh as fast as Relais answers, recording every request
    (start, end, step, status, Retry-After, what was wrong) and every session acknowledged."""

    def __init__(self, relay, provider_port):
        self.relay = relay
        self.provider_port = provider_port
        self.records = []
        self.sessions = {}   # sid -> {"first_ack", "last_ack", "access_token", "refresh_token"}
        self.lock = threading.Lock()
        self.stop = threading.Event()

    def run(self, clients):
        threads = [threading.Thread(target=self._client, args=(number,), daemon=True) for number in range(clients)]
        for thread in threads:
            thread.start()
        return threads

    def _client(self, number):
        http = requests.Session()
        count = [0]
        while not self.stop.is_set() and count[0] < MAX_REQUESTS:
            try:
                tokens = self._sign_in(http, IDENTITIES[number % len(IDENTITIES)], count)
            except Unavailable:
                time.sleep(0.05)
                continue
            except Wrong:
                continue
            for _ in range(4):
                if self.stop.is_set():
                    break
                try:
                    tokens = self._refresh(http, tokens, count)
                except Wrong:
                    break

    def _call(self, http, count, step, method, url, **arguments):
        count[0] += 1
        started = time.monotonic()
        try:
            response = http.request(method, url, allow_redirects=False, timeout=10, **arguments)
        except requests.RequestException as error:
            self._record(started, step, None, None, f"no answer: {error}")
            raise Wrong(step)
        return started, response

    def _record(self, started, step, status, retry_after, wrong=None):
        with self.lock:
            self.records.append({"started": started, "ended": time.monotonic(), "step": step, "status": status,
                                 "retry_after": retry_after, "wrong": wrong})

    def _expect(self, started, step, response, success):
        """Records the answer: success, temporarily unavailable (raises Unavailable) or wrong (raises Wrong)."""
        status, retry_after = response.status_code, response.headers.get("Retry-After")
        location = response.headers.get("Location", "")
        if success(response):
            self._record(started, step, status, retry_after)
            return
        if status == 503 and retry_after and retry_after.isdigit():
            self._record(started, step, status, retry_after)
            raise Unavailable(step)
        if status == 302 and location.startswith(REDIRECT_URI) and parse_qs(urlsplit(location).query).get("error") == ["temporarily_unavailable"]:
            self._record(started, step, "302 temporarily_unavailable", None)
            raise Unavailable(step)
        self._record(started, step, status, retry_after, f"{status} {location or response.text[:300]}")
        raise Wrong(step)

    def _sign_in(self, http, identity, count):
        verifier = secrets.token_urlsafe(48)
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
        browser = requests.Session()
        started, authorize = self._call(browser, count, "authorize", "GET", self.relay + "/authorize?" + urlencode({
            "response_type": "code", "client_id": "standard-client", "redirect_uri": REDIRECT_URI, "state": "s",
            "code_challenge": challenge, "code_challenge_method": "S256", "scope": "openid profile"}))
        self._expect(started, "authorize", authorize, lambda r: r.status_code == 302 and r.headers["Location"].startswith(
            f"http://127.0.0.1:{self.provider_port}/"))
        # The development provider keeps its state in memory: no Redis on these two steps.
        page = browser.get(authorize.headers["Location"], timeout=10)
        action = re.search(r'action="([^"]+)"', page.text).group(1)
        to_relay = browser.post(urljoin(page.url, action), data={"identity": identity}, allow_redirects=False, timeout=10)
        started, callback = self._call(browser, count, "callback", "GET", to_relay.headers["Location"])
        self._expect(started, "callback", callback, lambda r: r.status_code == 302 and "code=" in r.headers.get("Location", "")
                     and r.headers["Location"].startswith(REDIRECT_URI))
        code = parse_qs(urlsplit(callback.headers["Location"]).query)["code"][0]
        started, token = self._call(http, count, "token", "POST", self.relay + "/token", data={
            "grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT_URI, "client_id": "standard-client",
            "code_verifier": verifier})
        self._expect(started, "token", token, lambda r: r.status_code == 200)
        tokens = token.json()
        self._acknowledge(tokens)
        return tokens

    def _refresh(self, http, tokens, count):
        """One rotation; a temporarily unavailable answer is retried with the same token, as an app would."""
        while not self.stop.is_set():
            started, response = self._call(http, count, "refresh", "POST", self.relay + "/token", data={
                "grant_type": "refresh_token", "refresh_token": tokens["refresh_token"], "client_id": "standard-client"})
            try:
                self._expect(started, "refresh", response, lambda r: r.status_code == 200)
            except Unavailable:
                time.sleep(0.05)
                continue
            rotated = response.json()
            self._acknowledge(rotated)
            return rotated
        return tokens

    def _acknowledge(self, tokens):
        sid = session_id(tokens["access_token"])
        now = time.monotonic()
        with self.lock:
            entry = self.sessions.setdefault(sid, {"first_ack": now})
            entry.update(last_ack=now, access_token=tokens["access_token"], refresh_token=tokens["refresh_token"])


def session_id(access_token):
    payload = access_token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))["sid"]


def poll(condition, what, timeout):
    """`what` may be a callable, asked only on timeout (what the nodes say then)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what() if callable(what) else what}")


class Sentinel:
    """A master, its replica and one sentinel (quorum 1, down after 1 s) on loopback, every Redis
    node with the durability settings under test."""

    def __init__(self):
        self.directory = tempfile.mkdtemp(prefix="relais-sentinel-")
        self.ports = [free_port(), free_port()]
        self.sentinel_port = free_port()
        self.processes = {}

    def _spawn(self, port, replica_of=None):
        directory = os.path.join(self.directory, str(port))
        os.makedirs(directory, exist_ok=True)
        arguments = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", directory, "--save", "",
                     "--repl-diskless-sync-delay", "0", *DURABLE]
        if replica_of:
            arguments += ["--replicaof", "127.0.0.1", str(replica_of)]
        self.processes[port] = subprocess.Popen(arguments, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def start(self):
        master, replica = self.ports
        self._spawn(master)
        poll(lambda: self.cli(master, "ping") == "PONG", "the master", 10)
        self._spawn(replica, replica_of=master)
        poll(lambda: self.role(replica) == "slave", "the replica's link", 10)
        config = os.path.join(self.directory, "sentinel.conf")
        with open(config, "w") as handle:
            handle.write(f"""port {self.sentinel_port}
bind 127.0.0.1
dir {self.directory}
sentinel monitor relais-master 127.0.0.1 {master} 1
sentinel down-after-milliseconds relais-master 1000
sentinel failover-timeout relais-master 10000
""")
        self.processes["sentinel"] = subprocess.Popen(["redis-server", config, "--sentinel"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        poll(lambda: "ok" in (self.cli(self.sentinel_port, "sentinel", "replicas", "relais-master") or "").split(), "the sentinel to see the replica", 15)
        return self

    def cli(self, port, *arguments):
        result = subprocess.run(["redis-cli", "-p", str(port), *arguments], capture_output=True, text=True, timeout=10)
        return result.stdout.strip() if result.returncode == 0 else None

    def role(self, port):
        info = self.cli(port, "info", "replication") or ""
        if "role:master" in info:
            return "master"
        return "slave" if "master_link_status:up" in info else None

    def failed_over_to(self, port):
        """Whether the sentinel has finished a failover to `port` (+switch-master): its master is
        `port` and no failover is in progress. get-master-addr-by-name names the promoted replica
        as soon as a failover starts, and a failover can still be aborted after that."""
        lines = (self.cli(self.sentinel_port, "sentinel", "master", "relais-master") or "").splitlines()
        fields = dict(zip(lines[::2], lines[1::2]))
        return fields.get("port") == str(port) and fields.get("flags") == "master"

    def store_yaml(self):
        return f"""{{kind: redis, redis: {{url: "redis://127.0.0.1:1", sentinel: {{master_name: relais-master, nodes: [127.0.0.1:{self.sentinel_port}]}}}}}}"""

    def stop(self):
        for process in self.processes.values():
            if process.poll() is None:
                process.kill()
                process.wait()


class RedisFailoverUnderSignIns(unittest.TestCase):
    def launch_relais(self, store_yaml):
        self.directory = tempfile.mkdtemp(prefix="relais-e2e-failover-")
        self.provider_port, self.relay_port = free_port(), free_port()
        self.relay = f"http://127.0.0.1:{self.relay_port}"
        self.processes, self.logs = [], []
        self._write("provider.yaml", f"""
server: {{environment: development, port: {self.provider_port}}}
log: {{level: warning}}
provider: {{identities_file: {ROOT}/config/dev-identities.yaml}}
clients:
  relais:
    secret: {PROVIDER_SECRET}
    redirect_uris: [{self.relay}/callback]
""")
        self._write("relais.yaml", f"""
server: {{environment: development, port: {self.relay_port}, public_base_url: "{self.relay}"}}
log: {{level: warning}}
store: {store_yaml}
rate_limit: {{enabled: false}}
sessions: {{max_per_subject: 10000}}
providers:
  franceconnect:
    preset: franceconnect-v2
    issuer: http://127.0.0.1:{self.provider_port}/api/v2
    client_id: relais
    client_secret: {PROVIDER_SECRET}
apps:
  standard-client:
    redirect_uris: ["http://127.0.0.1/cb"]
    scopes: [openid, profile, email]
""")
        self._launch(["dev-provider", "--config", os.path.join(self.directory, "provider.yaml")], self.provider_port)
        self.relais = self._launch(["serve", "--config", os.path.join(self.directory, "relais.yaml")], self.relay_port)

    def _write(self, name, text):
        with open(os.path.join(self.directory, name), "w") as handle:
            handle.write(text)

    def _launch(self, arguments, port):
        log = open(os.path.join(self.directory, f"{arguments[0]}.log"), "a")
        self.logs.append(log)
        process = subprocess.Popen([BINARY] + arguments, stdout=log, stderr=subprocess.STDOUT)
        self.processes.append(process)
        self.addCleanup(self._stop, process, log)
        wait_for(f"http://127.0.0.1:{port}/readyz", process)
        return process

    @staticmethod
    def _stop(process, log):
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        log.close()

    def run_failover(self, name, kill, promoted, restart, rejoined, sessions_on_killed, describe):
        """Load, then `kill()` (returns what was killed), wait for `promoted()`, `restart()`, wait for
        `rejoined()`, more load; then the checks. `sessions_on_killed()` (before the kill) gives
        the session ids whose keys the killed master held."""
        load = Load(self.relay, self.provider_port)
        started = time.monotonic()
        threads = load.run(CLIENTS)
        time.sleep(WARM_UP)  # the load runs meanwhile; the kill's timing is what is measured, not synchronised on
        on_killed = sessions_on_killed()
        killed_at = time.monotonic()
        victim = kill()
        promoted_at = time.monotonic() if poll(promoted, f"the promotion of the replica of {victim}", 30) else None
        restart()
        rejoined_at = time.monotonic() if poll(rejoined, lambda: f"the killed node ({victim}) back as a replica: {describe(victim)}", 45) else None
        time.sleep(min(AFTER_RETURN, max(0, started + DEADLINE - time.monotonic())))
        load.stop.set()
        for thread in threads:
            thread.join(timeout=30)
        records = sorted(load.records, key=lambda r: r["started"])

        wrong = [r for r in records if r["wrong"]]
        unavailable = [r for r in records if not r["wrong"] and (r["status"] == 503 or r["status"] == "302 temporarily_unavailable")]
        # Sessions acknowledged before the kill; and, of them, those whose keys the killed master held.
        before = {sid: entry for sid, entry in load.sessions.items() if entry["first_ack"] < killed_at}
        checked_on_killed = sorted(set(before) & on_killed)
        lost = []
        for sid, entry in before.items():
            answer = requests.get(self.relay + "/userinfo", headers={"Authorization": "Bearer " + entry["access_token"]}, timeout=10)
            if answer.status_code != 200:
                lost.append((sid, answer.status_code, answer.text[:200]))
        window = (unavailable[0]["started"] - killed_at, unavailable[-1]["ended"] - killed_at) if unavailable else None
        after_return = [r for r in records if r["started"] > rejoined_at + 1.0]
        figures = {
            "deployment": name, "killed": victim, "clients": CLIENTS,
            "requests": len(records), "sign_ins": sum(1 for r in records if r["step"] == "token" and r["status"] == 200),
            "refreshes": sum(1 for r in records if r["step"] == "refresh" and r["status"] == 200),
            "promoted_after_s": round(promoted_at - killed_at, 2), "replica_back_after_s": round(rejoined_at - killed_at, 2),
            "temporarily_unavailable": len(unavailable),
            "unavailable_by_step": {step: sum(1 for r in unavailable if r["step"] == step) for step in ("authorize", "callback", "token", "refresh")},
            "unavailable_window_s": [round(window[0], 2), round(window[1], 2)] if window else None,
            "wrong_answers": len(wrong), "sessions_before_kill": len(before), "of_them_on_the_killed_master": len(checked_on_killed),
            "sessions_lost": len(lost), "requests_after_return": len(after_return),
            "relais_restarted": self.relais.poll() is not None,
        }
        os.makedirs(ARTIFACTS, exist_ok=True)
        with open(os.path.join(ARTIFACTS, f"failover-{name}.json"), "w") as handle:
            json.dump({"figures": figures, "wrong": wrong[:20], "lost": lost[:20]}, handle, indent=2)
        print(f"\n{name} failover: {json.dumps(figures)}", flush=True)

        self.assertEqual(wrong, [], "answers that are neither a success nor temporarily unavailable")
        self.assertGreaterEqual(figures["sign_ins"], 8, "too little load to mean anything")
        self.assertGreater(sum(1 for r in records if r["ended"] < killed_at), 20, "too little load before the kill")
        # Unavailable answers only between the kill and the replica's return (plus the slack of a
        # request in flight and of the slot map's refresh).
        for record in unavailable:
            self.assertGreaterEqual(record["ended"], killed_at, record)
            self.assertLessEqual(record["started"], rejoined_at + 1.0, record)
        # Then everything succeeds again, on the same Relais process.
        self.assertGreater(len(after_return), 10, "too little load after the killed node came back")
        self.assertEqual([r for r in after_return if r["status"] not in (200, 302)], [])
        self.assertFalse(figures["relais_restarted"])
        self.assertEqual(requests.get(self.relay + "/readyz", timeout=10).status_code, 200)
        # No session acknowledged before the kill was lost, including those the killed master held.
        self.assertGreater(len(checked_on_killed), 0, "no acknowledged session lived on the killed master")
        self.assertEqual(lost, [])
        return figures

    def test_cluster_master_killed_under_sign_ins(self):
        cluster = RedisCluster(extra_arguments=DURABLE)
        self.addCleanup(cluster.stop)
        cluster.start()
        self.launch_relais(f"""{{kind: redis, redis: {{url: "redis://127.0.0.1", cluster: [{", ".join(cluster.nodes)}]}}}}""")
        chosen = {}

        def sessions_on(port):
            keys = (cluster.cli(port, "--scan", "--pattern", "relais:session:*") or "").split()
            return {key.split("{", 1)[1].rstrip("}") for key in keys if "{" in key}

        def sessions_on_killed():
            held = {port: sessions_on(port) for port in cluster.master_ports()}
            chosen["victim"] = max(held, key=lambda port: len(held[port]))
            replica = [port for port in cluster.ports if f"master_port:{chosen['victim']}" in (cluster.cli(port, "info", "replication") or "")
                       and cluster.role(port) == "slave"]
            chosen["replica"] = replica[0]
            return held[chosen["victim"]]

        def kill():
            cluster.kill(chosen["victim"])
            return chosen["victim"]

        self.run_failover(
            "cluster", kill,
            promoted=lambda: cluster.role(chosen["replica"]) == "master",
            restart=lambda: cluster.restart(chosen["victim"]),
            rejoined=lambda: cluster.role(chosen["victim"]) == "slave",
            sessions_on_killed=sessions_on_killed,
            describe=lambda port: f"{cluster.cli(port, 'info', 'replication')!r}; its nodes: {cluster.cli(port, 'cluster', 'nodes')!r}")
        self.assertEqual(len(cluster.master_ports()), 3)

    def test_sentinel_master_killed_under_sign_ins(self):
        sentinel = Sentinel()
        self.addCleanup(sentinel.stop)
        sentinel.start()
        self.launch_relais(sentinel.store_yaml())
        master, replica = sentinel.ports

        def sessions_on_killed():
            keys = (sentinel.cli(master, "--scan", "--pattern", "relais:session:*") or "").split()
            return {key.split("{", 1)[1].rstrip("}") for key in keys if "{" in key}

        def kill():
            process = sentinel.processes[master]
            process.kill()
            process.wait()
            return master

        self.run_failover(
            "sentinel", kill,
            promoted=lambda: sentinel.failed_over_to(replica) and sentinel.role(replica) == "master",
            restart=lambda: sentinel._spawn(master),
            # The sentinel turns the old master, back from its AOF, into the new master's replica.
            rejoined=lambda: sentinel.role(master) == "slave",
            sessions_on_killed=sessions_on_killed,
            describe=lambda port: f"{sentinel.cli(port, 'info', 'replication')!r}; the sentinel: {sentinel.cli(sentinel.sentinel_port, 'sentinel', 'master', 'relais-master')!r}")


if __name__ == "__main__":
    unittest.main()
