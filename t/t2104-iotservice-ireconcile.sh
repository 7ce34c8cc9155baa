#!/bin/sh
test_description='pipeline/iotservice through ireconcile: recorded-style event files, golden operations'
. "${0%/*}/test-lib.sh"

command -v ireconcile >/dev/null || test_skip_all 'ireconcile not built'

# reconcile NAME: the operations ireconcile writes for NAME.in.jsonl
reconcile () {
	OPERATOR_NAME=devawsk8s ireconcile --now 2026-11-22T10:05:00Z "$PROJECT_ROOT/pipeline/iotservice" \
		<"$FIXTURES/$1.in.jsonl" >"$1.out" 2>"$1.err"
}

# ops NAME: "op kind name" of each operation, in order
ops () {
	jq -r '"\(.op) \(.object.kind // .event.involvedObject.kind // "-") \(.object.metadata.name // .event.reason // "-")"' "$1.out"
}

for f in "$FIXTURES"/*.in.jsonl
do
	name=$(basename "$f" .in.jsonl)
	test_expect_success "$name: operations as recorded (golden)" "
		reconcile $name &&
		test_no_sanitizer_report $name.err &&
		test_cmp_json '$FIXTURES/$name.expect.jsonl' $name.out
	"
done

test_expect_success '01-create: the finalizer first, nothing else before it is stored' '
	ops 01-create >actual &&
	echo "patch IoTService example-iotservice" >expect &&
	test_cmp expect actual
'

test_expect_success '01-finalized: the finalizer stored, the instance namespace created (never applied over one), nothing else' '
	ops 01-finalized >actual &&
	echo "create Namespace devawsk8s-example-iotservice" >expect &&
	test_cmp expect actual &&
	jq -c ".object.metadata.annotations[\"cp.iot.sap/iotservice-uid\"]" 01-finalized.out >actual &&
	echo "\"uid-iot\"" >expect && test_cmp expect actual
'

test_expect_success '01-namespace: the namespace seen, ours: every other child once (its RoleBinding first), then Processing' '
	ops 01-namespace >actual &&
	test $(grep -c "^apply " actual) = 20 &&
	! grep -v "^apply\|^status\|^event" actual &&
	sed -n "21,22p" actual >tail &&
	cat >expect <<-\EOT &&
	status IoTService example-iotservice
	event IoTService Processing
	EOT
	test_cmp expect tail &&
	sed -n 1p actual >first &&
	printf "apply RoleBinding iot-operator-instance\n" >expect &&
	test_cmp expect first
'

test_expect_success '03-ready: children ready moves Processing to Available, nothing applied' '
	ops 03-ready >actual &&
	printf "status IoTService example-iotservice\nevent IoTService Available\n" >expect &&
	test_cmp expect actual &&
	jq -r "select(.op == \"status\") | .object.status | [.phase, (.pods | length), .observedGeneration] | @tsv" 03-ready.out >actual &&
	printf "Available\t8\t1\n" >expect && test_cmp expect actual
'

test_expect_success '04-steady: a stream with nothing new writes nothing at all' '
	test_cmp /dev/null 04-steady.out
'

# (a child is read in part as it comes, what the program sees of it; it is
# compared from its text)
test_expect_success '04-steady, then a Deployment whose status changed where the program does not look: nothing; edited there (its image): applied back' '
	dep=$(jq -c "select(.object.kind == \"Deployment\")" "$FIXTURES/04-steady.in.jsonl" | head -n 1) &&
	{ cat "$FIXTURES/04-steady.in.jsonl" &&
	  echo "$dep" | jq -c ".type = \"MODIFIED\" | .object.metadata.resourceVersion = \"900\"
		| .object.status.conditions = [{type: \"Available\", status: \"True\"}]"
	} >status.in.jsonl &&
	{ cat status.in.jsonl &&
	  echo "$dep" | jq -c ".type = \"MODIFIED\" | .object.metadata.resourceVersion = \"901\"
		| .object.status.conditions = [{type: \"Available\", status: \"True\"}]
		| .object.spec.template.spec.containers[0].image = \"example.org/edited:1\""
	} >drift.in.jsonl &&
	for f in status drift; do
		OPERATOR_NAME=devawsk8s ireconcile --now 2026-11-22T10:05:00Z "$PROJECT_ROOT/pipeline/iotservice" \
			<$f.in.jsonl >$f.out 2>$f.err &&
		test_no_sanitizer_report $f.err || return 1
	done &&
	test_cmp /dev/null status.out &&
	jq -r "\"\(.op) \(.object.kind) \(.object.metadata.name) \(.object.spec.template.spec.containers[0].image)\"" \
		drift.out >actual &&
	echo "apply Deployment $(echo "$dep" | jq -r .object.metadata.name) $(echo "$dep" |
		jq -r ".object.spec.template.spec.containers[0].image")" >expect &&
	test_cmp expect actual
'

test_expect_success 'an event line malformed outside its object (read in part) is skipped as when read whole' '
	dep=$(jq -c "select(.object.kind == \"Deployment\")" "$FIXTURES/04-steady.in.jsonl" | head -n 1) &&
	{ cat "$FIXTURES/04-steady.in.jsonl" &&
	  echo "$dep" | jq -c ".type = \"MODIFIED\" | .object.metadata.resourceVersion = \"901\"
		| .object.spec.template.spec.containers[0].image = \"example.org/edited:1\"" | sed "s/}\$/,\"x\":tru}/"
	} >badtail.in.jsonl &&
	OPERATOR_NAME=devawsk8s ireconcile --now 2026-11-22T10:05:00Z "$PROJECT_ROOT/pipeline/iotservice" \
		<badtail.in.jsonl >badtail.out 2>badtail.err &&
	test_no_sanitizer_report badtail.err &&
	test_cmp /dev/null badtail.out &&
	jq -r "select(.level == \"warn\") | .msg" badtail.err >actual &&
	grep -q "^line $(wc -l <badtail.in.jsonl), column [0-9]*: .*; skipped\$" actual
'

test_expect_success '05-edit-image: one Deployment applied, Processing for generation 2' '
	ops 05-edit-image >actual &&
	cat >expect <<-\EOT &&
	apply Deployment cockpit-example-iotservice
	status IoTService example-iotservice
	event IoTService Processing
	EOT
	test_cmp expect actual
'

test_expect_success '06-core: core created, core-spring and processing pruned with uid preconditions' '
	ops 06-core >actual &&
	grep "^apply Deployment core-example-iotservice\$" actual &&
	grep "^apply Service core-example-iotservice\$" actual &&
	grep "^delete" actual | sort >deletes &&
	cat >expect <<-\EOT &&
	delete Deployment core-spring-example-iotservice
	delete Deployment processing-example-iotservice
	delete Service core-spring-example-iotservice
	delete Service processing-example-iotservice
	EOT
	test_cmp expect deletes &&
	jq -r "select(.op == \"delete\") | .object.metadata.uid" 06-core.out | sort >uids &&
	printf "uid-Deployment-core-spring-example-iotservice\nuid-Deployment-processing-example-iotservice\nuid-Service-core-spring-example-iotservice\nuid-Service-processing-example-iotservice\n" >expect &&
	test_cmp expect uids
'

test_expect_success '07-prune: postgresql size 0 and network policies off delete exactly those' '
	ops 07-prune >actual &&
	grep "^delete" actual | sort >deletes &&
	cat >expect <<-\EOT &&
	delete Deployment postgresql-example-iotservice
	delete NetworkPolicy deny-not-instance-example-iotservice
	delete Service postgresql-example-iotservice
	EOT
	test_cmp expect deletes &&
	! grep "^apply" actual
'

test_expect_success '08-invalid: Failed naming the field, no child written or deleted' '
	ops 08-invalid >actual &&
	printf "status IoTService example-iotservice\nevent IoTService Failed\n" >expect &&
	test_cmp expect actual &&
	jq -r "select(.op == \"status\") | .object.status.reason" 08-invalid.out >actual &&
	echo "invalid spec.cockpit.container_port \"abc\": is not a port number (1-65535)" >expect &&
	test_cmp expect actual
'

test_expect_success '09-delete: only the namespace is deleted, the finalizer stays' '
	ops 09-delete >actual &&
	printf "delete Namespace devawsk8s-example-iotservice\nevent IoTService Deleting\n" >expect &&
	test_cmp expect actual
'

test_expect_success '10-delete-terminating: the namespace terminating, only our finalizer is removed' '
	ops 10-delete-terminating >actual &&
	echo "patch IoTService example-iotservice" >expect &&
	test_cmp expect actual &&
	jq -c .patch 10-delete-terminating.out >actual &&
	echo "[{\"op\":\"test\",\"path\":\"/metadata/finalizers/0\",\"value\":\"com.sap.iotservices/namespace-dropper\"},{\"op\":\"remove\",\"path\":\"/metadata/finalizers/0\"}]" >expect &&
	test_cmp expect actual
'

# adopt: false (program.yml): a namespace seen is applied to that very object, its uid in the
# apply, so that one deleted and made again under its name by someone else is refused (422)
test_expect_success '16-namespace-applied: the namespace applied again, to the one seen (its uid in the apply), nothing else' '
	ops 16-namespace-applied >actual &&
	echo "apply Namespace devawsk8s-example-iotservice" >expect &&
	test_cmp expect actual &&
	jq -r ".object.metadata.uid" 16-namespace-applied.out >actual &&
	echo uid-Namespace-devawsk8s-example-iotservice >expect &&
	test_cmp expect actual
'

CONFIG_APPLIES="apply Deployment cockpit-example-iotservice
apply Deployment core-spring-example-iotservice
apply Deployment gateway-rest-example-iotservice
apply Deployment haproxy-example-iotservice
apply Deployment processing-example-iotservice
apply Secret iotservice-example-iotservice
apply StatefulSet gateway-mqtt-example-iotservice
apply StatefulSet messaging-example-iotservice"

# edit NAME EXPECTED-APPLIES: exactly these applies, no delete, Processing
check_edit () {
	ops "$1" >actual &&
	grep -v "^apply" actual >rest &&
	printf "status IoTService example-iotservice\nevent IoTService Processing\n" >expect &&
	test_cmp expect rest &&
	grep "^apply" actual | sort >applies &&
	printf "%s\n" "$2" | sort >expect &&
	test_cmp expect applies
}

test_expect_success '11-edit-size: only the StatefulSet' '
	check_edit 11-edit-size "apply StatefulSet gateway-mqtt-example-iotservice"
'

test_expect_success '12-edit-resources: only the Deployment, quantities canonical' '
	check_edit 12-edit-resources "apply Deployment haproxy-example-iotservice" &&
	jq -c "select(.op == \"apply\") | .object.spec.template.spec.containers[0].resources" 12-edit-resources.out >actual &&
	echo "{\"limits\":{\"memory\":\"1Gi\",\"cpu\":\"500m\"}}" >expect &&
	test_cmp expect actual
'

test_expect_success '13-edit-port: the config, the workloads mounting it and the Service' '
	check_edit 13-edit-port "$CONFIG_APPLIES
apply Service cockpit-example-iotservice"
'

test_expect_success '14-edit-config: the config Secret and the checksum of the workloads mounting it' '
	check_edit 14-edit-config "$CONFIG_APPLIES" &&
	jq -r "select(.op == \"apply\" and .object.kind == \"Secret\") | .object.data[\"config.yml\"]" 14-edit-config.out | base64 -d >config.yml &&
	grep "^  domain_name: other.example\$" config.yml &&
	sum=$(md5sum <config.yml | cut -d" " -f1) &&
	jq -r "select(.op == \"apply\" and .object.spec.template) | .object.spec.template.metadata.annotations[\"checksum/config\"]" 14-edit-config.out | sort -u >actual &&
	echo "$sum" >expect && test_cmp expect actual
'

# wait_statuses FILE N: until FILE holds N status lines (at most 30 s)
wait_statuses () {
	test_wait_for 30 test_has_ops "$1" status "$2" || :
}

# reconcile_fifo NAME [ARGS]: ireconcile -v ARGS reads NAME.fifo into NAME.out and NAME.err
# (test bodies run in subshells: the export stays in the test). The tests of statuses in flight
# give --status-interval 0, so that every status the program derives is written at once: what
# they follow is the bookkeeping of those on their way; the interval has tests of its own.
reconcile_fifo () {
	OPERATOR_NAME=devawsk8s
	export OPERATOR_NAME
	rf_name=$1
	shift
	test_ireconcile_fifo "$rf_name" --now 2026-11-22T10:05:00Z "$@" "$PROJECT_ROOT/pipeline/iotservice"
}

# stored OUT N RV [PHASE [INPUT]]: the primary (its last state in INPUT,
# 01-namespace's by default) as the API server stores it once the Nth
# status in OUT landed (at resourceVersion RV); with PHASE, someone else's.
stored () {
	jq -c -s --slurpfile st "$1" --argjson n "$2" --arg rv "$3" --arg phase "${4:-}" \
		"[.[] | select(.object.kind == \"IoTService\" and .type != \"BOOKMARK\")] | last
		| .type = \"MODIFIED\" | .object.metadata.resourceVersion = \$rv
		| .object.status = ([\$st[] | select(.op == \"status\")][\$n - 1].object.status)
		| if \$phase != \"\" then .object.status.phase = \$phase else . end" \
		"${5:-$FIXTURES/01-namespace.in.jsonl}"
}

# seen_back FILE N: N primary events of ours came back as the program was
# told they would (ireconcile's log): not reconciled.
seen_back () {
	test "$(grep -c "as its last reconcile saw it; not reconciled" "$1")" -ge "$2"
}

# The children the first reconcile applied, as the API server sends them back
# once applied (they were created together: one reconcile, once the last is in).
children_added () {
	jq -c -n "[inputs | select(.op == \"apply\")] | to_entries[]
		| {type: \"ADDED\", object: (.value.object | .metadata.uid = \"u-\\(.key)\"
			| .metadata.resourceVersion = \"\\(50 + .key)\")}" \
		"$FIXTURES/01-namespace.expect.jsonl"
}

# A status written and not yet seen back is what the program sees: a
# reconcile in between (here its children appearing) may write a newer
# status, but does not announce the phase a second time.
test_expect_success 'a status in flight: the next reconcile writes no second Processing event' '
	mkfifo inflight.fifo &&
	{ ( cat "$FIXTURES/01-namespace.in.jsonl"
	    # the first reconcile done (its status written) before its children come
	    wait_statuses inflight.out 1
	    children_added
	  ) >inflight.fifo & } &&
	reconcile_fifo inflight --status-interval 0 &&
	test_reconciled inflight.err statuses events >actual &&
	cat >expect <<-\EOT &&
	[1,1]
	[1,0]
	EOT
	test_cmp expect actual &&
	jq -r "select(.op == \"status\") | .object.status.conditions[] | select(.type == \"Progressing\") | .lastTransitionTime" \
		inflight.out | sort -u >actual &&
	test $(wc -l <actual) = 1
'

# A status that changes nothing of where the instance stands (only a message: the RoleBinding is no
# longer missing) waits for --status-interval after the last one written, or for the end of the input;
# then the latest is written.
calm_input () {
	cat "$FIXTURES/01-namespace.in.jsonl"
	wait_statuses "$1.out" 1
	stored "$1.out" 1 102
	test_wait_for 30 test_has_reconciles "$1.err" 2
	children_added
	test_wait_for 30 test_has_reconciles "$1.err" 3
}

test_expect_success 'a status saying nothing new (a message) waits for --status-interval, or the end of the input' '
	mkfifo calm.fifo &&
	{ ( calm_input calm; sleep 0.5; cp calm.out calm.before ) >calm.fifo & } &&
	reconcile_fifo calm --status-interval 1h &&
	test "$(grep -c "\"op\":\"status\"" calm.before)" = 1 &&
	test_reconciled calm.err statuses events >actual &&
	cat >expect <<-\EOT &&
	[1,1]
	[0,0]
	[0,0]
	[1,0]
	EOT
	test_cmp expect actual &&
	jq -c "select(.op == \"status\") | .object.status" calm.out | tail -n 1 >last &&
	! grep "RoleBinding" last &&
	test "$(jq -r .phase last)" = Processing
'

test_expect_success '... and is written once the interval is over, the latest' '
	mkfifo calm2.fifo &&
	{ ( calm_input calm2; wait_statuses calm2.out 2; sleep 0.5 ) >calm2.fifo & } &&
	reconcile_fifo calm2 --status-interval 1s &&
	jq -c "select(.op == \"status\") | .object.status" calm2.out >statuses &&
	test "$(wc -l <statuses)" = 2 &&
	sed -n 1p statuses | grep "RoleBinding iot-operator-instance is missing" &&
	sed -n 2p statuses >second && ! grep "RoleBinding" second &&
	test "$(jq -r .phase second)" = Processing &&
	test "$(grep -c "\"op\":\"event\"" calm2.out)" = 1
'

# The limit on parallel updates (docs/iotservice-api.md) when instances are edited together (an upgrade of all):
# their reconciles run before any of their statuses is stored, so the
# limit counts the statuses sent, not only those stored.
test_expect_success 'instances edited together: at most MAX_PARALLEL_UPDATES start rolling' '
	F="$FIXTURES/04-steady.in.jsonl" &&
	{ grep -v -e "\"kind\":\"IoTService\"" "$F"
	  for x in a b c
	  do
		grep "\"kind\":\"IoTService\",\"metadata\":{\"name\"" "$F" |
		jq -c --arg x $x ".object.metadata.name = \$x | .object.metadata.uid = \"uid-\" + \$x"
		# (its own instance namespace, made for it)
		grep "\"kind\":\"Namespace\"" "$F" |
		jq -c --arg x $x ".object.metadata.name = \"devawsk8s-\" + \$x | .object.metadata.uid = \"uid-ns-\" + \$x
			| .object.metadata.labels[\"cp.iot.sap/instance\"] = \$x | .object.metadata.labels.instance = \$x
			| .object.metadata.annotations[\"cp.iot.sap/iotservice-uid\"] = \"uid-\" + \$x"
	  done
	  grep "\"type\":\"BOOKMARK\"" "$F"
	  for x in a b c
	  do
		grep "\"kind\":\"IoTService\",\"metadata\":{\"name\"" "$F" |
		jq -c --arg x $x ".type = \"MODIFIED\" | .object.metadata.name = \$x | .object.metadata.uid = \"uid-\" + \$x
			| .object.metadata.generation = 2 | .object.metadata.resourceVersion = \"900\"
			| .object.spec.cockpit.image = \"cockpit:2\""
	  done
	} >together.in &&
	for limit in 1 2
	do
		MAX_PARALLEL_UPDATES=$limit OPERATOR_NAME=devawsk8s ireconcile --now 2026-11-22T10:05:00Z \
			"$PROJECT_ROOT/pipeline/iotservice" <together.in >together.$limit.out 2>together.$limit.err &&
		test_no_sanitizer_report together.$limit.err &&
		jq -r "select(.op == \"status\") | .object.status.conditions[] | select(.type == \"Progressing\") | .reason" \
			together.$limit.out | sort | uniq -c | sed "s/^ *//" >actual.$limit || return 1
	done &&
	printf "2 UpdateQueued\n1 Updating\n" >expect.1 && test_cmp expect.1 actual.1 &&
	printf "1 UpdateQueued\n2 Updating\n" >expect.2 && test_cmp expect.2 actual.2 &&
	# (a queued instance is left as it is: only the admitted one is applied)
	test $(jq -r "select(.op == \"apply\") | .object.metadata.labels[\"cp.iot.sap/instance\"]" together.1.out |
		sort -u | wc -l) = 1
'

# The same with each instance's pods listed before it (kwatch interleaves
# its watches' initial lists): the first pass, at the bookmark, sees the
# pods; they start no --settle burst that would reconcile each instance a
# second time, or hold the status admitting one (and leave the next ones to
# find a free slot).
test_expect_success '... also with their pods listed before them, each reconciled once' '
	F="$FIXTURES/04-steady.in.jsonl" &&
	{ grep -v -e "\"kind\":\"IoTService\"" -e "\"kind\":\"Namespace\"" -e "\"type\":\"BOOKMARK\"" together.in
	  for x in a b c
	  do
		grep "\"kind\":\"Pod\"" "$F" |
		jq -c --arg x $x ".object.metadata.namespace = \"devawsk8s-\" + \$x
			| .object.metadata.name |= sub(\"example-iotservice\"; \$x) | .object.metadata.uid = \"uid-\" + .object.metadata.name
			| .object.metadata.labels.instance = \$x | .object.metadata.labels[\"cp.iot.sap/instance\"] = \$x"
	  done
	  # (the instances listed as edited: a line after the bookmark could
	  # come through the FIFO after the first pass began)
	  grep "\"type\":\"MODIFIED\",.*\"kind\":\"IoTService\"" together.in | sed "s/\"MODIFIED\"/\"ADDED\"/"
	  grep -e "\"kind\":\"Namespace\"" -e "\"type\":\"BOOKMARK\"" together.in
	} >pods-first.in &&
	mkfifo pods-first.fifo &&
	{ ( cat pods-first.in; sleep 1 ) >pods-first.fifo & } &&
	MAX_PARALLEL_UPDATES=1 OPERATOR_NAME=devawsk8s ireconcile -v --now 2026-11-22T10:05:00Z \
		"$PROJECT_ROOT/pipeline/iotservice" <pods-first.fifo >pods-first.out 2>pods-first.err &&
	test_no_sanitizer_report pods-first.err &&
	jq -r "select(.msg | startswith(\"reconciled \")) | .msg" pods-first.err | sort | uniq -c | sed "s/^ *//" >actual &&
	printf "1 reconciled \\047%s\\047\\n" devawsk8s/a devawsk8s/b devawsk8s/c >expect &&
	test_cmp expect actual &&
	jq -r "select(.op == \"status\") | .object.status.conditions[] | select(.type == \"Progressing\") | .reason" \
		pods-first.out | sort | uniq -c | sed "s/^ *//" >actual &&
	printf "2 UpdateQueued\n1 Updating\n" >expect && test_cmp expect actual &&
	test $(jq -r "select(.op == \"apply\") | .object.metadata.labels[\"cp.iot.sap/instance\"]" pods-first.out |
		sort -u | wc -l) = 1
'

# An apply written and not yet seen back: the child it edits is not ready as
# it was seen before the edit (a reconcile in between, here for the status
# coming back, must not find the old Deployment ready and say Available).
test_expect_success '15: an edited child is "being updated" until the edit is seen' '
	mkfifo landing.fifo &&
	{ ( cat "$FIXTURES/05-edit-image.in.jsonl"
	    wait_statuses landing.out 1
	    cat "$FIXTURES/15-landing-status.jsonl"
	    wait_statuses landing.out 2
	    cat "$FIXTURES/15-landing-deployment.jsonl"
	  ) >landing.fifo & } &&
	reconcile_fifo landing --status-interval 0 &&
	jq -r "select(.op == \"status\") | .object.status
		| [.phase, (.conditions[] | select(.type == \"Progressing\") | .message)] | @tsv" landing.out >actual &&
	printf "%s\t%s\n" >expect \
		Processing "spec generation 2 is being applied" \
		Processing "Deployment cockpit-example-iotservice is being updated" \
		Available "all required children are ready" &&
	test_cmp expect actual &&
	jq -r "select(.op == \"apply\") | .object.metadata.name" landing.out >actual &&
	echo cockpit-example-iotservice >expect &&
	test_cmp expect actual
'

# A field dropped from the spec (imagePullSecrets emptied): the workloads
# hold every field still desired, but not the new applied annotation, so
# their applies are on their way until one carrying it comes back; a status
# change of one meanwhile does not count as landing (the apply is sent again,
# its live object having changed), and a failure of it is applied again
# after the backoff.
test_expect_success 'a dropped field: an apply is not landed before its annotation is; a failed one is sent again' '
	mkfifo drop.fifo drop.fb &&
	jq -c "select(.object.kind == \"IoTService\" and .type != \"BOOKMARK\") | .type = \"MODIFIED\" | .object.metadata.generation = 2
		| .object.metadata.resourceVersion = \"400\" | .object.spec.imagePullSecrets = \"\"" \
		"$FIXTURES/04-steady.in.jsonl" >drop-edit.jsonl &&
	jq -c "select(.object.kind == \"Deployment\" and .object.metadata.name == \"cockpit-example-iotservice\")
		| .type = \"MODIFIED\" | .object.metadata.resourceVersion = \"401\"
		| .object.status.conditions = [{type: \"Available\", status: \"True\"}]" \
		"$FIXTURES/04-steady.in.jsonl" >drop-status.jsonl &&
	test -s drop-edit.jsonl && test -s drop-status.jsonl &&
	{ ( cat "$FIXTURES/04-steady.in.jsonl" drop-edit.jsonl
	    test_wait_for 30 test_has_ops drop.out apply 8
	    n=$(test_reconciles drop.err)
	    cat drop-status.jsonl
	    test_wait_for 30 test_has_reconciles drop.err $((n + 1))
	    echo "{\"op\":\"result\",\"for\":\"apply\",\"primary\":\"devawsk8s/example-iotservice\",\"ref\":{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"namespace\":\"devawsk8s-example-iotservice\",\"name\":\"cockpit-example-iotservice\"},\"ok\":false,\"code\":500,\"reason\":\"InternalError\",\"message\":\"etcd\"}" >drop.fb
	    test_wait_for 10 test_has_ops drop.out apply 9
	    sleep 0.5
	  ) >drop.fifo 3>&- 4>&- & } &&
	OPERATOR_NAME=devawsk8s timeout 60 ireconcile -v --now 2026-11-22T10:05:00Z --feedback drop.fb \
		--backoff-base 200ms --backoff-cap 200ms "$PROJECT_ROOT/pipeline/iotservice" \
		<drop.fifo >drop.out 2>drop.err &&
	wait &&
	test_no_sanitizer_report drop.err &&
	jq -r "select(.op == \"apply\") | .object.metadata.name" drop.out | sort | uniq -c | awk "{print \$1, \$2}" >actual &&
	grep -c . actual >n && echo 8 >expect && test_cmp expect n &&
	# cockpit: the edit, again when it changed without the annotation, again after the failure
	grep "^3 cockpit-example-iotservice$" actual &&
	test "$(grep -c "^1 " actual)" = 7
'

# Two statuses on their way, the first lands: the primary changed, but what
# the program sees is still the second (kstatus writes them in order), so it
# is not written again, nor derived anew (with the clock, a condition's
# transition time would move). The program was asked, as each was written,
# what it would answer once that one is stored: of the first, something
# else (it says the spec's generation is being applied, which its own
# observedGeneration stored moves on from); of the second, the same. So
# neither landing is even reconciled: the first comes while the second is on
# its way.
test_expect_success 'an older status landing while a newer one is on its way writes nothing' '
	mkfifo older.fifo &&
	{ ( cat "$FIXTURES/01-namespace.in.jsonl"
	    wait_statuses older.out 1
	    children_added
	    wait_statuses older.out 2
	    stored older.out 1 102
	    test_wait_for 30 seen_back older.err 1
	    stored older.out 2 103
	  ) >older.fifo & } &&
	reconcile_fifo older --status-interval 0 &&
	test_reconciled older.err statuses events landingSeen >actual &&
	cat >expect <<-\EOT &&
	[1,1,false]
	[1,0,true]
	EOT
	test_cmp expect actual &&
	test "$(grep -c "as its last reconcile saw it; not reconciled" older.err)" = 2
'

# A real API server writes a custom resource back with its keys sorted
# (our statuses too, which the program writes in its own order): ours
# landing so are still what the program was told.
test_expect_success 'statuses of ours landing with their keys sorted: the same' '
	jq -cS . "$FIXTURES/01-namespace.in.jsonl" >sorted.in.jsonl &&
	mkfifo sorted.fifo &&
	{ ( cat sorted.in.jsonl
	    wait_statuses sorted.out 1
	    children_added | jq -cS .
	    wait_statuses sorted.out 2
	    stored sorted.out 1 102 "" sorted.in.jsonl | jq -cS .
	    test_wait_for 30 seen_back sorted.err 1
	    stored sorted.out 2 103 "" sorted.in.jsonl | jq -cS .
	  ) >sorted.fifo & } &&
	reconcile_fifo sorted --status-interval 0 &&
	test_reconciled sorted.err statuses events landingSeen >actual &&
	printf "[1,1,false]\n[1,0,true]\n" >expect &&
	test_cmp expect actual &&
	test "$(grep -c "as its last reconcile saw it; not reconciled" sorted.err)" = 2
'

# Someone else's status stored after ours (here read in one batch with our
# first status landing, which reconciles nothing): it is not one ours may
# be meanwhile, so what the program derives from it is written again; that
# one lands as the program was told.
test_expect_success 'a status someone else stored while ours was on its way is written over' '
	mkfifo foreign.fifo &&
	{ ( cat "$FIXTURES/01-namespace.in.jsonl"
	    wait_statuses foreign.out 1
	    children_added
	    wait_statuses foreign.out 2
	    { stored foreign.out 1 102; stored foreign.out 1 103 Foreign; } >batch.jsonl
	    cat batch.jsonl
	    wait_statuses foreign.out 3
	    stored foreign.out 3 104
	  ) >foreign.fifo & } &&
	reconcile_fifo foreign --status-interval 0 &&
	test_reconciled foreign.err statuses events >actual &&
	cat >expect <<-\EOT &&
	[1,1]
	[1,0]
	[1,1]
	EOT
	test_cmp expect actual &&
	test "$(grep -c "as its last reconcile saw it; not reconciled" foreign.err)" = 2 &&
	jq -c "select(.op == \"status\") | .object.status" foreign.out >statuses &&
	test "$(sed -n 2p statuses)" = "$(sed -n 3p statuses)"
'

# Someone else's status stored before ours that are on their way (kstatus
# retries after a conflict): what the program derives from it is written
# over, and ours landing afterwards are still ours, nothing more is written
# (nor reconciled: the program was told at each write).
test_expect_success 'statuses of ours landing after someone else'"'"'s write nothing more' '
	mkfifo after.fifo &&
	{ ( cat "$FIXTURES/05-edit-image.in.jsonl"
	    wait_statuses after.out 1
	    cat "$FIXTURES/15-landing-deployment.jsonl"
	    wait_statuses after.out 2
	    stored after.out 1 401 Foreign "$FIXTURES/05-edit-image.in.jsonl"
	    wait_statuses after.out 3
	    n=$(grep -c "as its last reconcile saw it; not reconciled" after.err)
	    stored after.out 1 402 "" "$FIXTURES/05-edit-image.in.jsonl"
	    test_wait_for 30 seen_back after.err $((n + 1))
	    stored after.out 2 403 "" "$FIXTURES/05-edit-image.in.jsonl"
	  ) >after.fifo & } &&
	reconcile_fifo after --status-interval 0 &&
	# (the bookmark may be read before the edit: a first reconcile of the
	# state before it writes nothing)
	test_reconciled after.err statuses events | awk "f || \$0 != \"[0,0]\" { f = 1; print }" >actual &&
	cat >expect <<-\EOT &&
	[1,1]
	[1,1]
	[1,1]
	EOT
	test_cmp expect actual &&
	test "$(grep -c "as its last reconcile saw it; not reconciled" after.err)" = 2
'

# Deleted while the create of its namespace is on its way (sent, not seen): finalized at once, the
# namespace would be made for an IoTService that is gone, and nobody would delete it. The finalizer
# waits for the create's outcome: the namespace seen (deleted, then the finalizer goes), or the create
# failed (nothing made: the finalizer goes).
#
# fin_events PREFIX: PREFIX.del (the IoTService deleted), PREFIX.ns (its namespace seen, as created) and
# PREFIX.term (that namespace terminating), as watch events
fin_events () {
	jq -c "select(.object.kind == \"IoTService\" and .type != \"BOOKMARK\") | .type = \"MODIFIED\"
		| .object.metadata.deletionTimestamp = \"2026-11-22T10:00:00Z\" | .object.metadata.resourceVersion = \"102\"" \
		"$FIXTURES/01-finalized.in.jsonl" >"$1.del" &&
	jq -c "select(.object.kind == \"Namespace\")" "$FIXTURES/01-namespace.in.jsonl" >"$1.ns" &&
	jq -c ".type = \"MODIFIED\" | .object.metadata.deletionTimestamp = \"2026-11-22T10:00:01Z\"
		| .object.status.phase = \"Terminating\" | .object.metadata.resourceVersion = \"103\"" "$1.ns" >"$1.term" &&
	test "$(wc -l <"$1.del")" = 1 && test "$(wc -l <"$1.ns")" = 1 && test -s "$1.term"
}

# fin_ops FILE: "op kind" of each operation in FILE, the primary's patch named by what it does
fin_ops () {
	jq -r "\"\\(.op) \\(.object.kind // .event.involvedObject.kind)\" + (if .op == \"patch\" then \" \\(.patch | map(.op) | join(\",\"))\" else \"\" end)" "$1"
}

test_expect_success 'deleted while its namespace create is on its way: the finalizer waits until it is seen, then deletes it' '
	mkfifo cl.fifo cl.fb &&
	fin_events cl &&
	{ ( cat "$FIXTURES/01-finalized.in.jsonl"
	    test_wait_for 30 test_has_ops cl.out create 1
	    n=$(test_reconciles cl.err)
	    cat cl.del
	    test_wait_for 30 test_has_reconciles cl.err $((n + 1))
	    sleep 0.3
	    cp cl.out cl.before-seen
	    cat cl.ns
	    test_wait_for 30 test_has_ops cl.out delete 1
	    cat cl.term
	    test_wait_for 30 test_has_ops cl.out patch 1
	    sleep 0.3
	  ) >cl.fifo 3>&- 4>&- & } &&
	OPERATOR_NAME=devawsk8s timeout 60 ireconcile -v --now 2026-11-22T10:05:00Z --feedback cl.fb \
		"$PROJECT_ROOT/pipeline/iotservice" <cl.fifo >cl.out 2>cl.err &&
	wait &&
	test_no_sanitizer_report cl.err &&
	# until the namespace was seen: its create alone, no finalizer removed
	fin_ops cl.before-seen >actual &&
	echo "create Namespace" >expect &&
	test_cmp expect actual &&
	grep "finalizer kept while the create of .Namespace/devawsk8s-example-iotservice. is on its way" cl.err &&
	# then: the namespace deleted (by its uid), and once it terminates, the finalizer removed
	fin_ops cl.out >actual &&
	cat >expect <<-\EOT &&
	create Namespace
	delete Namespace
	event IoTService
	patch IoTService test,remove
	EOT
	test_cmp expect actual &&
	jq -r "select(.op == \"delete\") | .object.metadata.uid" cl.out >actual &&
	echo uid-Namespace-devawsk8s-example-iotservice >expect &&
	test_cmp expect actual
'

test_expect_success 'deleted while its namespace create is on its way: the create failing (409), the finalizer goes, nothing deleted' '
	mkfifo cf.fifo cf.fb &&
	fin_events cf &&
	{ ( cat "$FIXTURES/01-finalized.in.jsonl"
	    test_wait_for 30 test_has_ops cf.out create 1
	    n=$(test_reconciles cf.err)
	    cat cf.del
	    test_wait_for 30 test_has_reconciles cf.err $((n + 1))
	    sleep 0.3
	    cp cf.out cf.before-result
	    echo "{\"op\":\"result\",\"for\":\"create\",\"primary\":\"devawsk8s/example-iotservice\",\"ref\":{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"name\":\"devawsk8s-example-iotservice\"},\"ok\":false,\"code\":409,\"reason\":\"AlreadyExists\",\"message\":\"namespaces \\\"devawsk8s-example-iotservice\\\" already exists\"}" >cf.fb
	    test_wait_for 30 test_has_ops cf.out patch 1
	    sleep 0.3
	  ) >cf.fifo 3>&- 4>&- & } &&
	OPERATOR_NAME=devawsk8s timeout 60 ireconcile -v --now 2026-11-22T10:05:00Z --feedback cf.fb \
		"$PROJECT_ROOT/pipeline/iotservice" <cf.fifo >cf.out 2>cf.err &&
	wait &&
	test_no_sanitizer_report cf.err &&
	fin_ops cf.before-result >actual &&
	echo "create Namespace" >expect &&
	test_cmp expect actual &&
	fin_ops cf.out >actual &&
	printf "create Namespace\npatch IoTService test,remove\n" >expect &&
	test_cmp expect actual
'

# An instance namespace an older operator made, without the Pod Security label (README, the
# operator's rights): the namespace alone is applied, with it.
test_expect_success '04-steady, the namespace without pod-security.kubernetes.io/enforce: applied with baseline, nothing else' '
	jq -c "if .object.kind == \"Namespace\" then del(.object.metadata.labels[\"pod-security.kubernetes.io/enforce\"]) else . end" \
		"$FIXTURES/04-steady.in.jsonl" >old-ns.in.jsonl &&
	! grep -q pod-security old-ns.in.jsonl &&
	OPERATOR_NAME=devawsk8s ireconcile --now 2026-11-22T10:05:00Z "$PROJECT_ROOT/pipeline/iotservice" \
		<old-ns.in.jsonl >old-ns.out 2>old-ns.err &&
	test_no_sanitizer_report old-ns.err &&
	ops old-ns >actual &&
	echo "apply Namespace devawsk8s-example-iotservice" >expect &&
	test_cmp expect actual &&
	jq -e ".object.metadata.labels[\"pod-security.kubernetes.io/enforce\"] == \"baseline\"" old-ns.out
'

test_done
