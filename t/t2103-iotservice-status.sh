#!/bin/sh
test_description='pipeline/iotservice: status, validation, readiness, limits, failures and deletion (sync.jq)'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-iotservice.sh"

# The jq program run by the jq command; the C it runs (test-tool fn-resolve) runs sanitized in t2101 and t2102.
test_normal_pass_only 'it tests the jq program with the jq command, not our C'

X=example-iotservice
I=devawsk8s-example-iotservice

# run PARENT VIEW [EXTRA] NAME: NAME.json is the resolved answer.
run () {
	iot_input "$1" "$2" "${3:-{\}}" >"$4.in.json" &&
	iot_sync "$4.in.json" "$4.json"
}

# kept_as_given NAME: the answer'"'"'s children are exactly the observed
# children of a child kind of its input, as given (kept as they are: nothing
# applied, nothing pruned)
kept_as_given () {
	jq -c "[.children | to_entries[] | select(.key != \"Pod.v1\") | .value[]] | sort" "$1.in.json" >"$1.given" &&
	jq -c ".children | sort" "$1.json" >"$1.kept" &&
	test_cmp "$1.given" "$1.kept" &&
	test "$(jq length "$1.kept")" -gt 0
}

# phase NAME: "phase|reason" of an answer
phase () {
	jq -r '"\(.status.phase)|\(.status.reason // "")"' "$1.json"
}

test_expect_success 'setup: the example, created and ready' '
	iot_parent . >parent.json &&
	run parent.json /dev/null "{}" first &&
	iot_live first.json ready >ns.view &&
	run parent.json ns.view "{}" created &&
	iot_live created.json ready >ready.view &&
	iot_live created.json created >created.view &&
	jq -c ".status.phase = \"Processing\" | .status.observedGeneration = 1" parent.json >parent.processing.json
'

test_expect_success 'nothing there yet: the namespace alone, with the uid of the IoTService; no status yet' '
	jq -c "[.children[] | [.kind, .metadata.name, .metadata.annotations]], .status, .events, .finalized" first.json >actual &&
	cat >expect <<-EOT &&
	[["Namespace","$I",{"cp.iot.sap/iotservice-uid":"uid-iot"}]]
	null
	[]
	false
	EOT
	test_cmp expect actual
'

test_expect_success 'the namespace seen, nothing else: Processing, Progressing True, an event' '
	phase created >actual &&
	echo "Processing|" >expect && test_cmp expect actual &&
	jq -c "[.status.conditions[] | [.type, .status, .reason]], [.events[] | .reason], .resyncAfterSeconds" created.json >actual &&
	cat >expect <<-\EOT &&
	[["Available","False","ChildrenNotReady"],["Progressing","True","Reconciling"]]
	["Processing"]
	900
	EOT
	test_cmp expect actual
'

test_expect_success 'created but not running: Processing naming what is not ready, no event' '
	run parent.processing.json created.view "{}" starting &&
	phase starting >actual &&
	echo "Processing|" >expect && test_cmp expect actual &&
	jq -r ".status.conditions[0].message" starting.json >msg &&
	grep "Deployment cockpit-$X has 0/1 ready" msg &&
	jq -c ".events" starting.json >actual && echo "[]" >expect && test_cmp expect actual
'

test_expect_success 'everything ready: Available, sorted Running pods, conditions, an event' '
	run parent.processing.json ready.view "{}" ready &&
	phase ready >actual &&
	echo "Available|" >expect && test_cmp expect actual &&
	jq -c ".status.pods" ready.json >actual &&
	jq -c "[.[] | select(.kind == \"Pod\") | .metadata.name] | sort" ready.view >expect &&
	test_cmp expect actual &&
	jq -e ".status.pods | length == 8" ready.json &&
	jq -c "[.status.conditions[] | [.type, .status, .reason, .observedGeneration]], [.events[] | [.type, .reason]], has(\"resyncAfterSeconds\")" ready.json >actual &&
	cat >expect <<-\EOT &&
	[["Available","True","AllChildrenReady",1],["Progressing","False","Complete",1]]
	[["Normal","Available"]]
	false
	EOT
	test_cmp expect actual &&
	jq -c ".children" ready.json >actual && jq -c ".children" created.json >expect && test_cmp expect actual
'

test_expect_success 'Available again: the same status (lastTransitionTime kept), no event' '
	jq -c --slurpfile r ready.json ".status = \$r[0].status" parent.json >parent.available.json &&
	run parent.available.json ready.view "{\"now\": \"2026-11-22T11:00:00Z\"}" again &&
	jq -c .status again.json >actual && jq -c .status ready.json >expect &&
	test_cmp expect actual &&
	jq -c .events again.json >actual && echo "[]" >expect && test_cmp expect actual
'

test_expect_success 'the workloads ready, a pod not yet seen running (or not seen at all, or another'"'"'s in its place): Processing, naming its workload' '
	jq -r "map(select(.kind == \"Pod\")) | sort_by(.metadata.name) | .[0] | .metadata.name, .metadata.labels.component" \
		ready.view >first && p=$(sed -n 1p first) && c=$(sed -n 2p first) &&
	jq -r --arg c "$c" ".[] | select((.kind == \"Deployment\" or .kind == \"StatefulSet\") and
		.spec.selector.matchLabels.component == \$c) | \"\(.kind) \(.metadata.name) has 0 of \(.spec.replicas) pods seen running\"" \
		ready.view >expect.msg &&
	test $(wc -l <expect.msg) = 1 &&
	jq -c --arg p "$p" "map(if .kind == \"Pod\" and .metadata.name == \$p then .status.phase = \"Pending\" else . end)" \
		ready.view >lagging.view &&
	run parent.processing.json lagging.view "{}" lagging &&
	phase lagging >actual && echo "Processing|" >expect && test_cmp expect actual &&
	jq -r ".status.conditions[0].message" lagging.json >msg && test_cmp expect.msg msg &&
	jq -e --arg p "$p" ".status.pods | length == 7 and (index(\$p) | not)" lagging.json &&
	jq -c --arg p "$p" "map(select(.kind != \"Pod\" or .metadata.name != \$p))" ready.view >missing.view &&
	run parent.processing.json missing.view "{}" missing &&
	jq -r ".status.conditions[0].message" missing.json >msg && test_cmp expect.msg msg &&
	jq -c --arg p "$p" "map(if .kind == \"Pod\" and .metadata.name == \$p
		then .metadata.name = \"left-over\" | .metadata.labels.component = \"left-over\" else . end)" \
		ready.view >other.view &&
	run parent.processing.json other.view "{}" other &&
	jq -r ".status.phase + \"|\" + .status.conditions[0].message" other.json >actual &&
	{ printf "Processing|" && cat expect.msg; } >expect && test_cmp expect actual
'

test_expect_success 'no load-balancer ingress: Processing (B18)' '
	jq -c "map(if .metadata.name == \"iot-$X\" then del(.status) else . end)" ready.view >nolb.view &&
	run parent.processing.json nolb.view "{}" nolb &&
	phase nolb >actual && echo "Processing|" >expect && test_cmp expect actual &&
	jq -r ".status.conditions[0].message" nolb.json >msg &&
	grep "Service iot-$X has no load-balancer ingress" msg
'

test_expect_success 'a rollout not yet observed is not Available (B18)' '
	jq -c "map(if .metadata.name == \"cockpit-$X\" and .kind == \"Deployment\" then .metadata.generation = 2 else . end)" ready.view >rolling.view &&
	run parent.processing.json rolling.view "{}" rolling &&
	phase rolling >actual && echo "Processing|" >expect && test_cmp expect actual &&
	jq -r ".status.conditions[0].message" rolling.json >msg &&
	grep "Deployment cockpit-$X is not updated yet" msg &&
	jq -c "map(if .kind == \"StatefulSet\" then .status.updateRevision = \"r2\" else . end)" ready.view >sts.view &&
	run parent.processing.json sts.view "{}" sts &&
	phase sts >actual && echo "Processing|" >expect && test_cmp expect actual
'

test_expect_success 'a rollout stuck on a new pod while the old one serves is not Available' '
	jq -c "map(if .metadata.name == \"cockpit-$X\" and .kind == \"Deployment\" then .status.replicas = (.spec.replicas + 1) else . end)" ready.view >stuck.view &&
	run parent.processing.json stuck.view "{}" stuck &&
	phase stuck >actual && echo "Processing|" >expect && test_cmp expect actual &&
	jq -r ".status.conditions[0].message" stuck.json >msg &&
	grep "Deployment cockpit-$X has [0-9]* pods for [0-9]* replicas: old pods are still running" msg
'

test_expect_success 'a left-over optional workload does not block Available (B14)' '
	jq -c ".spec.postgresql.size = 0 | .status.phase = \"Processing\" | .status.observedGeneration = 1" parent.json >p-nopg.json &&
	jq -c "map(if .metadata.name == \"postgresql-$X\" and .kind == \"Deployment\" then .status.availableReplicas = 0 else . end)" ready.view >pg.view &&
	run p-nopg.json pg.view "{}" nopg &&
	phase nopg >actual && echo "Available|" >expect && test_cmp expect actual
'

# invalid spec: filter, then the text the reason must contain
while IFS='|' read filter want
do
	test_expect_success "invalid spec: $want" "
		jq -c '$filter' parent.available.json >p-bad.json &&
		run p-bad.json ready.view '{}' bad &&
		jq -r .status.phase bad.json >actual && echo Failed >expect && test_cmp expect actual &&
		jq -r .status.reason bad.json >reason &&
		grep -F '$want' reason &&
		jq -c '[.status.conditions[] | [.type, .status, .reason]]' bad.json >actual &&
		echo '[[\"Available\",\"False\",\"Failed\"],[\"Progressing\",\"False\",\"InvalidSpec\"]]' >expect &&
		test_cmp expect actual &&
		jq -c '[.events[] | [.type, .reason]]' bad.json >actual &&
		echo '[[\"Warning\",\"Failed\"]]' >expect && test_cmp expect actual &&
		kept_as_given bad &&
		jq -e '(.children | length) == 21' bad.json
	"
done <<\EOT
.spec.mms.resources.limits.memory = "lots"|invalid spec.mms.resources.limits.memory "lots": is not a valid quantity
.spec.cockpit.container_port = "abc"|invalid spec.cockpit.container_port "abc": is not a port number
.spec.haproxy.container_port_https = "70000"|invalid spec.haproxy.container_port_https "70000": is not a port number
.spec.gateway.rest.size = -1|invalid spec.gateway.rest.size -1: must not be negative
.spec.imagePullPolicy = "Sometimes"|invalid spec.imagePullPolicy "Sometimes": must be Always, IfNotPresent or Never
.spec.core.size = "1"|invalid spec.core.size "1": must be a 32-bit integer
.spec.mms.amq_store_size_mb = 1.5|invalid spec.mms.amq_store_size_mb 1.5: must be an integer
.spec.gateway.mqtt.persistent_volume_claim_size = "20 Gi"|invalid spec.gateway.mqtt.persistent_volume_claim_size "20 Gi": is not a valid quantity
.spec.processing.image = ""|invalid spec.processing.image "": must not be empty
.spec.postgresql.size = -1|invalid spec.postgresql.size -1: must not be negative
.spec.core.size = -1|invalid spec.core.size -1: must not be negative
.spec.core.container_port_http = "x"|invalid spec.core.container_port_http "x": is not a port number
.spec.core_spring.persistent_volume_claim_size = "bad"|invalid spec.core_spring.persistent_volume_claim_size "bad": is not a valid quantity
EOT

# a secret never reaches the reason, the conditions or the event (whoever
# may read the IoTService or events would read it): filter, then the reason
while IFS='|' read filter want
do
	test_expect_success "invalid spec, value not shown: $want" "
		jq -c '$filter' parent.available.json >p-bad.json &&
		run p-bad.json ready.view '{}' bad &&
		jq -r .status.reason bad.json >actual && echo '$want' >expect && test_cmp expect actual &&
		! grep -F S3cr3t bad.json
	"
done <<\EOT
.spec.instance_owner_pwd = ["S3cr3t"]|invalid spec.instance_owner_pwd: must be a string
.spec.core_spring.database.dbadminpassword = {"v": "S3cr3t"}|invalid spec.core_spring.database.dbadminpassword: must be a string
.spec.cockpit.iot_connect_365.application_token = 7|invalid spec.cockpit.iot_connect_365.application_token: must be a string
.spec.processing_services = [{name: "a", properties: {"processing.http.headers": [{name: "Authorization", value: ["S3cr3t"]}]}}]|invalid spec.processing_services[0].properties.processing.http.headers[0].value: must be a string
.spec.core_spring.database = [{dbadminpassword: "S3cr3t"}]|invalid spec.core_spring.database (a list): must be an object
.spec.mms.resources = "plenty"|invalid spec.mms.resources "plenty": must be an object with limits and requests
.spec.domain_name = 12|invalid spec.domain_name 12: must be a string
.spec.mms.container_port_jms = ("1" * 70)|invalid spec.mms.container_port_jms "111111111111111111111111111111111111111111111111111111111111...: is not a port number (1-65535)
EOT

test_expect_success 'several invalid fields: one Failed status and one event naming them all, in order' '
	jq -c ".spec.mms.image = \"\" | .spec.core.size = \"1\" | .spec.cockpit.container_port = \"abc\"
		| .spec.imagePullPolicy = \"Sometimes\" | .spec.core_spring.database.dbadminpassword = 7
		| .spec.mms.resources.limits = {memory: \"lots\", cpu: \"-1\"}" parent.available.json >p-many.json &&
	run p-many.json ready.view "{}" many &&
	jq -r .status.phase many.json >actual && echo Failed >expect && test_cmp expect actual &&
	cat >expect <<-\EOT &&
	invalid spec.mms.resources.limits.memory "lots": is not a valid quantity; spec.mms.resources.limits.cpu "-1": is not a valid quantity; spec.core.size "1": must be a 32-bit integer; spec.core_spring.database.dbadminpassword: must be a string; spec.mms.image "": must not be empty; spec.cockpit.container_port "abc": is not a port number (1-65535); spec.imagePullPolicy "Sometimes": must be Always, IfNotPresent or Never
	EOT
	jq -r .status.reason many.json >actual && test_cmp expect actual &&
	jq -r "[.status.conditions[].message] | unique[]" many.json >actual && test_cmp expect actual &&
	jq -c "[.events[] | [.type, .reason]]" many.json >actual &&
	echo "[[\"Warning\",\"Failed\"]]" >expect.ev && test_cmp expect.ev actual &&
	jq -r ".events[0].message" many.json >actual && test_cmp expect actual &&
	kept_as_given many
'

test_expect_success 'a field that cannot be decoded is named once, not again by the checks' '
	jq -c ".spec.mms.image = 5 | .spec.haproxy.container_port_http = 80" parent.available.json >p-once.json &&
	run p-once.json ready.view "{}" once &&
	echo "invalid spec.mms.image 5: must be a string; spec.haproxy.container_port_http 80: must be a string" >expect &&
	jq -r .status.reason once.json >actual && test_cmp expect actual
'

test_expect_success 'a bad name and a bad field: both named' '
	jq -c ".metadata.name = \"a-name-that-is-far-too-long-for-a-namespace-once-prefixed-xx\" | .spec.core.size = -1" parent.available.json >p-both.json &&
	run p-both.json ready.view "{}" both &&
	jq -r .status.reason both.json >actual &&
	grep "^invalid metadata.name \"a-name-that-is-far-too-long-for-a-namespace-once-prefixed-xx\": gives the instance namespace .*; spec.core.size -1: must not be negative\$" actual
'

test_expect_success 'more invalid fields than are listed: the first 25, then how many more' '
	jq -c ".spec.processing_services = [range(30) | {name: 1}]" parent.available.json >p-lots.json &&
	run p-lots.json ready.view "{}" lots &&
	jq -r .status.reason lots.json >reason &&
	grep -o "spec.processing_services\[[0-9]*\].name 1: must be a string" reason >names &&
	test "$(wc -l <names)" -eq 25 &&
	grep "; spec.processing_services\[24\].name 1: must be a string; and 5 more invalid fields\$" reason
'

# A real server refuses a Secret whose data exceeds 1 MiB: a spec that would
# render one is Failed before anything is applied (the first reconcile of a new
# IoTService creates nothing, not even its namespace; an existing one is kept).
test_expect_success 'a 2 MiB domain_name: Failed naming the config Secret, its size and the field; nothing applied' '
	jq -c ".spec.domain_name = (\"a\" * 2097152)" parent.available.json >p-big.json &&
	run p-big.json ready.view "{}" big &&
	jq -r .status.reason big.json >reason &&
	grep "^invalid spec: renders the Secret $I/iotservice-$X with at least [0-9]* bytes of data, more than the 1048576 bytes (1 MiB) a Secret may hold; its longest field is spec.domain_name (2097152 bytes)\$" reason &&
	n=$(sed "s/.* with at least \([0-9]*\) bytes.*/\1/" reason) &&
	test "$n" -gt 2097152 && test "$n" -lt 2200000 &&
	jq -c "[.status.phase, [.status.conditions[] | [.type, .status, .reason]], [.events[] | [.type, .reason]]]" big.json >actual &&
	echo "[\"Failed\",[[\"Available\",\"False\",\"Failed\"],[\"Progressing\",\"False\",\"InvalidSpec\"]],[[\"Warning\",\"Failed\"]]]" >expect &&
	test_cmp expect actual &&
	kept_as_given big &&
	jq -c ".spec.domain_name = (\"a\" * 2097152)" parent.json >p-bignew.json &&
	run p-bignew.json /dev/null "{}" bignew &&
	jq -c "[.children, .status.phase]" bignew.json >actual &&
	echo "[[],\"Failed\"]" >expect && test_cmp expect actual &&
	jq -r .status.reason bignew.json >actual && test_cmp reason actual
'

test_expect_success 'a spec just under the limit is not refused for its size' '
	jq -c ".spec.domain_name = (\"a\" * 1000000)" parent.json >p-under.json &&
	run p-under.json /dev/null "{}" under &&
	jq -c "[[.children[] | .kind], .status]" under.json >actual &&
	echo "[[\"Namespace\"],null]" >expect && test_cmp expect actual
'

test_expect_success 'an image of 2 MiB (not in config.yml): the Deployment that carries it named, over what etcd stores' '
	jq -c ".spec.cockpit.image = (\"r/\" + \"a\" * 2097152)" parent.available.json >p-bigimg.json &&
	run p-bigimg.json ready.view "{}" bigimg &&
	jq -r .status.reason bigimg.json >reason &&
	grep "^invalid spec: renders the Deployment $I/cockpit-$X with at least [0-9]* bytes of text, more than the 1572864 bytes (1.5 MiB) an object may take in etcd; its longest field is spec.cockpit.image (2097154 bytes)\$" reason &&
	kept_as_given bigimg
'

test_expect_success 'the spec fixed: Failed is left' '
	jq -c ".spec.cockpit.container_port = \"abc\"" parent.available.json >p-bad.json &&
	run p-bad.json ready.view "{}" bad &&
	jq -c --slurpfile b bad.json ".status = \$b[0].status | .metadata.generation = 2" parent.json >p-fixed.json &&
	run p-fixed.json ready.view "{}" fixed &&
	phase fixed >actual && echo "Processing|" >expect && test_cmp expect actual &&
	jq -c --slurpfile b fixed.json ".status = \$b[0].status | .metadata.generation = 2" parent.json >p-fixed2.json &&
	run p-fixed2.json ready.view "{}" fixed2 &&
	phase fixed2 >actual && echo "Available|" >expect && test_cmp expect actual
'

test_expect_success 'a failed apply reported by kapply: Failed with its reason' '
	run parent.processing.json ready.view "{\"errors\": [{\"op\": \"apply\", \"ref\": {\"apiVersion\": \"apps/v1\", \"kind\": \"Deployment\", \"namespace\": \"$I\", \"name\": \"cockpit-$X\"}, \"code\": 422, \"reason\": \"Invalid\", \"message\": \"spec.template.spec.containers[0].image: Required value\"}]}" applyfail &&
	phase applyfail >actual &&
	echo "Failed|apply of Deployment $I/cockpit-$X failed: 422 Invalid: spec.template.spec.containers[0].image: Required value" >expect &&
	test_cmp expect actual &&
	jq -c ".children" applyfail.json >actual && jq -c ".children" created.json >expect && test_cmp expect actual
'

test_expect_success 'a PVC size change the API forbids: Failed naming the field, the rest reconciled (B12)' '
	jq -c ".spec.mms.persistent_volume_claim_size = \"30Gi\" | .spec.cockpit.image = \"new:1\"" parent.available.json >p-pvc.json &&
	run p-pvc.json ready.view "{}" pvc &&
	jq -r .status.phase pvc.json >actual && echo Failed >expect && test_cmp expect actual &&
	jq -r .status.reason pvc.json >reason &&
	grep "StatefulSet messaging-$X: volumeClaimTemplates cannot change (storage 10Gi to 30Gi); the field is spec.mms.persistent_volume_claim_size" reason &&
	jq -r ".children[] | select(.metadata.name == \"messaging-$X\" and .kind == \"StatefulSet\") | .spec.volumeClaimTemplates[0].spec.resources.requests.storage" pvc.json >actual &&
	echo 10Gi >expect && test_cmp expect actual &&
	jq -r ".children[] | select(.metadata.name == \"cockpit-$X\" and .kind == \"Deployment\") | .spec.template.spec.containers[0].image" pvc.json >actual &&
	echo new:1 >expect && test_cmp expect actual
'

test_expect_success 'a PVC size stored in another form of the same quantity is no change' '
	jq -c "map(if .kind == \"StatefulSet\" and (.metadata.name | startswith(\"messaging-\")) then
		.spec.volumeClaimTemplates[0] |= (.spec.resources.requests.storage = \"10240Mi\" | .status = {phase: \"Bound\"})
		else . end)" ready.view >ready-mi.view &&
	run parent.available.json ready-mi.view "{}" pvcsame &&
	jq -r .status.phase pvcsame.json >actual && echo Available >expect && test_cmp expect actual
'

test_expect_success 'progress deadline: Processing for too long goes Failed naming what is not ready' '
	jq -c --slurpfile s starting.json ".status = \$s[0].status" parent.json >p-slow.json &&
	run p-slow.json created.view "{\"now\": \"2026-11-22T10:14:00Z\"}" slow1 &&
	phase slow1 >actual && echo "Processing|" >expect && test_cmp expect actual &&
	jq -c .resyncAfterSeconds slow1.json >actual && echo 60 >expect && test_cmp expect actual &&
	run p-slow.json created.view "{\"now\": \"2026-11-22T10:15:01Z\"}" slow2 &&
	jq -r .status.reason slow2.json >reason &&
	grep "^progress deadline exceeded: Deployment cockpit-$X has 0/1 ready" reason &&
	jq -c "[.status.phase, .status.conditions[1].reason, .status.conditions[1].lastTransitionTime]" slow2.json >actual &&
	echo "[\"Failed\",\"ProgressDeadlineExceeded\",\"2026-11-22T10:15:01Z\"]" >expect && test_cmp expect actual &&
	jq -c --slurpfile s slow2.json ".status = \$s[0].status" parent.json >p-slow3.json &&
	run p-slow3.json created.view "{\"now\": \"2026-11-22T10:16:00Z\"}" slow3 &&
	phase slow3 >actual && jq -r "\"Failed|\(.status.reason)\"" slow2.json >expect && test_cmp expect actual &&
	jq -c .events slow3.json >actual && echo "[]" >expect && test_cmp expect actual &&
	run p-slow3.json ready.view "{\"now\": \"2026-11-22T10:17:00Z\"}" slow4 &&
	phase slow4 >actual && echo "Available|" >expect && test_cmp expect actual
'

test_expect_success 'parallel updates: the 31st rolling instance waits with UpdateQueued' '
	jq -c ".metadata.generation = 3 | .spec.cockpit.image = \"new:1\"" parent.available.json >p-upd.json &&
	others=$(jq -nc "[range(30) | \"devawsk8s/other-\(.)\"] + [\"devawsk8s/$X\"]") &&
	run p-upd.json ready.view "{\"aggregates\": {\"rolling\": $others}}" queued &&
	jq -c "[.status.phase, .status.observedGeneration, (.status.conditions[] | [.type, .status, .reason]), .resyncAfterSeconds, [.events[].reason]]" queued.json >actual &&
	echo "[\"Processing\",3,[\"Available\",\"True\",\"AllChildrenReady\"],[\"Progressing\",\"False\",\"UpdateQueued\"],30,[\"UpdateQueued\"]]" >expect &&
	test_cmp expect actual &&
	kept_as_given queued &&
	# (an apply failed meanwhile: Failed, and its Warning, not UpdateQueued)
	run p-upd.json ready.view "{\"aggregates\": {\"rolling\": $others}, \"errors\": [{\"op\": \"apply\", \"ref\": {\"apiVersion\": \"apps/v1\", \"kind\": \"Deployment\", \"namespace\": \"$I\", \"name\": \"cockpit-$X\"}, \"code\": 422, \"reason\": \"Invalid\", \"message\": \"no\"}]}" qfail &&
	jq -c "[.status.phase, [.events[] | [.type, .reason]]]" qfail.json >actual &&
	echo "[\"Failed\",[[\"Warning\",\"Failed\"]]]" >expect &&
	test_cmp expect actual &&
	jq -c --slurpfile q queued.json ".status = \$q[0].status" p-upd.json >p-upd2.json &&
	others=$(jq -nc "[range(29) | \"devawsk8s/other-\(.)\"]") &&
	run p-upd2.json ready.view "{\"aggregates\": {\"rolling\": $others}}" admitted &&
	jq -c "[.status.phase, (.status.conditions[1] | [.status, .reason])]" admitted.json >actual &&
	echo "[\"Processing\",[\"True\",\"Updating\"]]" >expect && test_cmp expect actual &&
	jq -r ".children[] | select(.metadata.name == \"cockpit-$X\" and .kind == \"Deployment\") | .spec.template.spec.containers[0].image" admitted.json >actual &&
	echo new:1 >expect && test_cmp expect actual &&
	jq -c --slurpfile a admitted.json ".status = \$a[0].status" p-upd.json >p-upd3.json &&
	jq -e "(.status.conditions // []) | any(.type == \"Progressing\" and .status == \"True\" and .reason == \"Updating\")" p-upd3.json
'

test_expect_success 'an update below the limit is admitted at once' '
	jq -c ".metadata.generation = 3 | .spec.cockpit.image = \"new:1\"" parent.available.json >p-upd.json &&
	run p-upd.json ready.view "{}" direct &&
	jq -c "[.status.phase, (.status.conditions[1] | [.status, .reason])]" direct.json >actual &&
	echo "[\"Processing\",[\"True\",\"Updating\"]]" >expect && test_cmp expect actual
'

test_expect_success 'deletion: all but the namespace kept as they are, not finalized while it exists' '
	jq -c ".metadata.deletionTimestamp = \"2026-11-22T10:00:00Z\"" parent.available.json >p-del.json &&
	run p-del.json ready.view "{\"finalizing\": true}" del1 &&
	jq -c "[(.children | length), (.children | map(select(.kind == \"Namespace\")) | length), .status, .finalized, [.events[].reason]]" del1.json >actual &&
	echo "[20,0,null,false,[\"Deleting\"]]" >expect && test_cmp expect actual &&
	jq -c "[.children[] | select(.kind == \"Namespace\")]" del1.json >actual && echo "[]" >expect &&
	test_cmp expect actual &&
	jq -c ".children[\"Namespace.v1\"] = {}" del1.in.json >del1.nons.in.json &&
	cp del1.json del1.nons.json && kept_as_given del1.nons
'

test_expect_success 'deletion: finalized once the namespace is terminating or gone (B22)' '
	jq -c "map(if .kind == \"Namespace\" then .metadata.deletionTimestamp = \"2026-11-22T10:00:01Z\" | .status.phase = \"Terminating\" else . end)" ready.view >term.view &&
	run p-del.json term.view "{\"finalizing\": true}" del2 &&
	jq -c "[(.children | length), .finalized, .events]" del2.json >actual &&
	echo "[20,true,[]]" >expect && test_cmp expect actual &&
	run p-del.json /dev/null "{\"finalizing\": true}" del3 &&
	jq -c "[.children, .finalized]" del3.json >actual &&
	echo "[[],true]" >expect && test_cmp expect actual
'

# The instance namespace when it is not ours (docs/iotservice-api.md, the instance namespace).
test_expect_success 'a namespace of that name made by someone else (its create refused): Failed naming it, its create alone asked again' '
	run parent.json /dev/null "{\"errors\": [{\"op\": \"create\", \"ref\": {\"apiVersion\": \"v1\", \"kind\": \"Namespace\", \"name\": \"$I\"}, \"code\": 409, \"reason\": \"AlreadyExists\", \"message\": \"namespaces \\\"$I\\\" already exists\"}]}" taken &&
	phase taken >actual &&
	echo "Failed|namespace $I exists and is not this operator'"'"'s (made by someone else, or its labels were removed): nothing is written into it and it is never deleted; the instance proceeds once it is gone" >expect &&
	test_cmp expect actual &&
	jq -c "[.children[] | [.kind, .metadata.name]], [.events[] | [.type, .reason]], .status.conditions[1].reason" taken.json >actual &&
	cat >expect <<-EOT &&
	[["Namespace","$I"]]
	[["Warning","Failed"]]
	"NamespaceNotOwned"
	EOT
	test_cmp expect actual
'

test_expect_success 'another create error of the namespace: Failed with it, its create asked again' '
	run parent.json /dev/null "{\"errors\": [{\"op\": \"create\", \"ref\": {\"apiVersion\": \"v1\", \"kind\": \"Namespace\", \"name\": \"$I\"}, \"code\": 403, \"reason\": \"Forbidden\", \"message\": \"no\"}]}" cfail &&
	phase cfail >actual &&
	echo "Failed|create of Namespace $I failed: 403 Forbidden: no" >expect &&
	test_cmp expect actual &&
	jq -c "[.children[] | .kind]" cfail.json >actual &&
	echo "[\"Namespace\"]" >expect && test_cmp expect actual
'

test_expect_success 'a namespace with the labels but another IoTService uid: Failed, nothing written or pruned' '
	jq -c "map(if .kind == \"Namespace\" then .metadata.annotations[\"cp.iot.sap/iotservice-uid\"] = \"uid-other\" else . end)" ready.view >other.view &&
	run parent.available.json other.view "{}" foreign &&
	phase foreign >actual &&
	echo "Failed|namespace $I carries this operator'"'"'s labels but was not created for this IoTService (it lacks the cp.iot.sap/iotservice-uid annotation with its uid uid-iot): nothing is written into it and it is never deleted; the instance proceeds once it is gone" >expect &&
	test_cmp expect actual &&
	kept_as_given foreign
'

# Made before the operator marked its namespaces (an upgrade): the reason says how an admin marks it.
test_expect_success 'a namespace with the labels and no uid annotation at all: not ours either; the reason names the annotation and how to set it' '
	jq -c "map(if .kind == \"Namespace\" then del(.metadata.annotations) else . end)" ready.view >noann.view &&
	run parent.available.json noann.view "{}" noann &&
	phase noann >noann.phase &&
	echo "Failed|namespace $I carries this operator'"'"'s labels but no cp.iot.sap/iotservice-uid annotation (made by an operator older than it, or labelled by hand): nothing is written into it and it is never deleted; if it is this IoTService'"'"'s, mark it so: kubectl annotate namespace $I cp.iot.sap/iotservice-uid=uid-iot; else the instance proceeds once it is gone" >expect &&
	test_cmp expect noann.phase &&
	jq -c "[.events[] | [.type, .reason]], .status.conditions[1].reason" noann.json >actual &&
	cat >expect <<-EOT &&
	[["Warning","Failed"]]
	"NamespaceNotOwned"
	EOT
	test_cmp expect actual &&
	kept_as_given noann &&
	# an empty annotation is no uid either
	jq -c "map(if .kind == \"Namespace\" then .metadata.annotations = {} else . end)" ready.view >emptyann.view &&
	run parent.available.json emptyann.view "{}" emptyann &&
	phase emptyann >emptyann.phase &&
	test_cmp noann.phase emptyann.phase
'

test_expect_success 'the namespace marked so, as the reason says: ours, written to again' '
	jq -c "map(if .kind == \"Namespace\" then .metadata.annotations = {\"cp.iot.sap/iotservice-uid\": \"uid-iot\"} else . end)" \
		noann.view >marked.view &&
	run parent.available.json marked.view "{}" marked &&
	phase marked >actual &&
	echo "Available|" >expect && test_cmp expect actual
'

test_expect_success 'an earlier IoTService'"'"'s namespace still terminating: Processing, waited for, nothing written' '
	jq -c "map(if .kind == \"Namespace\" then .metadata.annotations[\"cp.iot.sap/iotservice-uid\"] = \"uid-other\" | .metadata.deletionTimestamp = \"2026-11-22T09:59:00Z\" | .status.phase = \"Terminating\" else . end)" ready.view >leaving.view &&
	run parent.json leaving.view "{}" leaving &&
	phase leaving >actual &&
	echo "Processing|" >expect && test_cmp expect actual &&
	jq -r ".status.conditions[1].message" leaving.json >actual &&
	echo "waiting for namespace $I, left by an earlier IoTService of this name, to be deleted" >expect &&
	test_cmp expect actual &&
	kept_as_given leaving
'

test_expect_success 'deletion: a namespace not ours is kept, never deleted, and the IoTService finalized at once' '
	jq -c ".metadata.deletionTimestamp = \"2026-11-22T10:00:00Z\"" parent.available.json >p-del-other.json &&
	run p-del-other.json other.view "{\"finalizing\": true}" delother &&
	jq -c "[(.children | map(select(.kind == \"Namespace\")) | length), .finalized]" delother.json >actual &&
	echo "[1,true]" >expect && test_cmp expect actual &&
	kept_as_given delother
'

test_done
