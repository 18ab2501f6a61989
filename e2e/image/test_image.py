"""The container image, run for real with podman (`make image-test`, after `make image`).

Redis (AOF on a podman volume) and the development provider run in containers too, all on the
host's network (127.0.0.1, free ports). The checks:

- the image: at most 150 MB, a non-root user, a HEALTHCHECK on /readyz;
- the running container: a non-root uid, a read-only root filesystem, `podman healthcheck run`
  healthy;
- `relais check-config` in the image refuses a broken configuration (and `serve` will not start
  on it), and accepts the test's own;
- a sign-in through the container against the development provider (authorize with PKCE, the
  provider's login page, the callback, the code, /token), then the Relais container is restarted
  and the Redis container killed (SIGKILL: only the append-only file can bring the data back) and
  started again: the access token still introspects active and the refresh token still works;
- docker/compose.yaml, run with podman-compose: up, /readyz through it, down.

Every container and volume it makes is removed at the end. Environment: RELAIS_IMAGE
(default localhost/relais:latest), REDIS_IMAGE (default localhost/relais-redis:7),
CONTAINERS_CONF (default docker/containers.conf), IMAGE_TEST_PREFIX (the names' prefix).
"""
import json
import os
import secrets
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
from types import SimpleNamespace

import requests

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from stack import ROOT, free_port, sign_in  # noqa: E402 - e2e/stack.py, one folder up

IMAGE = os.environ.get("RELAIS_IMAGE", "localhost/relais:latest")
REDIS_IMAGE = os.environ.get("REDIS_IMAGE", "localhost/relais-redis:7")
MAX_IMAGE_BYTES = 150 * 1000 * 1000  # podman's MB
# Every container, volume and compose project of this run is named with this prefix
# (scripts/image-test.sh sets it and removes whatever is left with it, should this process die).
PREFIX = os.environ.get("IMAGE_TEST_PREFIX") or f"relais-image-test-{secrets.token_hex(3)}"
IMAGE_USER = "10001:10001"
os.environ.setdefault("CONTAINERS_CONF", os.path.join(ROOT, "docker", "containers.conf"))


def podman(*arguments, check=True, timeout=120):
    """Runs podman; with `check`, a non-zero exit fails the test naming the command and its output."""
    command = ["podman", *arguments]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"timed out after {timeout} s: {shlex.join(command)}") from None
    if check and result.returncode != 0:
        raise AssertionError(f"`{shlex.join(command)}` exited {result.returncode}:\n{result.stdout}{result.stderr}")
    return result


def logs(container, lines=40):
    result = podman("logs", "--tail", str(lines), container, check=False)
    return f"--- last lines of {container}'s log ---\n{result.stdout}{result.stderr}"


def running(container):
    return podman("inspect", "--format", "{{.State.Running}}", container, check=False).stdout.strip() == "true"


def wait_until_ready(url, container, timeout=60):
    """Waits for a 200 from `url`; fails early, with the container's log, if the container stops."""
    deadline = time.time() + timeout
    last = "no answer"
    while time.time() < deadline:
        if not running(container):
            raise AssertionError(f"{container} stopped before {url} answered 200\n{logs(container)}")
        try:
            response = requests.get(url, timeout=2)
            if response.status_code == 200:
                return
            last = f"{response.status_code} {response.text[:200]}"
        except requests.RequestException as error:
            last = str(error)
        time.sleep(0.2)
    raise AssertionError(f"{url} did not answer 200 within {timeout} s (last: {last})\n{logs(container)}")


def write(directory, name, text):
    """A file the containers' non-root users can read (bind mounts keep the host's permissions)."""
    path = os.path.join(directory, name)
    with open(path, "w") as handle:
        handle.write(text)
    os.chmod(path, 0o644)
    return path


class Containers:
    """Names everything this run makes, so that tearDown removes exactly that."""

    def __init__(self):
        self.prefix = PREFIX
        self.containers, self.volumes = [], []

    def name(self, what):
        return f"{self.prefix}-{what}"

    def volume(self, what):
        name = self.name(what)
        podman("volume", "create", name)
        self.volumes.append(name)
        return name

    def run(self, what, *arguments):
        name = self.name(what)
        self.containers.append(name)
        podman("run", "--detach", "--name", name, "--network", "host", *arguments)
        return name

    def remove(self):
        for name in reversed(self.containers):
            podman("rm", "--force", "--time", "5", name, check=False)
        for name in self.volumes:
            podman("volume", "rm", "--force", name, check=False)


class Image(unittest.TestCase):
    """One Redis, one development provider and one Relais from the image, shared by the tests (run
    in name order: the sign-in and restart test comes after the checks of the running container)."""

    @classmethod
    def setUpClass(cls):
        if podman("image", "exists", IMAGE, check=False).returncode != 0:
            raise AssertionError(f"no image {IMAGE}: run `make image` first")
        if podman("image", "exists", REDIS_IMAGE, check=False).returncode != 0:
            raise AssertionError(f"no image {REDIS_IMAGE}: `make image-test` builds it from docker/redis.Dockerfile")
        cls.pod = Containers()
        cls.directory = tempfile.mkdtemp(prefix="relais-image-test-")
        os.chmod(cls.directory, 0o755)
        try:
            cls._start()
        except BaseException:
            cls._clean()
            raise

    @classmethod
    def tearDownClass(cls):
        cls._clean()

    @classmethod
    def _clean(cls):
        cls.pod.remove()
        shutil.rmtree(cls.directory, ignore_errors=True)

    @classmethod
    def _start(cls):
        pod = cls.pod
        cls.redis_port, cls.provider_port, cls.relay_port = free_port(), free_port(), free_port()
        cls.relay = f"http://127.0.0.1:{cls.relay_port}"
        cls.introspection = ("image-test-api", secrets.token_urlsafe(24))
        cls.redis_password = secrets.token_urlsafe(24)
        provider_secret = secrets.token_urlsafe(32)

        # Secrets reach the containers as read-only files in /run/secrets (as compose and
        # Kubernetes mount them), never as environment variables. (podman 4.3's own `--secret`
        # cannot mount into a --read-only container without a tmpfs on /run/secrets.)
        secrets_directory = os.path.join(cls.directory, "secrets")
        os.mkdir(secrets_directory, 0o700)
        cls.secrets = {}
        for name, value in (("redis_password", cls.redis_password), ("provider_secret", provider_secret),
                            ("introspection_secret", cls.introspection[1])):
            path = os.path.join(secrets_directory, name)
            with open(path, "w") as handle:
                handle.write(value + "\n")
            os.chmod(path, 0o444)  # the directory above is root's only
            cls.secrets[name] = ["--volume", f"{path}:/run/secrets/{name}:ro"]
        cls.redis_volume = pod.volume("redis-data")

        cls.redis = cls._start_redis()

        provider_config = write(cls.directory, "dev-provider.yaml", f"""
server: {{environment: development, host: 127.0.0.1, port: {cls.provider_port}, public_base_url: "http://127.0.0.1:{cls.provider_port}"}}
log: {{level: warning}}
provider: {{identities_file: /etc/relais/dev-identities.yaml}}
clients:
  relais:
    secret_file: /run/secrets/provider_secret
    redirect_uris: ["{cls.relay}/callback"]
    post_logout_redirect_uris: ["{cls.relay}/logout/callback"]
""")
        # The development provider from the same image (its HEALTHCHECK is the relay's: off here).
        cls.provider = pod.run(
            "provider", "--read-only", "--read-only-tmpfs=false", "--cap-drop=all", "--no-healthcheck",
            *cls.secrets["provider_secret"],
            "--volume", f"{provider_config}:/etc/relais/dev-provider.yaml:ro",
            "--volume", f"{ROOT}/config/dev-identities.yaml:/etc/relais/dev-identities.yaml:ro",
            IMAGE, "dev-provider", "--config", "/etc/relais/dev-provider.yaml")
        wait_until_ready(f"http://127.0.0.1:{cls.provider_port}/readyz", cls.provider)

        cls.relay_config = write(cls.directory, "relais.yaml", f"""
server: {{environment: development, public_base_url: "{cls.relay}"}}
log: {{level: info, format: json}}
store:
  kind: redis
  redis: {{url: "redis://127.0.0.1:{cls.redis_port}/0", password_file: /run/secrets/redis_password}}
providers:
  franceconnect:
    preset: franceconnect-v2
    issuer: "http://127.0.0.1:{cls.provider_port}/api/v2"
    client_id: relais
    client_secret_file: /run/secrets/provider_secret
apps:
  standard-client:
    redirect_uris: ["http://127.0.0.1/cb"]
    scopes: [openid, profile, email]
resource_servers:
  {cls.introspection[0]}:
    secret_file: /run/secrets/introspection_secret
""")
        # As in production: read-only root (no tmpfs either), no capabilities, secrets as files,
        # the configuration mounted read-only. Host networking here, so it listens on 127.0.0.1.
        cls.relais = pod.run(
            "relais", "--read-only", "--read-only-tmpfs=false", "--cap-drop=all", "--security-opt=no-new-privileges",
            *cls.secrets["redis_password"], *cls.secrets["provider_secret"], *cls.secrets["introspection_secret"],
            "--env", "RELAIS_SERVER_HOST=127.0.0.1", "--env", f"RELAIS_SERVER_PORT={cls.relay_port}",
            "--volume", f"{cls.relay_config}:/etc/relais/relais.yaml:ro",
            IMAGE)
        wait_until_ready(cls.relay + "/readyz", cls.relais)

    @classmethod
    def _start_redis(cls):
        """redis-server with the append-only file on the volume, RDB snapshots off (so that what
        survives a crash came from the AOF), the password from a secret."""
        name = cls.pod.name("redis")
        if name in cls.pod.containers:
            podman("rm", "--force", name)
            cls.pod.containers.remove(name)
        container = cls.pod.run(
            "redis", "--read-only", "--read-only-tmpfs=false",
            *cls.secrets["redis_password"],
            "--volume", f"{cls.redis_volume}:/data",
            REDIS_IMAGE, "sh", "-c",
            f'exec redis-server --bind 127.0.0.1 --port {cls.redis_port} --dir /data --appendonly yes '
            f'--appendfsync everysec --save "" --requirepass "$(cat /run/secrets/redis_password)"')
        deadline = time.time() + 30
        while cls.redis_cli("PING", check=False).stdout.strip() != "PONG":
            if time.time() > deadline or not running(container):
                raise AssertionError(f"Redis did not answer PING\n{logs(container)}")
            time.sleep(0.2)
        return container

    @classmethod
    def redis_cli(cls, *command, check=True):
        return podman("exec", "--env", f"REDISCLI_AUTH={cls.redis_password}", cls.pod.name("redis"),
                      "redis-cli", "-p", str(cls.redis_port), *command, check=check)

    def introspect(self, token):
        response = requests.post(self.relay + "/introspect", data={"token": token}, auth=self.introspection, timeout=10)
        self.assertEqual(response.status_code, 200, f"/introspect: {response.status_code} {response.text}")
        return response.json()

    def test_1_image_is_small_non_root_and_has_a_readyz_healthcheck(self):
        inspected = json.loads(podman("image", "inspect", IMAGE).stdout)[0]
        size = inspected["Size"]
        self.assertLessEqual(size, MAX_IMAGE_BYTES, f"{IMAGE} is {size / 1e6:.1f} MB, more than {MAX_IMAGE_BYTES / 1e6:.0f} MB")
        print(f"\n  {IMAGE}: {size / 1e6:.1f} MB", file=sys.stderr)
        config = inspected["Config"]
        self.assertEqual(config.get("User"), IMAGE_USER, "the image must run as the non-root user relais")
        healthcheck = " ".join((inspected.get("Healthcheck") or config.get("Healthcheck") or {}).get("Test") or [])
        self.assertIn("/readyz", healthcheck, "the image's HEALTHCHECK must ask /readyz (built with --format docker?)")

    def test_1b_version_names_the_commit_the_image_was_built_from(self):
        # scripts/image-build.sh records the commit (and whether the tree differed from it) as the
        # binary's build id, as `make demo` does: an operator can tell which code a container runs.
        git = lambda *arguments: subprocess.run(["git", *arguments], cwd=ROOT, capture_output=True, text=True)
        commit = git("rev-parse", "HEAD").stdout.strip()
        dirty = git("diff", "--quiet", "HEAD", "--").returncode != 0
        version = podman("run", "--rm", "--network", "host", IMAGE, "--version").stdout.strip()
        self.assertRegex(commit, "^[0-9a-f]{40}$")
        self.assertTrue(version.endswith(f"(commit {commit}{'-dirty' if dirty else ''})"), version)

    def test_2_container_runs_as_non_root_on_a_read_only_root(self):
        status = podman("exec", self.relais, "cat", "/proc/1/status").stdout
        uids = next(line.split()[1:] for line in status.splitlines() if line.startswith("Uid:"))
        self.assertEqual(set(uids), {"10001"}, f"relais (pid 1) runs as uids {uids}, expected only 10001")
        self.assertEqual(podman("exec", self.relais, "id", "-u").stdout.strip(), "10001")
        self.assertEqual(podman("inspect", "--format", "{{.HostConfig.ReadonlyRootfs}}", self.relais).stdout.strip(), "true")
        for path in ("/etc/relais/written-by-test", "/tmp/written-by-test", "/usr/local/bin/written-by-test"):
            attempt = podman("exec", self.relais, "touch", path, check=False)
            self.assertNotEqual(attempt.returncode, 0, f"{path} could be written: the root filesystem is not read-only")
            self.assertIn("Read-only file system", attempt.stderr, f"touch {path}: {attempt.stderr}")

    def test_3_healthcheck_reports_healthy(self):
        check = podman("healthcheck", "run", self.relais, check=False)
        self.assertEqual(check.returncode, 0, f"`podman healthcheck run` said: {check.stdout}{check.stderr}\n{logs(self.relais)}")
        state = json.loads(podman("inspect", self.relais).stdout)[0]["State"]
        health = state.get("Health") or state.get("Healthcheck") or {}
        self.assertEqual(health.get("Status"), "healthy", f"health after the check: {health}")

    def test_4_check_config_refuses_a_broken_configuration(self):
        broken = write(self.directory, "broken.yaml", """
server: {environment: development, port: not-a-port}
store: {kind: redis, redis: {url: "http://not-redis"}}
providers: {}
aps: {}
""")
        mounts = ["--volume", f"{broken}:/etc/relais/broken.yaml:ro", "--volume", f"{self.relay_config}:/etc/relais/relais.yaml:ro"]
        refused = podman("run", "--rm", "--read-only", "--network", "host", *mounts, IMAGE, "check-config", "/etc/relais/broken.yaml", check=False)
        output = refused.stdout + refused.stderr
        # check-config reports every problem with its key path and refuses with exit 2, as serve does
        # (Sources/relais/Relais.swift); `serve` refuses the same file with 2 below.
        self.assertEqual(refused.returncode, 2, f"check-config on a broken file exited {refused.returncode}:\n{output}")
        for key in ("server.port", "aps"):
            self.assertIn(key, output, f"check-config did not name {key}:\n{output}")
        serve = podman("run", "--rm", "--read-only", "--network", "host", *mounts, IMAGE, "serve", "--config", "/etc/relais/broken.yaml", check=False, timeout=60)
        self.assertEqual(serve.returncode, 2, f"serve on a broken file exited {serve.returncode}:\n{serve.stdout}{serve.stderr}")

        secrets_mounts = [*self.secrets["redis_password"], *self.secrets["provider_secret"], *self.secrets["introspection_secret"]]
        accepted = podman("run", "--rm", "--read-only", "--network", "host", *mounts, *secrets_mounts, IMAGE,
                          "check-config", "/etc/relais/relais.yaml", "--probe", check=False)
        self.assertEqual(accepted.returncode, 0, f"check-config --probe on the test's configuration:\n{accepted.stdout}{accepted.stderr}")

    def test_5_session_survives_restarting_relais_and_redis(self):
        app = "standard-client"
        tokens = sign_in(SimpleNamespace(relay=self.relay), app, identity="angela")
        self.assertIn("refresh_token", tokens, tokens)
        self.assertTrue(self.introspect(tokens["access_token"])["active"], "a fresh access token is not active")
        aof = [line.strip() for line in self.redis_cli("INFO", "persistence").stdout.splitlines() if line.startswith("aof_enabled:")]
        self.assertEqual(aof, ["aof_enabled:1"], "Redis runs without the append-only file")
        time.sleep(2)  # appendfsync everysec: the sign-in's writes are on disk after at most a second

        podman("stop", "--time", "30", self.relais)
        # A crash, not a shutdown: nothing is saved on the way out, RDB is off, only the AOF remains.
        podman("kill", "--signal", "KILL", self.redis)
        podman("wait", self.redis, timeout=30)
        type(self).redis = self._start_redis()
        keys = int(self.redis_cli("DBSIZE").stdout.strip() or 0)
        self.assertGreater(keys, 0, "Redis came back empty: the append-only file did not keep the session")
        podman("start", self.relais)
        wait_until_ready(self.relay + "/readyz", self.relais)

        after = self.introspect(tokens["access_token"])
        self.assertTrue(after["active"], f"the access token issued before the restarts is no longer active: {after}")
        refreshed = requests.post(self.relay + "/token", data={
            "grant_type": "refresh_token", "refresh_token": tokens["refresh_token"], "client_id": app,
        }, timeout=10)
        self.assertEqual(refreshed.status_code, 200, f"refresh after the restarts: {refreshed.status_code} {refreshed.text}\n{logs(self.relais)}")
        fresh = refreshed.json()
        self.assertNotEqual(fresh["refresh_token"], tokens["refresh_token"], "the refresh token was not rotated")
        self.assertTrue(self.introspect(fresh["access_token"])["active"], "the refreshed access token is not active")
        userinfo = requests.get(self.relay + "/userinfo", headers={"Authorization": f"Bearer {fresh['access_token']}"}, timeout=10)
        self.assertEqual(userinfo.status_code, 200, userinfo.text)
        self.assertEqual(userinfo.json().get("family_name"), "DUBOIS", userinfo.text)


class Compose(unittest.TestCase):
    """docker/compose.yaml as users run it, with docker/compose.host-network.yaml on top for a
    machine without bridge networking and with images built locally (no registry)."""

    def test_compose_up_serves_readyz_and_comes_down(self):
        relay_port, redis_port = free_port(), free_port()
        project = f"{PREFIX}-compose"
        environment = dict(os.environ, RELAIS_IMAGE=IMAGE, REDIS_IMAGE=REDIS_IMAGE,
                           RELAIS_LISTEN_PORT=str(relay_port), REDIS_LISTEN_PORT=str(redis_port))
        compose = [sys.executable, "-m", "podman_compose", "--project-name", project,
                   "--file", os.path.join(ROOT, "docker", "compose.yaml"),
                   "--file", os.path.join(ROOT, "docker", "compose.host-network.yaml")]

        def call(*arguments, check=True, timeout=180):
            result = subprocess.run([*compose, *arguments], capture_output=True, text=True, env=environment, timeout=timeout)
            if check and result.returncode != 0:
                raise AssertionError(f"podman-compose {' '.join(arguments)} exited {result.returncode}:\n{result.stdout}{result.stderr}")
            return result

        try:
            call("up", "--detach", "--no-build")
            container = f"{project}_relais_1"
            wait_until_ready(f"http://127.0.0.1:{relay_port}/readyz", container, timeout=90)
            ready = requests.get(f"http://127.0.0.1:{relay_port}/readyz", timeout=5).json()
            self.assertEqual(ready.get("checks", {}).get("store"), "ok", ready)
            state = json.loads(podman("inspect", container).stdout)[0]
            self.assertTrue(state["HostConfig"]["ReadonlyRootfs"], "compose.yaml must run relais read-only")
        finally:
            down = call("down", "--volumes", check=False)
        self.assertEqual(down.returncode, 0, f"podman-compose down:\n{down.stdout}{down.stderr}")
        left = podman("ps", "--all", "--filter", f"name={project}", "--format", "{{.Names}}").stdout.split()
        self.assertEqual(left, [], f"containers left after down: {left}")


if __name__ == "__main__":
    unittest.main()
