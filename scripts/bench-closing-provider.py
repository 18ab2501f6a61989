#!/usr/bin/env python3
"""make bench's second provider: oidc-provider-mock (PyPI, Authlib's provider side: RS256
id_tokens, JSON userinfo) served by Werkzeug's HTTP/1.0 server, which closes the connection after
every answer, so that a relying party opens a new connection (TCP, no TLS here) for each
exchange. With `keep-alive`, the same provider speaks HTTP/1.1 and keeps its connections, so that
make bench can tell what the closing costs from what the provider's pace costs.
Usage: bench-closing-provider.py PORT [keep-alive]"""
import logging
import sys
import warnings

warnings.simplefilter("ignore")
import oidc_provider_mock  # noqa: E402
from werkzeug.serving import WSGIRequestHandler  # noqa: E402

if sys.argv[2:] == ["keep-alive"]:
    WSGIRequestHandler.protocol_version = "HTTP/1.1"

logging.getLogger("werkzeug").setLevel(logging.ERROR)
oidc_provider_mock.app(require_nonce=True).run(host="127.0.0.1", port=int(sys.argv[1]), threaded=True)
