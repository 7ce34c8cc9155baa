include "widget";
include "kop";

. as $in | .parent as $w
| (if $w.spec.fail then error("spec.fail is set") else . end)
| ($w | widget_ns($in.settings.team)) as $ns
| running_pods as $pods
| (if ($pods | length) >= 1 then "Ready" else "Pending" end) as $phase
| {
    children: (if .finalizing then [] else
      [ {apiVersion: "v1", kind: "Namespace", metadata: {name: $ns}},
        {apiVersion: "v1", kind: "ConfigMap", metadata: {name: "color", namespace: $ns},
         data: {color: $w.spec.color,
                hash: ($w.spec.color | md5),
                palette: (.related["ConfigMap.v1"]["\(.settings.team)/palette"].data.name // "none"),
                replicas: (.settings.replicas | tostring)}} ]
      + (if ($w.spec.size // 0) > 1 then
           [{apiVersion: "v1", kind: "ConfigMap", metadata: {name: "size", namespace: $ns},
             data: {size: ($w.spec.size | tostring)}}]
         else [] end)
    end),
    status: ({phase: $phase, pods: $pods, big: .aggregates.big,
             errors: [.errors[] | "\(.op) \(.ref.kind)/\(.ref.name): \(.code) \(.reason)"]}
            + (if (.pending // {}) != {} then {pending: .pending} else {} end)),
    events: (if ($w.status.phase // "") != $phase then
               [{type: "Normal", reason: "Phase", message: "widget is \($phase)"}] else [] end),
    resyncAfterSeconds: ($w.spec.resync // null),
    finalized: ([.children["Namespace.v1"][] | select(.metadata.deletionTimestamp == null)] | length == 0)
  }
