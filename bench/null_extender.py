#!/usr/bin/python3
"""The null scheduler extender (issue 40): the physical limit of kube-scheduler's extender path.

  python3 bench/null_extender.py --listen 127.0.0.1:PORT [--tls-cert FILE --tls-key FILE]
                                 [--bind-api https://HOST:PORT --bind-ca FILE --bind-token-file FILE]

It answers POST .../filter with every node it was given, unchanged (NodeNames as sent with
nodeCacheCapable, else the Nodes list), and nothing else: no preempt, no state. With --bind-api
it also answers POST .../bind by POSTing the Binding to the API server (a pool of
--bind-conns keep-alive HTTPS connections, as kubequota's client has, with the scheduler's own
ServiceAccount token), as any binding
extender must: the floor of the bind verb, with no quota work.
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
import queue
import http.client


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as kube-scheduler's client expects
    # TCP_NODELAY, and each answer in one write: headers and body sent apart wait 40 ms for
    # the client's delayed ACK (Nagle), as kubequota's did once (BENCHMARKS.md, finding 1)
    disable_nagle_algorithm = True

    def do_POST(self):  # noqa: N802 (http.server's name)
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n)
        if self.path.endswith("/bind") and self.server.bind_api:
            self.bind(body)
            return
        if not self.path.endswith("/filter"):
            self.answer(404, {"Error": "the null extender answers filter (and bind with --bind-api) only"})
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

    def bind(self, body):
        """ExtenderBindingArgs -> POST .../pods/NAME/binding; ExtenderBindingResult."""
        try:
            a = json.loads(body)
            ns, name, uid, node = a["PodNamespace"], a["PodName"], a["PodUID"], a["Node"]
        except (ValueError, KeyError) as e:
            self.answer(400, {"Error": "bad ExtenderBindingArgs: %s" % e})
            return
        binding = json.dumps({"apiVersion": "v1", "kind": "Binding",
                              "metadata": {"name": name, "namespace": ns, "uid": uid},
                              "target": {"apiVersion": "v1", "kind": "Node", "name": node}}).encode()
        err = ""
        conn = self.server.pool.get()  # at most --bind-conns Binding POSTs at once, as kubequota
        try:
            for attempt in (0, 1):  # one retry on a connection the API server closed
                try:
                    conn.request("POST", "/api/v1/namespaces/%s/pods/%s/binding" % (ns, name), binding,
                                 {"Content-Type": "application/json",
                                  "Authorization": "Bearer " + self.server.bind_token})
                    r = conn.getresponse()
                    data = r.read()
                    err = "" if r.status == 201 else "binding %s/%s: %d %s" % (
                        ns, name, r.status, data[:200].decode("utf-8", "replace"))
                    break
                except (OSError, http.client.HTTPException) as e:
                    conn.close()
                    err = "binding %s/%s: %s" % (ns, name, e)
        finally:
            self.server.pool.put(conn)
        self.answer(200, {"Error": err})

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
    bind_api = None
    bind_token = ""
    bind_ctx = None
    pool = None  # queue.Queue of keep-alive HTTPS connections to the API server


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--listen", default="127.0.0.1:0")
    ap.add_argument("--tls-cert")
    ap.add_argument("--tls-key")
    ap.add_argument("--bind-api", help="answer bind by POSTing the Binding to this API server")
    ap.add_argument("--bind-ca", help="the API server's CA")
    ap.add_argument("--bind-token-file", help="a bearer token allowed to create pods/binding")
    ap.add_argument("--bind-conns", type=int, default=64,
                    help="Binding POSTs at once, each on its own keep-alive connection (64: kubequota "
                         "serves 64 requests at once and keeps 64 API connections; kube-scheduler "
                         "binds every pod in parallel, and with a thread per connection and no bound "
                         "here, hundreds of concurrent POSTs got 429 from the API server's priority "
                         "and fairness)")
    a = ap.parse_args()
    host, _, port = a.listen.rpartition(":")
    srv = Server((host, int(port)), Handler)
    if a.bind_api:
        if not (a.bind_ca and a.bind_token_file):
            ap.error("--bind-api needs --bind-ca and --bind-token-file")
        srv.bind_api = a.bind_api
        srv.bind_ctx = ssl.create_default_context(cafile=a.bind_ca)
        with open(a.bind_token_file) as f:
            srv.bind_token = f.read().strip()
        host_, _, port_ = a.bind_api.split("://", 1)[1].rstrip("/").rpartition(":")
        srv.pool = queue.Queue()
        for _ in range(a.bind_conns):
            # http.client reconnects a closed connection on the next request by itself
            srv.pool.put(http.client.HTTPSConnection(host_, int(port_), context=srv.bind_ctx, timeout=30))
    if a.tls_cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(a.tls_cert, a.tls_key)
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    print("null extender listening on %s:%d tls=%s bind=%s" % (
        host, srv.server_address[1], "on" if a.tls_cert else "off", "on" if a.bind_api else "off"), flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
