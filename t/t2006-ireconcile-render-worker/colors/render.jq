if .parent.spec.color == "bad" then error("no bad colors, \(.parent.metadata.name)") else . end
| {desired: [{apiVersion: "v1", kind: "ConfigMap",
              metadata: {name: "\(.parent.metadata.name)-cm", namespace: .parent.metadata.namespace},
              data: {color: .parent.spec.color, sum: {"$fn": "md5", "arg": .parent.spec.color}}}]}
