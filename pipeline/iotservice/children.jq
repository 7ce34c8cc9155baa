# children.jq: the desired objects of one IoTService instance
# (docs/iotservice-api.md: the children of an instance).
#
# Values are written in the form the API server stores them (ports as
# integers, quantities canonical, no empty maps), so that a steady state
# compares equal and writes nothing.

include "kop";

# Labels that mark every object the operator creates, so that events map
# back to O/X and pruning never touches anything else.
def iot_owner_labels($o; $x):
  {"app.kubernetes.io/managed-by": "iot-operator", "cp.iot.sap/operator": $o, "cp.iot.sap/instance": $x};

# The components to render for a typed spec: one table for workloads,
# their ports (container and Service), env vars and volumes.
#   c: component, path: spec block, kind, service: Service name prefix,
#   ports: [[port name, spec field]], env: [[env var, spec field]],
#   volume: the StatefulSet's PVC [name, mount path, size field], config: mounts config.yml
def iot_components($s):
  [
    {c: "cockpit", path: ["cockpit"], kind: "Deployment", service: "cockpit",
     ports: [["http", "container_port"]], env: [["CONTAINER_PORT", "container_port"]], config: true},
    (if $s.core_spring.enabled then
       {c: "core-spring", path: ["core_spring"], kind: "Deployment", service: "core-spring",
        ports: [["http", "container_port"]], env: [["CONTAINER_PORT", "container_port"]], config: true},
       {c: "processing", path: ["processing"], kind: "Deployment", service: "processing",
        ports: [["http", "container_port"]], env: [["CONTAINER_PORT", "container_port"]], config: true}
     else
       {c: "core", path: ["core"], kind: "Deployment", service: "core",
        ports: [["http", "container_port_http"], ["hazelcast", "container_port_hazelcast"]],
        env: [["CONTAINER_PORT_HTTP", "container_port_http"], ["CONTAINER_PORT_HAZELCAST", "container_port_hazelcast"]],
        config: true}
     end),
    {c: "gateway-rest", path: ["gateway", "rest"], kind: "Deployment", service: "gateway-rest",
     ports: [["http", "container_port"]], env: [["CONTAINER_PORT", "container_port"]], config: true},
    {c: "haproxy", path: ["haproxy"], kind: "Deployment", service: "iot", public: true,
     ports: [["http", "container_port_http"], ["https", "container_port_https"], ["mqtt-tls", "container_port_mqtt"],
             ["jms-tls", "container_port_jms"]],
     env: [["CONTAINER_PORT_HTTP", "container_port_http"], ["CONTAINER_PORT_HTTPS", "container_port_https"],
           ["CONTAINER_PORT_MQTT", "container_port_mqtt"], ["CONTAINER_PORT_JMS", "container_port_jms"]],
     config: true},
    (if $s.postgresql.size == 1 then
       {c: "postgresql", path: ["postgresql"], kind: "Deployment", service: "postgresql",
        ports: [["postgresql", "container_port"]], env: [["CONTAINER_PORT", "container_port"]], config: false}
     else empty end),
    {c: "gateway-mqtt", path: ["gateway", "mqtt"], kind: "StatefulSet", service: "gateway-mqtt",
     ports: [["mqtt-tls", "container_port"]], env: [["CONTAINER_PORT", "container_port"]], config: true,
     volume: ["gateway-volume", "/gateway/store", "persistent_volume_claim_size"]},
    {c: "messaging", path: ["mms"], kind: "StatefulSet", service: "messaging",
     ports: [["jms-no-tls", "container_port_jms"], ["jms-tls", "container_port_jms_tls"],
             ["hazelcast", "container_port_hazelcast"]],
     env: [["CONTAINER_PORT_JMS", "container_port_jms"], ["CONTAINER_PORT_JMS_TLS", "container_port_jms_tls"],
           ["CONTAINER_PORT_HAZELCAST", "container_port_hazelcast"]], config: true,
     volume: ["messaging-volume", "/messaging/store", "persistent_volume_claim_size"]}
  ];

# One workload. $ctx: {o, x, ns, spec, labels (the owner labels),
# and the parts every workload shares, made once a render: pull (the
# container's imagePullPolicy), podPull (the pod's imagePullSecrets),
# annotations, volumes}; . is a component entry.
def iot_workload($ctx):
  . as $k
  | ($ctx.spec | getpath($k.path)) as $b
  | {instance: $ctx.x, component: $k.c} as $sel
  | ($sel + $ctx.labels) as $labels
  | {apiVersion: "apps/v1", kind: $k.kind,
     metadata: {name: "\($k.c)-\($ctx.x)", namespace: $ctx.ns, labels: $labels},
     spec: ({replicas: $b.size}
       + (if $k.kind == "StatefulSet" then {serviceName: "\($k.c)-\($ctx.x)"} else {} end)
       + {selector: {matchLabels: $sel},
          template: {
            metadata: (if $k.config then {labels: $labels, annotations: $ctx.annotations} else {labels: $labels} end),
            spec: ({containers: [
                      ({name: $k.c, image: $b.image} + $ctx.pull
                       + {ports: [$k.ports[] | {name: .[0], containerPort: ($b[.[1]] | tonumber)}],
                          env: [$k.env[] | {name: .[0], value: $b[.[1]]}]}
                       + (if ($b.resources | length) > 0 then {resources: $b.resources} else {} end)
                       + (if $k.config then
                            {volumeMounts: (if $k.volume then [{name: "config-volume", mountPath: "/etc/sap"}, {name: $k.volume[0], mountPath: $k.volume[1]}]
                                            else [{name: "config-volume", mountPath: "/etc/sap"}] end)}
                          else {} end))]}
              + $ctx.podPull
              + (if $k.kind == "StatefulSet" then {securityContext: {fsGroup: 999}} else {} end)
              + (if $k.config then $ctx.volumes else {} end))}}
       + (if $k.volume then
            {volumeClaimTemplates: [{metadata: {name: $k.volume[0], labels: $sel},
                                     spec: {accessModes: ["ReadWriteOnce"],
                                            resources: {requests: {storage: ($b[$k.volume[2]] | kop_quantity)}}}}]}
          else {} end))};

# One Service. $ctx: as iot_workload's; . is a component entry.
def iot_service($ctx):
  . as $k
  | ($ctx.spec | getpath($k.path)) as $b
  | {instance: $ctx.x, component: $k.c} as $sel
  | {apiVersion: "v1", kind: "Service",
     metadata: {name: "\($k.service)-\($ctx.x)", namespace: $ctx.ns, labels: ($sel + $ctx.labels)},
     spec: ((if $k.public then {type: "LoadBalancer", externalTrafficPolicy: "Local"} else {type: "ClusterIP"} end)
       + {selector: $sel,
          ports: [$k.ports[] | ($b[.[1]] | tonumber) as $p | {name: .[0], protocol: "TCP", port: $p, targetPort: $p}]})};

# The Pod Security Admission level the instance namespace enforces: baseline, which no IoT workload
# needs more than (no host namespaces, hostPath, privileged containers or added capabilities), and
# which keeps a pod out of its node whoever writes its template. The admission policy
# (deploy/policy/) requires it on every namespace the operator writes.
def iot_pod_security: {"pod-security.kubernetes.io/enforce": "baseline"};

# The annotation that marks the instance namespace as made by the operator for one IoTService: its
# uid, which no other object shares (labels are copied with a manifest; this is not). The operator
# writes into the namespace, and deletes it, only when it carries the uid of the IoTService.
def iot_owner_annotation: "cp.iot.sap/iotservice-uid";

# Every desired child. $ctx: {o, x, uid (the IoTService's), ns, spec, config (the config.yml value),
# pullSecret (the source Secret or null)}.
def iot_children($ctx):
  iot_owner_labels($ctx.o; $ctx.x) as $own
  | ($ctx.config | yaml | md5) as $checksum
  | ($ctx + {labels: $own,
             pull: (if $ctx.spec.imagePullPolicy != "" then {imagePullPolicy: $ctx.spec.imagePullPolicy} else {} end),
             podPull: (if $ctx.spec.imagePullSecrets != "" then {imagePullSecrets: [{name: $ctx.spec.imagePullSecrets}]} else {} end),
             annotations: {"co.elastic.logs/module": "iot", "checksum/config": $checksum},
             volumes: {volumes: [{name: "config-volume", secret: {secretName: "iotservice-\($ctx.x)"}}]}}) as $c
  | iot_components($ctx.spec) as $components
  | [
      {apiVersion: "v1", kind: "Namespace",
       metadata: {name: $ctx.ns, labels: ($own + {instance: $ctx.x} + iot_pod_security),
                  annotations: {(iot_owner_annotation): $ctx.uid}}},
      (if $ctx.pullSecret != null then
         {apiVersion: "v1", kind: "Secret",
          metadata: {name: "image-pull-secret", namespace: $ctx.ns, labels: ($own + {instance: $ctx.x})}}
         + (if ($ctx.pullSecret.type // "") != "" then {type: $ctx.pullSecret.type} else {} end)
         + (if ($ctx.pullSecret.data // {}) != {} then {data: $ctx.pullSecret.data} else {} end)
       else empty end),
      {apiVersion: "v1", kind: "Secret",
       metadata: {name: "iotservice-\($ctx.x)", namespace: $ctx.ns,
                  labels: ({instance: $ctx.x, component: "iotservice"} + $own)},
       type: "Opaque",
       data: {"config.yml": ($ctx.config | yaml | base64enc)}},
      (if $ctx.spec.enableNetworkPolicies then
         {apiVersion: "networking.k8s.io/v1", kind: "NetworkPolicy",
          metadata: {name: "deny-not-instance-\($ctx.x)", namespace: $ctx.ns, labels: ({instance: $ctx.x} + $own)},
          spec: {podSelector: {matchLabels: {instance: $ctx.x},
                               matchExpressions: [{key: "component", operator: "NotIn", values: ["haproxy"]}]},
                 ingress: [{from: [{podSelector: {matchLabels: {instance: $ctx.x}}}]}],
                 policyTypes: ["Ingress"]}}
       else empty end),
      ($components[] | select(.kind == "Deployment") | iot_workload($c)),
      ($components[] | select(.kind == "StatefulSet") | iot_workload($c)),
      ($components[] | iot_service($c))
    ];
