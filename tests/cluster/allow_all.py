#!/usr/bin/python3
"""An allow-all stand-in for kubequota, for checking that the real-cluster tier can fail
(tests/cluster/mutants.py): it takes `kubequota serve`'s arguments, answers every filter with
every node, binds every pod it is asked to, allows every admission request unchanged, and is
ready at once. Nothing it serves decides anything about quota.
"""

import json
import ssl
import sys
import threading
import http.client
import http.server
import urllib.parse

import yaml


def arg(name, argv):
    for a in argv:
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
    return None


def main(argv):
    listens = [arg(n, argv) for n in ("--listen", "--scheduler-listen", "--webhook-listen")]
    cert, key = arg("--tls-cert", argv), arg("--tls-key", argv)
    kc = yaml.safe_load(open(arg("--kubeconfig", argv)))
    server = kc["clusters"][0]["cluster"]["server"]
    ca = kc["clusters"][0]["cluster"]["certificate-authority"]
    token = kc["users"][0]["user"]["token"]
    u = urllib.parse.urlparse(server)
    actx = ssl.create_default_context(cafile=ca)

    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def reply(self, code, doc):
            b = json.dumps(doc).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(b)))
            self.end_headers()
            self.wfile.write(b)

        def do_GET(self):
            if self.path in ("/healthz", "/readyz", "/livez"):
                return self.reply(200, {"status": "ok"})
            self.reply(404, {"message": "allow-all stand-in"})

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
            p = self.path
            if p.endswith("/filter"):
                return self.reply(200, {"Nodes": body.get("Nodes"), "NodeNames": body.get("NodeNames"),
                                        "FailedNodes": {}, "FailedAndUnresolvableNodes": {}, "Error": ""})
            if p.endswith("/preempt"):
                return self.reply(200, {"NodeNameToMetaVictims": body.get("NodeNameToMetaVictims") or {}})
            if p.endswith("/bind"):
                c = http.client.HTTPSConnection(u.hostname, u.port, context=actx, timeout=10)
                c.request("POST", "/api/v1/namespaces/%s/pods/%s/binding" % (body["PodNamespace"], body["PodName"]),
                          json.dumps({"apiVersion": "v1", "kind": "Binding",
                                      "metadata": {"name": body["PodName"], "uid": body.get("PodUID")},
                                      "target": {"kind": "Node", "name": body["Node"]}}),
                          {"Authorization": "Bearer " + token, "Content-Type": "application/json"})
                r = c.getresponse()
                msg = r.read().decode()
                return self.reply(200, {"Error": "" if r.status < 300 else msg})
            if p.startswith("/admission/"):
                return self.reply(200, {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                                        "response": {"uid": body["request"]["uid"], "allowed": True}})
            self.reply(404, {"message": "allow-all stand-in"})

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    servers = []
    for l in listens:
        if not l:
            continue
        host, port = l.rsplit(":", 1)
        s = http.server.ThreadingHTTPServer((host, int(port)), H)
        s.socket = ctx.wrap_socket(s.socket, server_side=True)
        servers.append(s)
        threading.Thread(target=s.serve_forever, daemon=True).start()
    print("allow-all stand-in serving %s" % [l for l in listens if l], flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main(sys.argv[1:])
