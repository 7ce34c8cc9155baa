# rbac.jq: the operator's rights in an instance namespace (README, the operator's rights): the
# RoleBinding iot-operator-instance, binding the ClusterRole of the same name (deploy/
# instance-clusterrole.yaml) to the operator's ServiceAccount there. It is the first child after the
# namespace (kapply writes a namespace's other objects after a RoleBinding in it), and it goes with
# the namespace: the operator's last step on deletion (the namespace's delete, the finalizer in O)
# needs none of its rights.

include "children";

def iot_instance_binding($ctx; $serviceAccount):
  {apiVersion: "rbac.authorization.k8s.io/v1", kind: "RoleBinding",
   metadata: {name: "iot-operator-instance", namespace: $ctx.ns,
              labels: (iot_owner_labels($ctx.o; $ctx.x) + {instance: $ctx.x})},
   roleRef: {apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "iot-operator-instance"},
   subjects: [{kind: "ServiceAccount", name: $serviceAccount, namespace: $ctx.o}]};
