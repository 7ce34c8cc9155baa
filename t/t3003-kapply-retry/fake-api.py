#!/usr/bin/env python3
"""A canned-reply API server on 127.0.0.1 for tests that need exact faults.

usage: fake-api.py SCRIPT.json PORTFILE LOG.jsonl

SCRIPT maps "METHOD /path" (query left out) to a list of replies, served in
order; the last one repeats. A reply is {"code":N,"body":<json or string>,
"headers":{...},"delay":SECONDS}. Minimal discovery (/api, /api/v1, /apis, the
apiextensions and rbac groups) is built in. Every request is logged as one
JSON line {"method","path","query","contentType","body","raw","at"} (raw: the body's bytes as
they came; at: when it
arrived, in seconds of the monotonic clock). The chosen port is written to
PORTFILE when ready.
"""
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

SCRIPT = json.load(open(sys.argv[1]))
LOG = open(sys.argv[3], "a")
LOCK = threading.Lock()
SERVED = {}

DISCOVERY = {
    "/api": {"kind": "APIVersions", "versions": ["v1"],
             "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]},
    "/api/v1": {"kind": "APIResourceList", "groupVersion": "v1", "resources": [
        {"name": "configmaps", "singularName": "configmap", "namespaced": True, "kind": "ConfigMap",
         "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"], "shortNames": ["cm"]},
        {"name": "events", "singularName": "event", "namespaced": True, "kind": "Event",
         "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"], "shortNames": ["ev"]},
        {"name": "namespaces", "singularName": "namespace", "namespaced": False, "kind": "Namespace",
         "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"], "shortNames": ["ns"]},
        {"name": "services", "singularName": "service", "namespaced": True, "kind": "Service",
         "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"], "shortNames": ["svc"]},
        {"name": "services/status", "singularName": "", "namespaced": True, "kind": "Service",
         "verbs": ["get", "patch", "update"]}]},
    "/apis": {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
        {"name": "apiextensions.k8s.io",
         "versions": [{"groupVersion": "apiextensions.k8s.io/v1", "version": "v1"}],
         "preferredVersion": {"groupVersion": "apiextensions.k8s.io/v1", "version": "v1"}},
        {"name": "rbac.authorization.k8s.io",
         "versions": [{"groupVersion": "rbac.authorization.k8s.io/v1", "version": "v1"}],
         "preferredVersion": {"groupVersion": "rbac.authorization.k8s.io/v1", "version": "v1"}}]},
    "/apis/rbac.authorization.k8s.io/v1": {"kind": "APIResourceList", "apiVersion": "v1",
                                           "groupVersion": "rbac.authorization.k8s.io/v1", "resources": [
        {"name": "rolebindings", "singularName": "rolebinding", "namespaced": True, "kind": "RoleBinding",
         "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]}]},
    "/apis/apiextensions.k8s.io/v1": {"kind": "APIResourceList", "apiVersion": "v1",
                                      "groupVersion": "apiextensions.k8s.io/v1", "resources": [
        {"name": "customresourcedefinitions", "singularName": "customresourcedefinition", "namespaced": False,
         "kind": "CustomResourceDefinition", "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
         "shortNames": ["crd", "crds"]}]},
}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def handle_any(self):
        url = urlsplit(self.path)
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        if url.path in DISCOVERY and self.command == "GET":
            return self.reply({"code": 200, "body": DISCOVERY[url.path]})
        key = self.command + " " + url.path
        with LOCK:
            LOG.write(json.dumps({"method": self.command, "path": url.path, "query": url.query,
                                  "contentType": self.headers.get("Content-Type"), "body": body,
                                  "raw": raw.decode("utf-8", "replace"),
                                  "at": time.monotonic()}) + "\n")
            LOG.flush()
            replies = SCRIPT.get(key)
            if not replies:
                reply = {"code": 404, "body": "404 page not found"}
            else:
                i = SERVED.get(key, 0)
                SERVED[key] = i + 1
                reply = replies[min(i, len(replies) - 1)]
        self.reply(reply)

    def reply(self, reply):
        if reply.get("delay"):
            time.sleep(reply["delay"])
        body = reply.get("body", "")
        data = (body if isinstance(body, str) else json.dumps(body)).encode()
        self.send_response(reply["code"])
        ctype = "text/plain; charset=utf-8" if isinstance(body, str) else "application/json"
        self.send_header("Content-Type", ctype)
        for k, v in reply.get("headers", {}).items():
            self.send_header(k, str(v))
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = handle_any


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(sys.argv[2] + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
import os
os.rename(sys.argv[2] + ".tmp", sys.argv[2])
server.serve_forever()
