#!/usr/bin/env python3
# Writes the recorded-style event files of t2001 (run by hand when they change;
# the output is committed). Each case is a list of watch events.
import hashlib, json, os, subprocess

# The test tool of the build (for the applied annotation ireconcile writes).
TEST_TOOL = os.environ.get("KOP_TEST_TOOL") or os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                            "..", "..", "build", "t", "test-tool")

def dump(name, events):
    with open(name + ".in.jsonl", "w") as f:
        for e in events:
            if isinstance(e, str):
                f.write(e + "\n")
            else:
                f.write(json.dumps(e, separators=(",", ":")) + "\n")

MF = [{"manager": "kubectl", "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}]

def widget(name, rv, spec, ns="blue", status=None, fin=None, deleting=False, typ="ADDED"):
    meta = {"name": name, "namespace": ns, "uid": "uid-" + name, "resourceVersion": str(rv),
            "generation": 1, "creationTimestamp": "2026-11-22T09:00:00Z", "managedFields": MF}
    if fin is not None:
        meta["finalizers"] = fin
    if deleting:
        meta["deletionTimestamp"] = "2026-11-22T09:30:00Z"
    o = {"apiVersion": "test.example.org/v1", "kind": "Widget", "metadata": meta, "spec": spec}
    if status is not None:
        o["status"] = status
    return {"type": typ, "object": o}

def applied(desired, puid):
    """The iot-operator/applied annotation ireconcile gives the child desired
    (as the widget program gives it, keys in its order) of the widget of uid puid."""
    out = subprocess.run([TEST_TOOL, "stamp-applied", puid], input=json.dumps(desired) + "\n",
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)["metadata"]["annotations"]

def labels(w, team="blue"):
    return {"test.example.org/team": team, "test.example.org/widget": w}

def namespace(w, rv, deleting=False, typ="ADDED", lab=None):
    meta = {"name": "blue-" + w, "uid": "uid-ns-" + w, "resourceVersion": str(rv),
            "labels": lab if lab is not None else labels(w), "managedFields": MF,
            "annotations": applied({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "blue-" + w}},
                                   "uid-" + w)}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-22T09:31:00Z"
    return {"type": typ, "object": {"apiVersion": "v1", "kind": "Namespace", "metadata": meta,
            "spec": {"finalizers": ["kubernetes"]},
            "status": {"phase": "Terminating" if deleting else "Active"}}}

# A ConfigMap; one of widget w's (with labels of ours) was applied by ireconcile from data.
def cm(w, name, rv, data, lab=None, typ="ADDED", ns=None):
    meta = {"name": name, "namespace": ns or ("blue-" + w), "uid": "uid-cm-%s-%s" % (w, name),
            "resourceVersion": str(rv), "creationTimestamp": "2026-11-22T09:00:01Z",
            "labels": lab if lab is not None else labels(w), "managedFields": MF}
    if lab is None:
        meta["annotations"] = applied({"apiVersion": "v1", "kind": "ConfigMap",
                                       "metadata": {"name": name, "namespace": meta["namespace"]}, "data": data},
                                      "uid-" + w)
    return {"type": typ, "object": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}}

def color_data(color, palette="none", replicas="1"):
    return {"color": color, "hash": hashlib.md5(color.encode()).hexdigest(), "palette": palette,
            "replicas": replicas}

def pod(name, w, rv, phase, typ="ADDED"):
    return {"type": typ, "object": {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "blue", "uid": "uid-" + name, "resourceVersion": str(rv),
                         "labels": {"widget": w}},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}, "status": {"phase": phase}}}

BOOKMARK = {"type": "BOOKMARK", "object": {"kind": "Widget", "apiVersion": "test.example.org/v1",
            "metadata": {"resourceVersion": "100", "annotations": {"k8s.io/initial-events-end": "true"}}}}
FIN = ["test.example.org/cleanup"]
PENDING = {"phase": "Pending", "pods": [], "big": [], "errors": []}

# A new widget: its finalizer added, nothing else until the finalizer is stored.
dump("01-create", [widget("w1", 10, {"color": "red", "size": 1}), BOOKMARK])

# Everything as desired already: nothing at all is written, even when the stream is replayed.
steady = [widget("w1", 12, {"color": "red", "size": 1}, fin=FIN, status=PENDING),
          namespace("w1", 13), cm("w1", "color", 14, color_data("red")), BOOKMARK]
dump("02-steady", steady)
dump("03-steady-replayed", steady + steady[:-1] + [widget("w1", 12, {"color": "red", "size": 1}, fin=FIN,
                                                         status=PENDING, typ="MODIFIED")])

# Events before the bookmark are only collected: one reconcile with the latest state.
dump("04-collect", [widget("w1", 10, {"color": "red", "size": 1}, fin=FIN, status=PENDING),
                    namespace("w1", 13), cm("w1", "color", 14, color_data("red")),
                    widget("w1", 20, {"color": "green", "size": 1}, fin=FIN, status=PENDING, typ="MODIFIED"),
                    widget("w1", 21, {"color": "blue", "size": 1}, fin=FIN, status=PENDING, typ="MODIFIED"),
                    BOOKMARK])

# Prune: "size" is ours and no longer desired; "foreign" has no labels of ours; "other"
# belongs to another widget; "gone" is ours but already being deleted.
gone = cm("w1", "gone", 18, {"x": "1"})
gone["object"]["metadata"]["deletionTimestamp"] = "2026-11-22T09:40:00Z"
dump("05-prune", [widget("w1", 12, {"color": "red", "size": 1}, fin=FIN, status=PENDING),
                  namespace("w1", 13), cm("w1", "color", 14, color_data("red")),
                  cm("w1", "size", 15, {"size": "3"}), cm("w1", "foreign", 16, {"x": "1"}, lab={}),
                  cm("w1", "other", 17, {"x": "1"}, lab=labels("w9")), gone, BOOKMARK])

# A field we set drifted (and a field we do not set was added): one apply, no status.
drift = cm("w1", "color", 14, color_data("red"))
drift["object"]["data"]["color"] = "purple"
drift["object"]["data"]["extra"] = "theirs"
extra = cm("w1", "color", 14, color_data("red"))
extra["object"]["data"]["extra"] = "theirs"
extra["object"]["metadata"]["annotations"]["someone"] = "else"
dump("06-drift", [widget("w1", 12, {"color": "red", "size": 1}, fin=FIN, status=PENDING),
                  namespace("w1", 13), drift, BOOKMARK])
dump("07-extra-fields", [widget("w1", 12, {"color": "red", "size": 1}, fin=FIN, status=PENDING),
                         namespace("w1", 13), extra, BOOKMARK])

# A field the program set when it last applied ("old", in the annotation's
# digest) and sets no more: applied again (server-side apply then removes it).
dropped = cm("w1", "color", 14, dict(color_data("red"), old="x"))
dump("17-dropped-field", [widget("w1", 12, {"color": "red", "size": 1}, fin=FIN, status=PENDING),
                          namespace("w1", 13), dropped, BOOKMARK])

# Status differs (a pod runs now): status and event, no apply.
dump("08-status", [widget("w1", 12, {"color": "red", "size": 1}, fin=FIN, status=PENDING),
                   namespace("w1", 13), cm("w1", "color", 14, color_data("red")),
                   pod("w1-a", "w1", 30, "Running"), pod("w1-b", "w1", 31, "Pending"),
                   pod("w1-0", "w1", 32, "Running"), BOOKMARK])

# Deletion: the program returns no children; the namespace is deleted; not finalized yet.
DEL_FIN = ["other.example.org/keep", "test.example.org/cleanup"]
dump("09-finalizing", [widget("w1", 40, {"color": "red", "size": 1}, fin=DEL_FIN, status=PENDING,
                              deleting=True), namespace("w1", 13), cm("w1", "color", 14, color_data("red")),
                       BOOKMARK])
# The namespace is terminating: finalized, our finalizer (index 1) removed, others kept.
dump("10-finalized", [widget("w1", 41, {"color": "red", "size": 1}, fin=DEL_FIN, status=PENDING,
                             deleting=True), namespace("w1", 42, deleting=True), BOOKMARK])
# Being deleted without our finalizer: left alone.
dump("11-deleting-not-ours", [widget("w1", 43, {"color": "red", "size": 1}, fin=["other.example.org/keep"],
                                     status=PENDING, deleting=True), namespace("w1", 13), BOOKMARK])

# Bad input is reported with its line number and skipped; the rest goes on.
dump("12-bad-input", [
    '{"type":"ADDED","object":{"kind":"Widget"',
    json.dumps({"type": "ADDED", "object": {"apiVersion": "test.example.org/v1", "kind": "Widget"}}),
    json.dumps({"type": "ADDED", "object": {"apiVersion": "v1", "kind": "Secret",
                                            "metadata": {"name": "s", "namespace": "blue"}}}),
    json.dumps({"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                            "message": "too old resource version: 1 (5)", "reason": "Expired",
                                            "code": 410}}),
    json.dumps({"type": "ADDED"}),
    "[1,2]",
    "",
    json.dumps(widget("w1", 10, {"color": "red", "size": 1}, fin=FIN, status=PENDING)),
    BOOKMARK])

# A program error for one primary is logged with its key; the others go on.
dump("13-program-error", [widget("w2", 50, {"color": "red", "fail": True}, fin=FIN),
                          widget("w1", 10, {"color": "red", "size": 1}, fin=FIN), BOOKMARK])

# Widgets outside the team namespace are not ours.
dump("14-other-namespace", [widget("w3", 60, {"color": "red"}, ns="green"), BOOKMARK])

# Aggregates over all primaries, related objects and settings.
palette = cm("x", "palette", 70, {"name": "pastel"}, lab={}, ns="blue")
dump("15-aggregates-related", [widget("w1", 12, {"color": "red", "size": 3}, fin=FIN, status=PENDING),
                               widget("w4", 71, {"color": "red", "size": 5}, fin=FIN, status=PENDING),
                               widget("w5", 72, {"color": "red", "size": 1}, fin=FIN, status=PENDING),
                               palette, BOOKMARK])

# No bookmark: the end of a recorded file ends the initial state.
dump("16-no-bookmark", [widget("w1", 10, {"color": "red", "size": 1}, fin=["a/b"])])
