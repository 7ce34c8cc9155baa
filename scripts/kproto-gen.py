#!/usr/bin/env python3
"""
Writes lib/kproto_types.c, the table lib/kproto.c walks to turn a built-in
kind's protobuf message into the JSON its Go type marshals to (and back).

Field numbers and value types come from the packages' generated.proto; what
the JSON keeps of a zero value comes from the Go types the .proto is made
from (types.go): a pointer (`*T`) keeps a zero that was sent, `omitempty`
drops a zero scalar or an empty slice or map, a struct is never dropped,
`json:",inline"` merges a message into its parent.

usage: kproto-gen.py API APIMACHINERY KUBE_AGGREGATOR APIEXTENSIONS >lib/kproto_types.c
(checkouts of k8s.io/api, k8s.io/apimachinery, k8s.io/kube-aggregator and
k8s.io/apiextensions-apiserver)
"""
import os
import re
import sys

# proto package, checkout, folder, apiVersion of its kinds (None: no kinds)
PACKAGES = [
    ("k8s.io.api.core.v1", 0, "core/v1", "v1"),
    ("k8s.io.api.apps.v1", 0, "apps/v1", "apps/v1"),
    ("k8s.io.api.batch.v1", 0, "batch/v1", "batch/v1"),
    ("k8s.io.api.networking.v1", 0, "networking/v1", "networking.k8s.io/v1"),
    ("k8s.io.api.policy.v1", 0, "policy/v1", "policy/v1"),
    ("k8s.io.api.autoscaling.v1", 0, "autoscaling/v1", "autoscaling/v1"),
    ("k8s.io.api.autoscaling.v2", 0, "autoscaling/v2", "autoscaling/v2"),
    ("k8s.io.api.rbac.v1", 0, "rbac/v1", "rbac.authorization.k8s.io/v1"),
    ("k8s.io.api.coordination.v1", 0, "coordination/v1", "coordination.k8s.io/v1"),
    ("k8s.io.api.events.v1", 0, "events/v1", "events.k8s.io/v1"),
    ("k8s.io.api.storage.v1", 0, "storage/v1", "storage.k8s.io/v1"),
    ("k8s.io.api.scheduling.v1", 0, "scheduling/v1", "scheduling.k8s.io/v1"),
    ("k8s.io.api.discovery.v1", 0, "discovery/v1", "discovery.k8s.io/v1"),
    ("k8s.io.api.authentication.v1", 0, "authentication/v1", "authentication.k8s.io/v1"),
    ("k8s.io.api.admissionregistration.v1", 0, "admissionregistration/v1", "admissionregistration.k8s.io/v1"),
    ("k8s.io.kube_aggregator.pkg.apis.apiregistration.v1", 2, "pkg/apis/apiregistration/v1",
     "apiregistration.k8s.io/v1"),
    ("k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1", 3, "pkg/apis/apiextensions/v1",
     "apiextensions.k8s.io/v1"),
    ("k8s.io.apimachinery.pkg.apis.meta.v1", 1, "pkg/apis/meta/v1", None),
    ("k8s.io.apimachinery.pkg.runtime", 1, "pkg/runtime", None),
    ("k8s.io.apimachinery.pkg.runtime.schema", 1, "pkg/runtime/schema", None),
    ("k8s.io.apimachinery.pkg.util.intstr", 1, "pkg/util/intstr", None),
    ("k8s.io.apimachinery.pkg.api.resource", 1, "pkg/api/resource", None),
]

# Messages that a request body carries without being a kind of their own:
# the DeleteOptions of a DELETE, sent in the resource's group version.
EXTRA_KINDS = [
    ("meta.k8s.io/v1", "DeleteOptions", "k8s.io.apimachinery.pkg.apis.meta.v1.DeleteOptions"),
]

# Messages whose JSON is not their fields (their Go types marshal themselves).
SPECIAL = {
    "k8s.io.apimachinery.pkg.apis.meta.v1.Time": "KP_TIME",
    "k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime": "KP_MICROTIME",
    "k8s.io.apimachinery.pkg.apis.meta.v1.Duration": "KP_DURATION",
    "k8s.io.apimachinery.pkg.api.resource.Quantity": "KP_QUANTITY",
    "k8s.io.apimachinery.pkg.util.intstr.IntOrString": "KP_INTORSTRING",
    "k8s.io.apimachinery.pkg.runtime.RawExtension": "KP_RAW",
    "k8s.io.apimachinery.pkg.apis.meta.v1.FieldsV1": "KP_RAW",
    "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.JSON": "KP_RAW",
    "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrArray": "KP_ORARRAY",
    "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrBool": "KP_ORBOOL",
    "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrStringArray": "KP_ORSTRINGS",
}

SCALARS = {"string": "KP_STRING", "bytes": "KP_BYTES", "int32": "KP_INT32", "int64": "KP_INT64",
           "bool": "KP_BOOL", "double": "KP_DOUBLE"}


def die(msg):
    sys.stderr.write("kproto-gen: %s\n" % msg)
    sys.exit(1)


def parse_proto(path, pkg):
    """{full message name: [(label, type, name, number)]} of one generated.proto (no nested messages)."""
    msgs = {}
    cur = None
    with open(path) as f:
        for line in f:
            line = line.split("//")[0].strip()
            m = re.match(r"message (\w+) \{$", line)
            if m:
                cur = pkg + "." + m.group(1)
                msgs[cur] = []
                continue
            if line == "}":
                cur = None
                continue
            if cur is None or not line:
                continue
            m = re.match(r"(optional|repeated|required) ([\w.]+) (\w+) = (\d+)", line)
            if m:
                msgs[cur].append((m.group(1), m.group(2), m.group(3), int(m.group(4))))
                continue
            m = re.match(r"map<(\w+), ([\w.]+)> (\w+) = (\d+)", line)
            if m:
                if m.group(1) != "string":
                    die("%s: map key %s is not a string" % (path, m.group(1)))
                msgs[cur].append(("map", m.group(2), m.group(3), int(m.group(4))))
                continue
            die("%s: cannot read '%s'" % (path, line))
    return msgs


def parse_go(folder):
    """{struct: [(go name, go type, json tag, proto number)]} and {named slice type: elem} of a Go package."""
    structs, slices = {}, {}
    for fn in sorted(os.listdir(folder)):
        if not fn.endswith(".go") or fn.endswith("_test.go") or fn.startswith("zz_") or fn == "generated.pb.go":
            continue
        cur = None
        with open(os.path.join(folder, fn)) as f:
            for line in f:
                m = re.match(r"type (\w+) struct \{\s*$", line)
                if m:
                    cur = m.group(1)
                    structs[cur] = []
                    continue
                m = re.match(r"type (\w+) struct\s*\{\}", line)
                if m:
                    structs[m.group(1)] = []
                    continue
                m = re.match(r"type (\w+) \[\](\w+)\s*$", line)
                if m:
                    slices[m.group(1)] = m.group(2)
                    continue
                if cur is None:
                    continue
                if line.startswith("}"):
                    cur = None
                    continue
                s = line.strip()
                if not s or s.startswith("//"):
                    continue
                m = re.match(r"(?:(\w+)\s+)?([^\s`]+)\s+`([^`]*)`", s)
                if not m:
                    continue
                tags = dict(re.findall(r'(\w+):"([^"]*)"', m.group(3)))
                if "protobuf" not in tags or tags["protobuf"] == "-":
                    continue
                goname = m.group(1) or m.group(2).lstrip("*").split(".")[-1]
                num = int(tags["protobuf"].split(",")[1])
                structs[cur].append((goname, m.group(2), tags.get("json", ""), num))
    return structs, slices


def cname(full):
    return "m_" + re.sub(r"^k8s\.io\.(api\.|apimachinery\.pkg\.|(kube_aggregator|apiextensions_apiserver)\.pkg\.apis\.)",
                         "", full).replace(".", "_")


def main():
    if len(sys.argv) != 5:
        die("usage: kproto-gen.py API APIMACHINERY KUBE_AGGREGATOR APIEXTENSIONS")
    roots = sys.argv[1:5]
    protos, gos, kinds = {}, {}, []
    for pkg, root, folder, av in PACKAGES:
        d = os.path.join(roots[root], folder)
        p = parse_proto(os.path.join(d, "generated.proto"), pkg)
        protos.update(p)
        structs, slices = parse_go(d)
        for full in p:
            gos[full] = (structs.get(full.split(".")[-1]), slices.get(full.split(".")[-1]))
        if av:
            for full, fields in p.items():
                if fields and fields[0][1] == ".k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta" \
                   and not full.endswith("List"):
                    kinds.append((av, full.split(".")[-1], full))

    kinds += EXTRA_KINDS

    def resolve(t, ctx):
        if t in SCALARS:
            return None
        if t.startswith("."):
            return t[1:]
        return ctx.rsplit(".", 1)[0] + "." + t

    # the messages the kinds reach, in a stable order
    order, seen = [], set()

    def visit(full):
        if full in seen:
            return
        if full not in protos:
            die("message %s is in none of the packages" % full)
        seen.add(full)
        order.append(full)
        for _, t, _, _ in protos[full]:
            r = resolve(t, full)
            if r:
                visit(r)

    for _, _, full in kinds:
        visit(full)
    if len(order) > 65535:
        die("more than 65535 messages")

    out = []
    out.append("/*\n * The built-in kinds' protobuf messages, as lib/kproto.c walks them: each")
    out.append(" * field's number, JSON name, value type and what Go's JSON keeps of its zero.")
    out.append(" * Generated by scripts/kproto-gen.py (make ksim-proto-gen) from")
    out.append(" * k8s.io/api, apimachinery and kube-aggregator; do not edit.\n */")
    out.append('#include "kproto.h"\n#include "banned.h"\n')
    out.append("enum {")
    for full in order:
        out.append("\t%s," % cname(full))
    out.append("};\n")
    nrows = {}
    for full in order:
        fields = protos[full]
        struct, slice_elem = gos[full]
        special = SPECIAL.get(full)
        if struct is None and slice_elem is None and special is None:
            die("%s: no Go type" % full)
        if not fields:
            continue
        rows = []
        bynum = {f[3]: f for f in fields}
        goorder = [g for g in (struct or []) if g[3] in bynum]
        if struct is not None:
            missing = set(bynum) - {g[3] for g in goorder}
            if missing and special is None:
                die("%s: fields %s are not in the Go struct" % (full, sorted(missing)))
        if special is not None or struct is None:
            goorder = [(None, "", "", f[3]) for f in fields]
        for goname, gotype, jsontag, num in goorder:
            label, t, pname, _ = bynum[num]
            parts = jsontag.split(",") if jsontag else [pname]
            if parts[0] == "-":
                continue
            flags = []
            if label == "repeated":
                flags.append("KP_REP")
            if label == "map":
                flags.append("KP_MAP")
            if "omitempty" in parts[1:]:
                flags.append("KP_OMIT")
            if gotype.startswith("*"):
                flags.append("KP_PTR")
            if "inline" in parts[1:]:
                flags.append("KP_INLINE")
            json = parts[0] or goname or pname
            r = resolve(t, full)
            kind = SCALARS[t] if r is None else "KP_MSG"
            rows.append('\t{ %d, %s, %s, %s, "%s" },' % (num, kind, "|".join(flags) or "0",
                                                        cname(r) if r else "0", "" if "inline" in parts[1:] else json))
        if len(rows) > 255:
            die("%s: more than 255 fields" % full)
        nrows[full] = len(rows)
        if rows:
            out.append("static const struct kproto_field f_%s[] = {" % cname(full)[2:])
            out.extend(rows)
            out.append("};\n")
    out.append("const struct kproto_msg kproto_msgs[] = {")
    for full in order:
        struct, slice_elem = gos[full]
        special = SPECIAL.get(full) or ("KP_ITEMS" if struct is None else "KP_PLAIN")
        n = nrows.get(full, 0)
        out.append('\t[%s] = { "%s", %s, %d, %s },' % (cname(full), full.split(".")[-1], special, n,
                                                     "f_" + cname(full)[2:] if n else "NULL"))
    out.append("};\n")
    out.append("const struct kproto_kind kproto_kinds[] = {")
    for av, kind, full in sorted(kinds):
        out.append('\t{ "%s", "%s", %s },' % (av, kind, cname(full)))
    out.append("\t{ NULL, NULL, 0 }\n};\n")
    print("\n".join(out))


main()
