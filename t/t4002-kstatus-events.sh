#!/bin/sh
test_description='kstatus: Kubernetes Events, repeats counted on the first one'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"

ksim_start
uid=0f6c1d5e-0000-4000-8000-000000000001

# event_line REASON MESSAGE [TYPE]
event_line () {
	printf '{"op":"event","primary":"ns/w1","event":{"involvedObject":{"apiVersion":"test.example.org/v1","kind":"Widget","namespace":"ns","name":"w1","uid":"%s"},"type":"%s","reason":"%s","message":"%s"}}\n' \
		"$uid" "${3:-Normal}" "$1" "$2"
}

events () {
	timeout 30 kubectl get events -n ns -o json >events.json &&
	jq -c "[.items[] | select(.involvedObject.name == \"w1\")] | sort_by(.reason, .message)" events.json >"$1"
}

test_expect_success 'setup' '
	printf "apiVersion: v1\nkind: Namespace\nmetadata: {name: ns}\n" >ns.yaml &&
	timeout 30 kapply -f ns.yaml >out 2>err
'

test_expect_success 'an event becomes a core/v1 Event with source, reporting instance, count and times' '
	event_line Created "created the namespace" >in &&
	POD_NAME=op-pod-1 timeout 30 kstatus <in >out 2>err &&
	jq -e ".op == \"result\" and .for == \"event\" and .ok == true and .count == 1 and .primary == \"ns/w1\"" out &&
	events ev &&
	jq -e "length == 1 and (.[0] | .type == \"Normal\" and .reason == \"Created\" and .message == \"created the namespace\" and
		.count == 1 and .source.component == \"iot-operator\" and .reportingComponent == \"iot-operator\" and
		.reportingInstance == \"op-pod-1\" and .involvedObject.uid == \"$uid\" and .involvedObject.kind == \"Widget\" and
		.firstTimestamp != null and .firstTimestamp == .lastTimestamp and
		(.metadata.name | test(\"^w1\\\\.[0-9a-f]+$\")))" ev
'

test_expect_success 'repeats in one run raise the count of one Event; another message is another Event' '
	{
		event_line Scaled "scaled to 3" &&
		event_line Scaled "scaled to 3" &&
		event_line Scaled "scaled to 3" &&
		event_line Scaled "scaled to 4" &&
		event_line Failed "image pull failed" Warning &&
		event_line Failed "image pull failed" Warning
	} >in &&
	timeout 30 kstatus <in >out 2>err &&
	jq -c -s "map(.count)" out >actual &&
	echo "[1,2,3,1,1,2]" >expect &&
	test_cmp expect actual &&
	events ev &&
	jq -c "map([.reason, .message, .type, .count])" ev >actual &&
	cat >expect <<-\EOF &&
	[["Created","created the namespace","Normal",1],["Failed","image pull failed","Warning",2],["Scaled","scaled to 3","Normal",3],["Scaled","scaled to 4","Normal",1]]
	EOF
	test_cmp expect actual &&
	jq -e "map(select(.reason == \"Scaled\" and .count == 3))[0] | .lastTimestamp >= .firstTimestamp" ev
'

test_expect_success 'an event for a cluster-scoped object goes to the default namespace' '
	echo "{\"op\":\"event\",\"event\":{\"involvedObject\":{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"name\":\"ns\"},\"type\":\"Normal\",\"reason\":\"Seen\",\"message\":\"hello\"}}" >in &&
	timeout 30 kstatus <in >out 2>err &&
	jq -e ".ok == true and .ref.namespace == \"default\"" out &&
	timeout 30 kubectl get events -n default -o json >def.json &&
	jq -e "[.items[] | select(.reason == \"Seen\")] | length == 1" def.json
'

test_expect_success 'an event without a reason is reported and skipped' '
	echo "{\"op\":\"event\",\"primary\":\"ns/w1\",\"event\":{\"involvedObject\":{\"name\":\"w1\",\"namespace\":\"ns\"}}}" >in &&
	timeout 30 kstatus <in >out 2>err &&
	jq -e ".ok == false and .code == 400 and .primary == \"ns/w1\"" out
'

test_expect_success 'cleanup' '
	ksim_stop
'

# Events expire on the server (kube-apiserver's --event-ttl; ksim's, here 3 s).
ksim_start --event-ttl 3s

test_expect_success 'setup: the namespace' '
	timeout 30 kapply -f ns.yaml >out 2>err
'

test_expect_success 'a repeat whose Event has expired is recorded as a new Event' '
	rv=$(ksim_curl /api/v1/namespaces/ns/events | jq -r .metadata.resourceVersion) &&
	{ ksim_curl -N -o w.out "/api/v1/namespaces/ns/events?watch=true&resourceVersion=$rv&timeoutSeconds=20" & } &&
	# (the group is the input of kstatus: what it says goes to stderr)
	{ event_line Scaled "scaled to 5"
	  event_line Scaled "scaled to 5"
	  test_wait_for 15 grep -q DELETED w.out >&2
	  event_line Scaled "scaled to 5"; } | timeout 30 kstatus >out 2>err &&
	jq -c -s "map(.count)" out >actual &&
	echo "[1,2,1]" >expect &&
	test_cmp expect actual &&
	test_wait_for 10 eval "test \$(grep -c ADDED w.out) = 2" &&
	jq -r "[.type, .object.count] | join(\" \")" w.out >actual &&
	printf "ADDED 1\nMODIFIED 2\nDELETED 2\nADDED 1\n" >expect &&
	test_cmp expect actual &&
	jq -r ".object.metadata.name" w.out | sort -u >names &&
	test "$(wc -l <names)" = 2 &&
	events ev &&
	jq -c "map([.reason, .message, .count])" ev >actual &&
	echo "[[\"Scaled\",\"scaled to 5\",1]]" >expect &&
	test_cmp expect actual
'

test_expect_success 'cleanup: ksim with --event-ttl' '
	ksim_stop
'

test_done
