{cm: {apiVersion: "v1", kind: "ConfigMap",
      metadata: {name: "\(.parent.metadata.name)-cm", namespace: .parent.metadata.namespace},
      data: {color: .parent.spec.color, sum: {"$fn": "md5", "arg": .parent.spec.color}}},
 sawStatus: (.parent | has("status")), sawChildren: has("children")}
