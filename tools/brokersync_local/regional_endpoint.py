"""AWS's regional endpoints, made small: one local address that sends each call to its region's server.

In AWS every region is its own set of endpoints, and a client reaches the region it names. The
local world runs one AWS emulator per region (each its own moto server, state kept apart), and
every process, ours or the functions', is configured with one ``AWS_ENDPOINT_URL``. This
stand-in sits at that address and forwards each request to the server of the region the
request was signed for (SigV4's credential scope, ``Credential=KEY/DATE/REGION/SERVICE/...``),
so a client built with ``region_name="us-east-1"`` reaches us-east-1 and nothing else, exactly
as the library code does in AWS (a peer-region Step Functions or Amazon MQ client).

A partitioned region (its server SIGSTOPped) answers nothing: the forwarded call waits until
the client's own timeout, as a call into a lost region does. Unsigned requests go to the first
region. Run as ``python -m brokersync_local.regional_endpoint --port P --region REGION=URL ...``.
"""

from __future__ import annotations

import argparse
import http.client
import re
import signal
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar
from urllib.parse import unquote, urlsplit

from brokersync_local.ports import LOOPBACK

_SCOPE = re.compile(r"Credential=[^/,\s]+/\d{8}/([a-z0-9-]+)/")
#: A forwarded call gives up after this long (a client's own timeout is usually shorter).
UPSTREAM_TIMEOUT_S = 120.0
#: Hop-by-hop headers are the proxy's own business, never forwarded.
_HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "te", "trailer", "upgrade"}


def signed_region(authorization: str | None, query: str) -> str | None:
    """The region a request was signed for: its Authorization header, or a presigned URL's query."""
    for text in (authorization or "", unquote(query).replace("X-Amz-Credential=", "Credential=")):
        match = _SCOPE.search(text)
        if match:
            return match.group(1)
    return None


class _Forwarder(BaseHTTPRequestHandler):
    routes: ClassVar[dict[str, tuple[str, int]]] = {}
    default: ClassVar[str] = ""
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        return  # one line per AWS call would drown the world's logs

    def _forward(self) -> None:
        region = signed_region(self.headers.get("Authorization"), urlsplit(self.path).query) or self.default
        target = self.routes.get(region)
        if target is None:
            self._answer(400, f"no local endpoint for region {region!r}".encode())
            return
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
        upstream = http.client.HTTPConnection(*target, timeout=UPSTREAM_TIMEOUT_S)
        try:
            upstream.request(self.command, self.path, body=body, headers=headers)
            response = upstream.getresponse()
            payload = response.read()
        except OSError as e:
            self._answer(503, f"region {region} unreachable: {e}".encode())
            return
        finally:
            upstream.close()
        self.send_response(response.status)
        for key, value in response.getheaders():
            if key.lower() not in _HOP and key.lower() != "content-length":
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _answer(self, status: int, message: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(message)))
        self.end_headers()
        self.wfile.write(message)

    # http.server dispatches on these names.
    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = _forward  # noqa: N815


def serve(port: int, routes: dict[str, str]) -> ThreadingHTTPServer:
    """A server forwarding by signed region; ``routes`` maps region to ``http://host:port``."""
    parsed = {region: urlsplit(url) for region, url in routes.items()}
    handler = type(
        "RegionalForwarder",
        (_Forwarder,),
        {
            "routes": {r: (u.hostname or LOOPBACK, u.port or 80) for r, u in parsed.items()},
            "default": next(iter(routes)),
        },
    )
    server = ThreadingHTTPServer((LOOPBACK, port), handler)
    server.daemon_threads = True
    return server


def main() -> int:
    parser = argparse.ArgumentParser(description="one local AWS endpoint routing each call to its region's server")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--region", action="append", required=True, help="REGION=http://127.0.0.1:PORT")
    args = parser.parse_args()
    routes = dict(text.split("=", 1) for text in args.region)
    server = serve(args.port, routes)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    server.serve_forever()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
