# The memcached reconcile (docs/examples.md, "Memcached"). Input and
# output: docs/writing-programs.md.
include "kop";

def memcached_labels($name): {app: "memcached", memcached_cr: $name};

# The Deployment of Memcached $m, as the API server stores it (so that a
# steady state compares equal and nothing is written).
def memcached_deployment($m):
  memcached_labels($m.metadata.name) as $labels
  | {apiVersion: "apps/v1", kind: "Deployment",
     metadata: {name: $m.metadata.name, namespace: $m.metadata.namespace, labels: $labels},
     spec: {replicas: ($m.spec.size // 0),
            selector: {matchLabels: $labels},
            template: {metadata: {labels: $labels},
                       spec: {containers: [{name: "memcached",
                                            image: "memcached:1.4.36-alpine",
                                            command: ["memcached", "-m=64", "-o", "modern", "-v"],
                                            ports: [{containerPort: 11211, name: "memcached"}]}]}}}};

.parent as $m
| ($m.spec.size // 0) as $size
| if ($size | type) != "number" or $size != ($size | floor) or $size < 0 or $size > 2147483647 then
    error("invalid spec.size \($size | tojson): an int32 of 0 or more")
  else . end
| {children: [memcached_deployment($m)],
   status: {nodes: ([.children["Pod.v1"][] | .metadata.name] | sort)}}
