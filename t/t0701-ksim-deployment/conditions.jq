# The distinct states of a Deployment's conditions over a watch stream (jq -s):
# each state the sorted-as-written list "Type=Status:Reason", consecutive
# repeats dropped. $gen picks the events of one metadata.generation.
[.[] | select(.type != "BOOKMARK" and .object.metadata.generation == $gen)
     | [.object.status.conditions[]? | "\(.type)=\(.status):\(.reason)"]]
| reduce .[] as $x ([]; if length > 0 and .[-1] == $x then . else . + [$x] end)
