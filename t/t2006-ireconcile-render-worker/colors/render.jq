# "bad" fails; "slow" takes a while (about 2 s of jq 1.6): t2006 kills the
# worker while it renders one; "medium" about 0.15 s: a worker slower than
# the first pass, which waits for a few of them only
if .parent.spec.color == "bad" then error("no bad colors, \(.parent.metadata.name)")
elif .parent.spec.color == "slow" then (reduce range(5000000) as $i (0; . + $i)) as $_ | .
elif .parent.spec.color == "medium" then (reduce range(400000) as $i (0; . + $i)) as $_ | .
else . end
| {desired: [{apiVersion: "v1", kind: "ConfigMap",
              metadata: {name: "\(.parent.metadata.name)-cm", namespace: .parent.metadata.namespace},
              data: {color: .parent.spec.color, sum: {"$fn": "md5", "arg": .parent.spec.color}}}]}
