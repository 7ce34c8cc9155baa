# "bad" fails; "slow" takes a while (about 2 s of jq 1.6): t2006 kills the
# worker while it renders one
if .parent.spec.color == "bad" then error("no bad colors, \(.parent.metadata.name)")
elif .parent.spec.color == "slow" then (reduce range(5000000) as $i (0; . + $i)) as $_ | .
else . end
| {desired: [{apiVersion: "v1", kind: "ConfigMap",
              metadata: {name: "\(.parent.metadata.name)-cm", namespace: .parent.metadata.namespace},
              data: {color: .parent.spec.color, sum: {"$fn": "md5", "arg": .parent.spec.color}}}]}
