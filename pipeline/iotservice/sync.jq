# sync.jq: one reconcile of one IoTService (docs/iotservice-api.md), run by
# ireconcile with the input described in docs/writing-programs.md:
#   {parent, children, pending, related, settings, aggregates, errors, finalizing, now}
# and returning {children, status, events, resyncAfterSeconds, finalized}.
# The desired children come as .rendered: render.jq's answer (desired.jq),
# which ireconcile keeps per instance. sync.jq does not include desired.jq,
# so that jq 1.6 compiles the rendering once per ireconcile rather than twice;
# run by hand, it is given render.jq's answer (docs/writing-programs.md).

include "kop";
include "spec";
include "children";

# Kinds the program owns, as ireconcile keys them (program.yml: children).
def iot_child_kinds:
  ["Namespace.v1", "RoleBinding.rbac.authorization.k8s.io/v1", "Secret.v1", "Service.v1", "Deployment.apps/v1", "StatefulSet.apps/v1",
   "NetworkPolicy.networking.k8s.io/v1"];

# The observed children as they were given: desired that way, they are
# kept as they are, nothing written and nothing pruned (an invalid spec or a
# queued update freezes the instance; docs/writing-programs.md).
def iot_kept($children):
  [iot_child_kinds[] as $key | ($children[$key] // {})[]];

def iot_key_of: .kind + "." + .apiVersion;

# Why a required child is not ready, or empty (docs/iotservice-api.md, status).
def iot_not_ready($live):
  . as $want
  | if $live == null then "\($want.kind) \($want.metadata.name) is missing"
    elif $want.kind == "Deployment" then
      ($live.status // {}) as $st
      | ($live.spec.replicas // 1) as $r
      | if ($st.observedGeneration // 0) < ($live.metadata.generation // 0) or $r != $want.spec.replicas then
          "Deployment \($want.metadata.name) is not updated yet"
        elif ($st.updatedReplicas // 0) != $r or ($st.availableReplicas // 0) != $r or ($st.readyReplicas // 0) != $r then
          "Deployment \($want.metadata.name) has \($st.readyReplicas // 0)/\($r) ready, \($st.updatedReplicas // 0) updated, \($st.availableReplicas // 0) available"
        # Old pods still running: a rollout stuck on a new pod that never gets
        # ready (the old one still serves), as kubectl rollout status sees it.
        elif ($st.replicas // 0) != $r then
          "Deployment \($want.metadata.name) has \($st.replicas) pods for \($r) replicas: old pods are still running"
        else empty end
    elif $want.kind == "StatefulSet" then
      ($live.status // {}) as $st
      | ($live.spec.replicas // 1) as $r
      | if ($st.observedGeneration // 0) < ($live.metadata.generation // 0) or $r != $want.spec.replicas then
          "StatefulSet \($want.metadata.name) is not updated yet"
        elif ($st.readyReplicas // 0) != $r or ($st.replicas // 0) != $r then
          "StatefulSet \($want.metadata.name) has \($st.readyReplicas // 0)/\($r) ready"
        elif ($st.currentRevision // "") != ($st.updateRevision // "") then
          "StatefulSet \($want.metadata.name) is rolling out revision \($st.updateRevision)"
        else empty end
    elif $want.kind == "Service" and $want.spec.type == "LoadBalancer" then
      if (($live.status.loadBalancer.ingress // []) | length) == 0 then
        "Service \($want.metadata.name) has no load-balancer ingress yet"
      else empty end
    else empty end;

# Each desired child against its live one:
#   {children, problems, notReady}
# problems: changes the API forbids (docs/iotservice-api.md), a StatefulSet's PVC
# template, a workload's selector; the live value is kept in the desired
# object and the field reported, so that everything else is still
# reconciled. notReady: why children are not updated yet (an apply on its
# way: ireconcile's .pending) or why required ones are not ready.
def iot_check($children; $pending):
  . as $desired
  # ($children and $pending hold objects by name, or lack the kind: null,
  # and null[name] is null)
  | ($pending != {}) as $anyPending
  | [.[] | $children[iot_key_of][.metadata.name] as $live
     | if $anyPending and $live != null and $pending[iot_key_of][.metadata.name] then
         "\(.kind) \(.metadata.name) is being updated"
       else iot_not_ready($live) end] as $notReady
  # (the workloads looked up again rather than every child paired first: jq
  # 1.6 builds each array slowly, and this runs on every reconcile)
  | [.[] | select(.kind == "Deployment" or .kind == "StatefulSet") | . as $d
     | $children[iot_key_of][.metadata.name] as $live
     | select($live != null)
     | (if $live.spec.selector != $d.spec.selector and $live.spec.selector then
          {problem: "\($d.kind) \($d.metadata.name): the selector \($live.spec.selector.matchLabels // {} | tojson) cannot change to \($d.spec.selector.matchLabels | tojson); delete the object to have it recreated"}
        else empty end),
       (if $d.kind == "StatefulSet" and $live.spec.volumeClaimTemplates
           # (the live templates carry the server's defaults: names and sizes
           # compared, most often equal as they are: kop_quantity only when not)
           and ([$d.spec.volumeClaimTemplates[] | {name: .metadata.name, storage: .spec.resources.requests.storage}] as $want
                | [$live.spec.volumeClaimTemplates[] | {name: .metadata.name, storage: .spec.resources.requests.storage}] != $want
                  and ([$live.spec.volumeClaimTemplates[] | {name: .metadata.name, storage: (.spec.resources.requests.storage | kop_quantity)}]
                       != $want)) then
          {problem: "StatefulSet \($d.metadata.name): volumeClaimTemplates cannot change (storage \($live.spec.volumeClaimTemplates | map(.spec.resources.requests.storage) | join(",")) to \($d.spec.volumeClaimTemplates | map(.spec.resources.requests.storage) | join(","))); the field is spec.\(if ($d.metadata.name | startswith("gateway-mqtt-")) then "gateway.mqtt" else "mms" end).persistent_volume_claim_size",
           keep: {name: $d.metadata.name, vct: $live.spec.volumeClaimTemplates}}
        else empty end)] as $found
  | [$found[] | .keep // empty] as $keep
  | {children: (if $keep == [] then $desired
                else [$desired[] | . as $d
                      | ([$keep[] | select(.name == $d.metadata.name and $d.kind == "StatefulSet")] | first // null) as $k
                      | if $k != null then .spec.volumeClaimTemplates = $k.vct else . end] end),
     problems: [$found[].problem],
     notReady: $notReady};

# Whose the instance namespace I is (docs/iotservice-api.md, the instance namespace), from the
# Namespace child as seen ($nsobj, or null) and the failed creates of .errors:
#   "ours": it carries this IoTService's uid (iot_owner_annotation): written, and deleted with it;
#   "absent": not seen: created (program.yml: adopt: false), and nothing else until it is seen;
#   "taken": its create met one of that name the operator does not see (no labels of its own);
#   "foreign": it carries the operator's labels and another IoTService's uid;
#   "unmarked": it carries the operator's labels and no uid at all (made by an operator older than
#     the annotation: an admin marks it as this IoTService's, docs/iotservice-api.md);
#   "leaving": such a namespace being deleted (an earlier IoTService's of the same name): waited for.
# Only "ours" is ever written into or deleted.
def iot_namespace_state($nsobj; $uid; $errors):
  if $nsobj == null then
    if any($errors[]; .op == "create" and .ref.kind == "Namespace" and .code == 409) then "taken" else "absent" end
  elif $uid != null and ($nsobj.metadata.annotations // {})[iot_owner_annotation] == $uid then "ours"
  elif $nsobj.metadata.deletionTimestamp != null or $nsobj.status.phase == "Terminating" then "leaving"
  elif ($nsobj.metadata.annotations // {})[iot_owner_annotation] == null then "unmarked"
  else "foreign" end;

def iot_error_text:
  "\(.op // "apply") of \(.ref.kind // "object") \(if .ref.namespace then "\(.ref.namespace)/" else "" end)\(.ref.name // "") failed: \(if .code then "\(.code) " else "" end)\(.reason // "")\(if .message then ": \(.message)" else "" end)";

. as $in
| $in.settings.operatorName as $o
| $in.parent.metadata.name as $x
| "\($o)-\($x)" as $ns
| ($in.children // {}) as $children
| ($in.parent.metadata.generation // 0) as $gen
| ($in.parent.status // {}) as $old
| ($in.now // (now | todate)) as $now
| ($children["Namespace.v1"][$ns]) as $nsobj
| iot_namespace_state($nsobj; $in.parent.metadata.uid; $in.errors // []) as $nsState
| if $in.finalizing then
    # deletion (docs/iotservice-api.md): the namespace I is deleted when it is ours (made for
    # this IoTService: never one someone else made, nor an earlier IoTService's) and takes its
    # contents with it; the other children are kept as they are rather than deleted one by one.
    # Done when I is gone or terminating, or is not ours (left as it is).
    ($nsState != "ours" or $nsobj.metadata.deletionTimestamp != null or $nsobj.status.phase == "Terminating") as $gone
    | {children: [iot_kept($children)[] | select(.kind != "Namespace" or $nsState != "ours")], status: null,
       events: (if $gone then [] else [{type: "Normal", reason: "Deleting", message: "deleting namespace \($ns)"}] end),
       finalized: $gone}
  else
    (($old.conditions // []) | map(select(.type == "Progressing")) | first // {}) as $oldProgressing
    # --- the spec, its defaults, its validation and the desired children
    # (render.jq's answer, given by ireconcile) ---
    | (if $in | has("rendered") then $in.rendered
       else error("no .rendered in the input: sync.jq reads the answer of render.jq there (program.yml: render)") end)
      as $rendered
    | $rendered.invalid as $invalid
    | $rendered.desired as $desired0
    | ($desired0 | iot_check($children; $in.pending // {})) as $imm
    # --- the parallel-update limit (§6), counted from the cluster's statuses ---
    | "\($in.parent.metadata.namespace)/\($x)" as $key
    | ((($in.aggregates.rolling // []) - [$key]) | length) as $rollingOthers
    | ($in.settings.maxParallelUpdates // 30) as $maxParallel
    | ($oldProgressing.reason == "UpdateQueued") as $wasQueued
    | ($gen != ($old.observedGeneration // null)) as $newGeneration
    | ($invalid == null and (($old.phase == "Available" and $newGeneration) or $wasQueued)) as $updateRequested
    | ($updateRequested and $rollingOthers >= $maxParallel) as $queued
    | ($updateRequested and ($queued | not)) as $admitted
    | ($invalid == null and ($queued | not) and ($newGeneration or $wasQueued)) as $fresh
    # --- what is not there or not ready ---
    | [($in.children["Pod.v1"] // {})[]
       | select(.metadata.namespace == $ns and .metadata.labels.instance == $x and .status.phase == "Running")]
      as $runningPods
    | ($runningPods | map(.metadata.name) | sort) as $running
    # a workload says its pods are ready before their own events are in: Available waits until each
    # desired workload's replicas are seen running (counted by its selector's component), so that
    # its status names every pod (and is not written again a moment later); looked at only once
    # nothing else is not ready
    | (if ($imm.notReady | length) > 0 then $imm.notReady
       else
         (reduce $runningPods[] as $pod ({}; .[$pod.metadata.labels.component // ""] += 1)) as $seen
         | [$desired0[] | select(.kind == "Deployment" or .kind == "StatefulSet")
            | (.spec.replicas // 1) as $r | ($seen[.spec.selector.matchLabels.component // ""] // 0) as $n
            | select($n < $r) | "\(.kind) \(.metadata.name) has \($n) of \($r) pods seen running"]
       end) as $notReady
    | [($in.errors // [])[] | select((.op // "apply") == "apply" or .op == "delete" or .op == "patch"
                                     or (.op == "create" and ($nsState != "taken" or .ref.kind != "Namespace")))
       | iot_error_text] as $errors
    | ($in.settings.progressDeadlineSeconds // 900) as $deadline
    | (if $oldProgressing.status == "True" then ($oldProgressing.lastTransitionTime | kop_epoch) else null end) as $since
    | (($now | kop_epoch) // 0) as $nowEpoch
    # --- the phase, its reason and the conditions ---
    | (if $invalid != null then
         {phase: "Failed", reason: "invalid \($invalid | iot_invalid_text)",
          progressing: ["False", "InvalidSpec"]}
       elif $nsState == "taken" then
         {phase: "Failed",
          reason: "namespace \($ns) exists and is not this operator's (made by someone else, or its labels were removed): nothing is written into it and it is never deleted; the instance proceeds once it is gone",
          progressing: ["False", "NamespaceNotOwned"]}
       elif $nsState == "foreign" then
         {phase: "Failed",
          reason: "namespace \($ns) carries this operator's labels but was not created for this IoTService (it lacks the \(iot_owner_annotation) annotation with its uid \($in.parent.metadata.uid)): nothing is written into it and it is never deleted; the instance proceeds once it is gone",
          progressing: ["False", "NamespaceNotOwned"]}
       elif $nsState == "unmarked" then
         {phase: "Failed",
          reason: "namespace \($ns) carries this operator's labels but no \(iot_owner_annotation) annotation (made by an operator older than it, or labelled by hand): nothing is written into it and it is never deleted; if it is this IoTService's, mark it so: kubectl annotate namespace \($ns) \(iot_owner_annotation)=\($in.parent.metadata.uid); else the instance proceeds once it is gone",
          progressing: ["False", "NamespaceNotOwned"]}
       elif $nsState == "leaving" then
         {phase: "Processing",
          message: "waiting for namespace \($ns), left by an earlier IoTService of this name, to be deleted",
          progressing: ["True", "Reconciling"]}
       elif ($imm.problems | length) > 0 then
         {phase: "Failed", reason: ($imm.problems | join("; ")), progressing: ["False", "ImmutableField"]}
       elif ($errors | length) > 0 then
         {phase: "Failed", reason: ($errors | join("; ")), progressing: ["False", "ApplyFailed"]}
       elif $queued then
         {phase: "Processing",
          message: "update queued: \($rollingOthers) of at most \($maxParallel) instances are rolling out",
          progressing: ["False", "UpdateQueued"]}
       elif ($notReady | length) == 0 and ($fresh | not) then
         {phase: "Available", message: "all required children are ready", progressing: ["False", "Complete"]}
       else
         ((if $fresh then ["spec generation \($gen) is being applied"] else [] end + $notReady)
          | if length > 4 then .[:4] + ["\(length - 4) more"] else . end | join("; ")) as $what
         | (if $admitted or ($oldProgressing.reason == "Updating" and $old.phase == "Processing") then "Updating"
            else "Reconciling" end) as $why
         | if ($fresh | not) and ($oldProgressing.reason == "ProgressDeadlineExceeded") then
             {phase: "Failed", reason: "progress deadline exceeded: \($what)", progressing: ["False", "ProgressDeadlineExceeded"]}
           elif ($fresh | not) and $since != null and ($nowEpoch - $since) > $deadline then
             {phase: "Failed", reason: "progress deadline exceeded: \($what)", progressing: ["False", "ProgressDeadlineExceeded"]}
           else
             {phase: "Processing", message: $what, progressing: ["True", $why],
              resync: (if $since != null then ([$deadline - ($nowEpoch - $since), 1] | max) else $deadline end)}
           end
       end) as $p
    | ({phase: $p.phase}
      + (if $p.phase == "Failed" then {reason: $p.reason} else {} end)
      + {observedGeneration: $gen,
         pods: $running,
         conditions: [
           # a queued instance still serves its previous generation
           (($p.phase == "Available") or ($queued and ($notReady | length) == 0)) as $available
           | kop_condition($old.conditions; "Available"; (if $available then "True" else "False" end);
                         (if $available then "AllChildrenReady" elif $p.phase == "Failed" then "Failed"
                          else "ChildrenNotReady" end);
                         ($p.reason // $p.message); $gen; $now),
           kop_condition($old.conditions; "Progressing"; $p.progressing[0]; $p.progressing[1];
                         ($p.reason // $p.message); $gen; $now)]}) as $status
    | if $nsState == "absent" and $invalid == null and ($errors | length) == 0 then
        # I not seen: created, and nothing else (no status yet) until it is seen, ours
        {children: ([$desired0[] | select(.kind == "Namespace")] + iot_kept($children)),
         status: null, events: [], finalized: false}
      else
      {children: (if $nsState == "taken" or $nsState == "absent" then
                    # (its create tried again, after the engine's backoff)
                    [$desired0[] | select(.kind == "Namespace")] + iot_kept($children)
                  elif $invalid != null or $queued or $nsState != "ours" then iot_kept($children)
                  else $imm.children end),
       status: $status,
       # (an update queued turns Available into Processing: one Event, UpdateQueued, says both;
       # one that fails meanwhile is Failed, with its Warning)
       events: (if $p.progressing[1] == "UpdateQueued" and ($wasQueued | not) then
                  [{type: "Normal", reason: "UpdateQueued", message: $p.message}]
                elif $p.phase != ($old.phase // "") then
                  [{type: (if $p.phase == "Failed" then "Warning" else "Normal" end), reason: $p.phase,
                    message: ($p.reason // $p.message)}]
                elif $p.phase == "Failed" and $p.reason != ($old.reason // "") then
                  [{type: "Warning", reason: "Failed", message: $p.reason}]
                else [] end),
       finalized: false}
      + (if $queued then {resyncAfterSeconds: 30}
         elif $p.resync then {resyncAfterSeconds: $p.resync}
         else {} end)
      end
  end
