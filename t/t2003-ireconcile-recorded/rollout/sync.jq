.parent as $d
| {children: ([{apiVersion: "v1", kind: "ConfigMap",
                metadata: {name: "\($d.metadata.name)-rollout", namespace: $d.metadata.namespace},
                data: {image: $d.spec.template.spec.containers[0].image,
                       replicas: ($d.spec.replicas | tostring),
                       replicaSets: (.children["ReplicaSet.apps/v1"] | keys | join(",")),
                       running: ([.children["Pod.v1"][] | select(.status.phase == "Running") | .metadata.name]
                                 | sort | join(",")),
                       podFields: ([.children["Pod.v1"][] | paths(scalars) | join(".")] | unique | join(","))}}]
              # a child an owner reference cannot reach: the engine refuses it
              + (if $d.metadata.annotations["test.example.org/stray"] then
                   [{apiVersion: "v1", kind: "ConfigMap", metadata: {name: "stray", namespace: "elsewhere"}}]
                 else [] end)),
   status: null}
