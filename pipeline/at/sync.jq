# The At reconcile (docs/examples.md, "At"). Input and output:
# docs/writing-programs.md.
#
#   stored phase / pod                    phase    children        requeue
#   DONE, or the pod Succeeded|Failed     DONE     the pod, if any
#   the pod exists                        RUNNING  the pod
#   RUNNING, no pod (in flight, deleted)  RUNNING  the pod
#   schedule unparsable                   PENDING  none            none (an edit is an event)
#   now >= schedule                       RUNNING  the pod
#   now < schedule                        PENDING  none            schedule - now
#
# A pod that exists is given back as it was seen: the engine keeps it as it
# is (a pod's spec cannot change, and an edit of spec.command after the start
# must not try to; a smaller object would be applied, and would remove what
# it leaves out).
include "kop";

# Seconds since the epoch of an RFC 3339 time ("2023-03-19T08:00:00Z", a
# fraction and a numeric offset allowed), or null when it is not one (a
# date that does not exist, such as February 30, included).
def at_epoch:
  if type != "string" then null
  else
    (capture("^(?<base>[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2})(?<frac>\\.[0-9]+)?(?<zone>[Zz]|(?<sign>[+-])(?<oh>[0-9]{2}):(?<om>[0-9]{2}))$") // null) as $m
    | if $m == null then null
      else
        ($m.base | ascii_upcase) as $base
        | (try ($base | strptime("%Y-%m-%dT%H:%M:%S") | mktime) catch null) as $t0
        | ($t0 | if . != null and $m.frac then . + ("0" + $m.frac | tonumber) else . end) as $t
        | if $t0 == null or ($t0 | todate) != $base + "Z" then null
          elif ($m.zone | ascii_upcase) == "Z" then $t
          elif ($m.oh | tonumber) > 23 or ($m.om | tonumber) > 59 then null
          else $t - (if $m.sign == "-" then -1 else 1 end) * (($m.oh | tonumber) * 3600 + ($m.om | tonumber) * 60)
          end
      end
  end;

def at_pod($a):
  {apiVersion: "v1", kind: "Pod",
   metadata: {name: $a.metadata.name, namespace: $a.metadata.namespace,
              labels: {"at.example.com/name": $a.metadata.name}},
   spec: {restartPolicy: "Never",
          containers: [{name: "busybox", image: "busybox",
                        command: ["sh", "-c", ($a.spec.command // "")]}]}};

.parent as $a
| $a.metadata.name as $name
| (.children["Pod.v1"][$name] // null) as $pod
| ($a.status // {}) as $old
| ($old.phase // "") as $stored
| ($a.spec.schedule // null) as $schedule
| ($schedule | at_epoch) as $at
| (.now | at_epoch) as $now
| (if $stored == "DONE" or ($pod.status.phase // "" | . == "Succeeded" or . == "Failed") then
     {phase: "DONE", children: [$pod // empty]}
   elif $pod != null then
     {phase: "RUNNING", children: [$pod]}
   elif $stored == "RUNNING" then
     {phase: "RUNNING", children: [at_pod($a)]}
   elif $at == null then
     {phase: "PENDING", children: [],
      error: "unable to parse spec.schedule \($schedule | tojson): want an RFC 3339 time such as 2023-03-19T08:00:00Z"}
   elif $now >= $at then
     {phase: "RUNNING", children: [at_pod($a)]}
   else
     {phase: "PENDING", children: [], resync: ($at - $now)}
   end) as $r
| ({phase: $r.phase} + (if $r.error then {error: $r.error} else {} end)) as $status
| {children: $r.children,
   status: $status,
   events: (if $status == $old then []
            elif $r.error and $old.error != $r.error then
              [{type: "Warning", reason: "InvalidSchedule", message: $r.error}]
            elif $r.phase == $stored then []
            elif $r.phase == "PENDING" then
              [{type: "Normal", reason: "Scheduled", message: "waiting until \($schedule)"}]
            elif $r.phase == "RUNNING" then
              [{type: "Normal", reason: "Started", message: "pod \($name) runs the command"}]
            else
              [{type: "Normal", reason: "Finished",
                message: "pod \($name) \($pod.status.phase // "is gone")"}]
            end)}
+ (if $r.resync then {resyncAfterSeconds: $r.resync} else {} end)
