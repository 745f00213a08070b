#!/usr/bin/python3
"""The null scheduler extender (issue 40): the physical limit of kube-scheduler's extender path.

  python3 bench/null_extender.py --listen 127.0.0.1:PORT [--tls-cert FILE --tls-key FILE]

It answers POST .../filter with every node it was given, unchanged (NodeNames as sent with
nodeCacheCapable, else the Nodes list), and nothing else: no bind verb, no preempt, no state.
kube-scheduler configured with it (filterVerb only) pays everything an extender costs it (the
ExtenderArgs JSON with the whole pod, the HTTP round trip in its serial cycle, the answer's
decoding) and nothing of kubequota's own work, so a bench row with it, beside kube-scheduler
alone and kubequota in the same run, splits the extender path's cost into the architecture's
floor and kubequota's share. HTTP/1.1 keep-alive, plain or TLS (the same server certificate
as kubequota's, so the scheduler verifies it the same way). Python standard library only; one
thread per connection (kube-scheduler's filter calls are serial: one connection does).
"""

import argparse
import http.server
import json
import ssl
import sys


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as kube-scheduler's client expects
    # TCP_NODELAY, and each answer in one write: headers and body sent apart wait 40 ms for
    # the client's delayed ACK (Nagle), as kubequota's did once (BENCHMARKS.md, finding 1)
    disable_nagle_algorithm = True

    def do_POST(self):  # noqa: N802 (http.server's name)
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n)
        if not self.path.endswith("/filter"):
            self.answer(404, {"Error": "the null extender answers filter only"})
            return
        try:
            args = json.loads(body)
        except ValueError as e:
            self.answer(400, {"Error": "bad ExtenderArgs: %s" % e})
            return
        # ExtenderFilterResult: every node passes; nodeCacheCapable sends names only
        res = {"FailedNodes": {}, "FailedAndUnresolvableNodes": {}, "Error": ""}
        if args.get("NodeNames") is not None:
            res["NodeNames"] = args["NodeNames"]
        else:
            res["Nodes"] = args.get("Nodes")
        self.answer(200, res)

    def do_GET(self):  # noqa: N802
        self.answer(200 if self.path in ("/healthz", "/readyz") else 404, {})

    def answer(self, status, obj):
        data = json.dumps(obj, separators=(",", ":")).encode()
        head = "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % (
            status, "OK" if status == 200 else "Error", len(data))
        self.wfile.write(head.encode() + data)

    def log_message(self, fmt, *args):  # one line per request would cost more than the answer
        pass


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    connections = 0

    def get_request(self):
        sock, addr = super().get_request()
        Server.connections += 1
        return sock, addr


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--listen", default="127.0.0.1:0")
    ap.add_argument("--tls-cert")
    ap.add_argument("--tls-key")
    a = ap.parse_args()
    host, _, port = a.listen.rpartition(":")
    srv = Server((host, int(port)), Handler)
    if a.tls_cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(a.tls_cert, a.tls_key)
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    print("null extender listening on %s:%d tls=%s" % (host, srv.server_address[1], "on" if a.tls_cert else "off"),
          flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
