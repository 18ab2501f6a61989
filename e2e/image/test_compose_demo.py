"""docker/compose.demo.yaml, the demo for machines without a Swift toolchain: Relais, the three
development providers and Redis from the project's image, brought up with podman-compose (with
docker/compose.demo.host-network.yaml on top: no bridge networking here), then walked in Chromium
by the same journeys as `make e2e` walks on its own stack (e2e/test_browser_journeys.py's
DemoJourneys, e2e/test_mobile_journeys.py's MobileJourneys), and brought down.

It takes make demo's ports (8080-8083): they must be free. Environment: as e2e/image/test_image.py.
"""
import json
import os
import subprocess
import sys
import unittest

import requests

E2E = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, E2E)
# Modules, not classes: unittest collects the TestCase classes a module holds, and these two
# modules' own classes run on `make e2e`'s stack, not here.
import test_browser_journeys as browser_journeys  # noqa: E402
import test_mobile_journeys as mobile_journeys  # noqa: E402
from browser import Browser  # noqa: E402
from stack import ROOT, free_port  # noqa: E402
from test_image import IMAGE, PREFIX, REDIS_IMAGE, podman, wait_until_ready  # noqa: E402

RELAY = "http://127.0.0.1:8080"
PROVIDERS = {"franceconnect": 8081, "franceconnect-plus": 8082, "proconnect": 8083}
PROJECT = f"{PREFIX}-demo"
REDIS_PORT = str(free_port())


def compose(*arguments, check=True, timeout=180):
    command = [sys.executable, "-m", "podman_compose", "--project-name", PROJECT,
               "--file", os.path.join(ROOT, "docker", "compose.demo.yaml"),
               "--file", os.path.join(ROOT, "docker", "compose.demo.host-network.yaml"), *arguments]
    environment = dict(os.environ, RELAIS_IMAGE=IMAGE, REDIS_IMAGE=REDIS_IMAGE, DEMO_LISTEN_HOST="127.0.0.1", REDIS_LISTEN_PORT=REDIS_PORT)
    result = subprocess.run(command, capture_output=True, text=True, env=environment, timeout=timeout)
    if check and result.returncode != 0:
        raise AssertionError(f"podman-compose {' '.join(arguments)} exited {result.returncode}:\n{result.stdout}{result.stderr}")
    return result


def setUpModule():
    """The compose demo comes up once for every test of this file, as a developer brings it up once."""
    busy = [port for port in (8080, *PROVIDERS.values()) if not browser_journeys.port_free(port)]
    if busy:
        raise AssertionError(f"the compose demo listens on make demo's ports; these are taken: {busy}")
    try:
        compose("up", "--detach", "--no-build")
        for name, port in PROVIDERS.items():
            wait_until_ready(f"http://127.0.0.1:{port}/healthz", f"{PROJECT}_{name}_1", timeout=90)
        wait_until_ready(RELAY + "/readyz", f"{PROJECT}_relais_1", timeout=90)
    except BaseException:
        compose("down", "--volumes", check=False)
        raise


def tearDownModule():
    down = compose("down", "--volumes", check=False)
    assert down.returncode == 0, f"podman-compose down:\n{down.stdout}{down.stderr}"
    left = podman("ps", "--all", "--filter", f"name={PROJECT}", "--format", "{{.Names}}").stdout.split()
    assert left == [], f"containers left after down: {left}"


class ComposeDemo:
    """The journeys' fixture on the compose demo: its Relais, and a Chromium per test."""

    relay = RELAY

    @classmethod
    def setUpClass(cls):
        pass  # the module brought the demo up

    @classmethod
    def tearDownClass(cls):
        pass

    def setUp(self):
        self.browser = Browser("compose-" + self.id().split(".")[-1])

    def tearDown(self):
        self.browser.close()


class ComposeDemoServices(ComposeDemo, unittest.TestCase):
    def test_relais_keeps_its_sessions_in_redis_and_every_service_runs_read_only(self):
        ready = requests.get(RELAY + "/readyz", timeout=5).json()
        self.assertEqual(ready.get("checks", {}).get("store"), "ok", ready)
        metadata = requests.get(RELAY + "/.well-known/openid-configuration", timeout=5).json()
        self.assertEqual(metadata["issuer"], RELAY)
        for name, port in PROVIDERS.items():
            # The issuer the browser sees is the one Relais fetched its keys from, inside.
            discovery = requests.get(f"http://127.0.0.1:{port}/api/v2/.well-known/openid-configuration", timeout=5).json()
            self.assertEqual(discovery["issuer"], f"http://127.0.0.1:{port}/api/v2", name)
        for service in ("relais", *PROVIDERS):
            state = json.loads(podman("inspect", f"{PROJECT}_{service}_1").stdout)[0]
            self.assertTrue(state["HostConfig"]["ReadonlyRootfs"], service)
            self.assertEqual(state["Config"]["User"], "10001:10001", service)

    def test_the_demo_app_signs_in_with_each_provider(self):
        browser = self.browser
        for button, identity, welcome in (("sign-in", "angela", "Bonjour Angela Claire Louise"),
                                          ("sign-in-proconnect", "yanis", "Bonjour Yanis")):
            browser.open(RELAY + "/demo/")
            browser.click(button)
            browser.click("identity-" + identity)
            self.assertEqual(browser.wait_for("welcome").text, welcome)
            browser.screenshot("signed-in-" + identity)
            browser.click("sign-out")
            browser.wait_for("signed-out")


class ComposeDemoJourneys(ComposeDemo, browser_journeys.DemoJourneys, unittest.TestCase):
    """The demo app's and the desktop's journeys of `make e2e`, on the compose demo."""

    desktop_client = "demo-desktop"  # config/relais.example.yaml's
    desktop_name = "Relais démo (ordinateur)"


class ComposeMobileJourneys(ComposeDemo, mobile_journeys.MobileJourneys):
    """Step-up to FranceConnect+, refresh and sign-out, ProConnect, the DSFR buttons, the widths."""


if __name__ == "__main__":
    unittest.main()
