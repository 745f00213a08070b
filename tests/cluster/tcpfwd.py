#!/usr/bin/python3
"""A TCP forwarder (bytes both ways, TLS passes through untouched), run inside the network
namespace the real-cluster tier creates: the API server's service proxy refuses loopback
endpoints, so kubequota's Service points at this forwarder's address in that namespace, and
it forwards to kubequota across the namespace's veth pair.

  tcpfwd.py LISTEN_HOST:PORT TARGET_HOST:PORT
"""

import socket
import sys
import threading


def pipe(a, b):
    try:
        while True:
            d = a.recv(65536)
            if not d:
                break
            b.sendall(d)
    except OSError:
        pass
    finally:
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def main(listen, target):
    lh, lp = listen.rsplit(":", 1)
    th, tp = target.rsplit(":", 1)
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((lh, int(lp)))
    srv.listen(64)
    print("tcpfwd: %s -> %s" % (listen, target), flush=True)
    while True:
        c, _ = srv.accept()
        try:
            u = socket.create_connection((th, int(tp)), timeout=10)
            u.settimeout(None)
        except OSError:
            c.close()
            continue
        threading.Thread(target=pipe, args=(c, u), daemon=True).start()
        threading.Thread(target=pipe, args=(u, c), daemon=True).start()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
