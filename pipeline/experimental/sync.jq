# The Experimental reconcile (docs/examples.md, "Experimental").
# Input and output: docs/writing-programs.md.
#
# Pods are named E-0, E-1, ...: new ones take the lowest numbers no pod of E
# (terminating ones included) has. The oldest numberOfReplicas pods that are
# not being deleted are kept (by creationTimestamp, then number); the others
# are left out of the desired children, so the engine deletes them: the
# youngest go first.
include "kop";

def experimental_pod($e; $name):
  {apiVersion: "v1", kind: "Pod",
   metadata: {name: $name, namespace: $e.metadata.namespace, labels: {app: $e.metadata.name}},
   spec: {containers: [{name: "busybox", image: "busybox", command: ["sleep", "3600"]}]}};

# The number in a pod's name E-N (null if it has none).
def experimental_index($e):
  .metadata.name | ltrimstr($e.metadata.name + "-") | try tonumber catch null;

.parent as $e
| ($e.spec.numberOfReplicas // 0) as $want
| if ($want | type) != "number" or $want != ($want | floor) or $want < 0 or $want > 2147483647 then
    error("invalid spec.numberOfReplicas \($want | tojson): an int32 of 0 or more")
  else . end
| [.children["Pod.v1"][]] as $pods
| ([$pods[] | select(.metadata.deletionTimestamp == null)]
   | sort_by(.metadata.creationTimestamp // "", (experimental_index($e) // -1), .metadata.name)) as $alive
| $alive[:$want] as $keep
| ([$pods[] | experimental_index($e) // empty]) as $taken
| ($want - ($keep | length)) as $missing
| (if $missing > 0 then
     [limit($missing; range(0; $want + ($taken | length)) | select(. as $i | $taken | index([$i]) | not))]
   else [] end) as $new
| {children: ([$keep[] | experimental_pod($e; .metadata.name)]
              + [$new[] | experimental_pod($e; "\($e.metadata.name)-\(.)")]),
   status: {numberOfReplicas: ($pods | length),
            persistentVolumesUsed: ([$pods[] | .spec.volumes[]? | .persistentVolumeClaim.claimName? // empty] | unique)}}
