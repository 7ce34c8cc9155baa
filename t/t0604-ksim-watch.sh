#!/bin/sh
test_description='ksim: watch semantics (initial state, bookmarks, streaming lists, 410, selectors, timeouts, faults)'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"

CM=/api/v1/namespaces/default/configmaps

# Creates a configmap: name [labels-json]
mkcm () {
	ksim_curl -o /dev/null -f -X POST -H "Content-Type: application/json" \
		-d "{\"metadata\":{\"name\":\"$1\",\"labels\":${2:-{\}}}}" $CM
}

# Starts a watch in the background writing to $1: file query
watch_bg () {
	rm -f "$1"
	ksim_curl -N -o "$1" "$CM?watch=true&$2" &
}

# The event types and names of a watch output, one per line.
events () {
	jq -r "[.type, (.object.metadata.name // \"-\")] | join(\" \")" "$1"
}

# A bare API server: the simulated controllers' own writes (each namespace's
# kube-root-ca.crt, ServiceAccounts, the Node) would interleave with the
# exact event sequences and the bounded history these tests check.
ksim_start --no-simulate --bookmark-interval 1s --history 20

test_expect_success 'resourceVersion "" and "0": synthetic ADDED for the current state, then changes' '
	mkcm a && mkcm b &&
	watch_bg w1.out "timeoutSeconds=2" &&
	test_wait_for 5 grep -q "\"b\"" w1.out &&
	mkcm c &&
	wait &&
	events w1.out >actual &&
	printf "ADDED a\nADDED b\nADDED c\n" >expect &&
	test_cmp expect actual &&
	watch_bg w2.out "resourceVersion=0&timeoutSeconds=2" &&
	test_wait_for 5 grep -q "\"c\"" w2.out &&
	mkcm c0 &&
	wait &&
	events w2.out >actual &&
	printf "ADDED a\nADDED b\nADDED c\nADDED c0\n" >expect &&
	test_cmp expect actual
'

test_expect_success 'resourceVersion N replays the changes after N only' '
	rv=$(ksim_curl $CM/a | jq -r .metadata.resourceVersion) &&
	watch_bg w.out "resourceVersion=$rv&timeoutSeconds=1" &&
	wait &&
	events w.out >actual &&
	printf "ADDED b\nADDED c\nADDED c0\n" >expect &&
	test_cmp expect actual
'

# Merge-patches configmap v's data.n: value
setn () {
	ksim_curl -o /dev/null -f -X PATCH -H "Content-Type: application/merge-patch+json" \
		-d "{\"data\":{\"n\":\"$1\"}}" $CM/v
}

# Each event of configmap v in watch output $1: type, data.n, resourceVersion
vevents () {
	jq -r "select(.object.metadata.name == \"v\") | \"\(.type) \(.object.data.n) \(.object.metadata.resourceVersion)\"" "$1"
}

test_expect_success 'an object is sent as each version was: replayed, current, and in a later initial state' '
	ksim_curl -o /dev/null -f -X POST -H "Content-Type: application/json" \
		-d "{\"metadata\":{\"name\":\"v\"},\"data\":{\"n\":\"1\"}}" $CM &&
	watch_bg w0.out "resourceVersion=0&timeoutSeconds=1" &&
	wait &&
	rv1=$(ksim_curl $CM/v | jq -r .metadata.resourceVersion) &&
	echo "ADDED 1 $rv1" >expect &&
	vevents w0.out >actual &&
	test_cmp expect actual &&
	setn 2 &&
	rv2=$(ksim_curl $CM/v | jq -r .metadata.resourceVersion) &&
	setn 3 &&
	rv3=$(ksim_curl $CM/v | jq -r .metadata.resourceVersion) &&
	watch_bg w1.out "resourceVersion=$rv1&timeoutSeconds=1" &&
	wait &&
	printf "MODIFIED 2 $rv2\nMODIFIED 3 $rv3\n" >expect &&
	vevents w1.out >actual &&
	test_cmp expect actual &&
	watch_bg w2.out "resourceVersion=0&timeoutSeconds=1" &&
	wait &&
	echo "ADDED 3 $rv3" >expect &&
	vevents w2.out >actual &&
	test_cmp expect actual &&
	ksim_curl -o /dev/null -f -X DELETE $CM/v
'

test_expect_success 'timeoutSeconds ends the stream cleanly (zero chunk)' '
	start=$(date +%s) &&
	ksim_curl --raw -o raw.out "$CM?watch=true&resourceVersion=0&timeoutSeconds=1" &&
	end=$(date +%s) &&
	test $((end - start)) -le 3 &&
	tr -d "\r" <raw.out | tail -n 2 >tail && printf "0\n\n" >expect && test_cmp expect tail
'

test_expect_success 'allowWatchBookmarks: periodic BOOKMARK with only the resourceVersion' '
	rv=$(ksim_curl $CM | jq -r .metadata.resourceVersion) &&
	ksim_curl -o w.out "$CM?watch=true&resourceVersion=$rv&allowWatchBookmarks=true&timeoutSeconds=3" &&
	jq -c "select(.type == \"BOOKMARK\") | .object" w.out >bm &&
	test $(wc -l <bm) -ge 1 &&
	head -n 1 bm >first &&
	jq -e --arg rv "$rv" ".kind == \"ConfigMap\" and .apiVersion == \"v1\" and .metadata.resourceVersion == \$rv and (.metadata | keys - [\"creationTimestamp\"]) == [\"resourceVersion\"]" first
'

test_expect_success 'sendInitialEvents: ADDED for each object, then the initial-events-end bookmark' '
	rv=$(ksim_curl $CM | jq -r .metadata.resourceVersion) &&
	ksim_curl -o w.out "$CM?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1" &&
	jq -c "select(.type != \"BOOKMARK\" or .object.metadata.annotations)" w.out >w2 &&
	events w2 >actual &&
	printf "ADDED a\nADDED b\nADDED c\nADDED c0\nBOOKMARK -\n" >expect &&
	test_cmp expect actual &&
	tail -n 1 w2 >end &&
	jq -e --arg rv "$rv" ".object.metadata.annotations == {\"k8s.io/initial-events-end\": \"true\"} and .object.metadata.resourceVersion == \$rv" end
'

test_expect_success 'sendInitialEvents without resourceVersionMatch=NotOlderThan is 422' '
	ksim_curl -o out.json -w "%{http_code}\n" "$CM?watch=true&sendInitialEvents=true" >code &&
	echo 422 >expect && test_cmp expect code &&
	jq -e ".reason == \"Invalid\" and (.message | contains(\"sendInitialEvents requires setting resourceVersionMatch to NotOlderThan\"))" out.json &&
	ksim_curl -o out.json -w "%{http_code}\n" "$CM?sendInitialEvents=true" >code &&
	test_cmp expect code &&
	jq -e ".message | contains(\"sendInitialEvents is forbidden for list\")" out.json
'

test_expect_success 'a label selector turns relabelings into ADDED and DELETED (the object as it was)' '
	mkcm sel "{\"tier\":\"front\"}" &&
	rv=$(ksim_curl $CM/sel | jq -r .metadata.resourceVersion) &&
	watch_bg w.out "resourceVersion=$rv&labelSelector=tier%3Dfront&timeoutSeconds=3" &&
	sleep 0.3 &&
	left=$(ksim_curl -X PATCH -H "Content-Type: application/merge-patch+json" -d "{\"metadata\":{\"labels\":{\"tier\":\"back\"}}}" $CM/sel |
		jq -r .metadata.resourceVersion) &&
	ksim_curl -o /dev/null -X PATCH -H "Content-Type: application/merge-patch+json" -d "{\"data\":{\"x\":\"1\"}}" $CM/sel &&
	ksim_curl -o /dev/null -X PATCH -H "Content-Type: application/merge-patch+json" -d "{\"metadata\":{\"labels\":{\"tier\":\"front\"}}}" $CM/sel &&
	ksim_curl -o /dev/null -X PATCH -H "Content-Type: application/merge-patch+json" -d "{\"data\":{\"x\":\"2\"}}" $CM/sel &&
	mkcm other "{\"tier\":\"back\"}" &&
	wait &&
	events w.out >actual &&
	printf "DELETED sel\nADDED sel\nMODIFIED sel\n" >expect &&
	test_cmp expect actual &&
	jq -r "select(.type == \"DELETED\") | \"\(.object.metadata.labels.tier) \(.object.metadata.resourceVersion)\"" w.out >actual &&
	echo "front $left" >expect &&
	test_cmp expect actual
'

test_expect_success 'a field selector on metadata.name watches one object' '
	watch_bg w.out "resourceVersion=0&fieldSelector=metadata.name%3Db&timeoutSeconds=1" &&
	wait &&
	events w.out >actual &&
	echo "ADDED b" >expect && test_cmp expect actual
'

test_expect_success 'a namespaced watch does not see other namespaces; an all-namespaces one does' '
	ksim_curl -o /dev/null -X POST -H "Content-Type: application/json" -d "{\"metadata\":{\"name\":\"elsewhere\"}}" /api/v1/namespaces &&
	ksim_curl -o /dev/null -X POST -H "Content-Type: application/json" -d "{\"metadata\":{\"name\":\"x\"}}" /api/v1/namespaces/elsewhere/configmaps &&
	watch_bg w.out "resourceVersion=0&timeoutSeconds=1" &&
	ksim_curl -N -o all.out "/api/v1/configmaps?watch=true&resourceVersion=0&timeoutSeconds=1" &&
	wait &&
	! grep -q elsewhere w.out &&
	jq -e "select(.object.metadata.namespace == \"elsewhere\")" all.out
'

test_expect_success 'the history is bounded (--history): an older resourceVersion is 410 in the stream' '
	for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21; do
		mkcm "h$i" || return 1
	done &&
	ksim_curl -o w.out -w "%{http_code}\n" "$CM?watch=true&resourceVersion=3" >code &&
	echo 200 >expect && test_cmp expect code &&
	jq -e "select(.type == \"ERROR\") | .object | .code == 410 and .reason == \"Expired\"" w.out &&
	test $(wc -l <w.out) = 1
'

test_expect_success 'ksim_admin error-watches: an ERROR 410 event, then the end' '
	watch_bg w.out "resourceVersion=0" &&
	test_wait_for 5 grep -q "\"h21\"" w.out &&
	ksim_admin error-watches &&
	wait &&
	tail -n 1 w.out >last &&
	jq -e ".type == \"ERROR\" and .object.kind == \"Status\" and .object.code == 410 and .object.reason == \"Expired\"" last
'

test_expect_success 'ksim_admin compact: watches from before the compaction get 410, current ones do not' '
	rv=$(ksim_curl $CM | jq -r .metadata.resourceVersion) &&
	mkcm after-compact-0 &&
	ksim_admin compact &&
	ksim_curl -o w.out "$CM?watch=true&resourceVersion=$rv&timeoutSeconds=1" &&
	jq -e "select(.type == \"ERROR\") | .object.message == \"The resourceVersion for the provided watch is too old.\"" w.out &&
	now=$(ksim_curl $CM | jq -r .metadata.resourceVersion) &&
	watch_bg w2.out "resourceVersion=$now&timeoutSeconds=2" &&
	sleep 0.3 && mkcm after-compact &&
	wait &&
	events w2.out >actual && echo "ADDED after-compact" >expect && test_cmp expect actual
'

test_expect_success 'Table watch events (kubectl get -w without -o json)' '
	ksim_curl -o w.out -H "Accept: application/json;as=Table;v=v1;g=meta.k8s.io" "$CM?watch=true&resourceVersion=0&fieldSelector=metadata.name%3Da&timeoutSeconds=1" &&
	jq -e ".type == \"ADDED\" and .object.kind == \"Table\" and .object.rows[0].cells[0] == \"a\" and .object.columnDefinitions[0].name == \"Name\"" w.out
'

test_expect_success 'a resourceVersion newer than any: 3 s for it, then one ERROR 504 ResourceVersionTooLarge event, the end' '
	rv=$(ksim_curl $CM | jq -r .metadata.resourceVersion) &&
	far=$((rv + 1000)) &&
	start=$(date +%s) &&
	ksim_curl -m 10 -o w.out -w "%{http_code}\n" "$CM?watch=true&resourceVersion=$far&allowWatchBookmarks=true" >code &&
	end=$(date +%s) &&
	echo 200 >expect && test_cmp expect code &&
	test $((end - start)) -ge 2 && test $((end - start)) -le 5 &&
	jq -c . w.out >actual &&
	cat >expect <<-EOT &&
	{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Timeout: Too large resource version: $far, current: $rv","reason":"Timeout","details":{"causes":[{"reason":"ResourceVersionTooLarge","message":"Too large resource version"}],"retryAfterSeconds":1},"code":504}}
	EOT
	test_cmp expect actual &&
	# reached within the 3 s: the watch goes on from there
	watch_bg w2.out "resourceVersion=$((rv + 1))&timeoutSeconds=4" &&
	sleep 1 &&
	mkcm late1 && mkcm late2 &&
	wait &&
	events w2.out >actual &&
	echo "ADDED late2" >expect &&
	test_cmp expect actual
'

# ksim's threads: one per connection
threads () {
	sed -n "s/^Threads:[[:space:]]*//p" "/proc/$KSIM_PID/status"
}
threads_above () {
	test "$(threads)" -gt "$1"
}
threads_at_most () {
	test "$(threads)" -le "$1"
}

test_expect_success 'a client that goes away ends its watch at once, with nothing to send (no bookmark, no change)' '
	t0=$(threads) &&
	{ curl -sS -k -N -o quiet.out "$KSIM_URL/api/v1/namespaces/default/secrets?watch=true&resourceVersion=0" & } &&
	cpid=$! &&
	test_wait_for 5 threads_above "$t0" &&
	kill $cpid && wait $cpid;
	test_wait_for 5 threads_at_most "$t0" &&
	threads_at_most "$t0"
'

test_expect_success 'SIGTERM ends open watch streams with the zero chunk' '
	rm -f term.out &&
	{ ksim_curl --raw -N -o term.out "$CM?watch=true&resourceVersion=0" & } &&
	cpid=$! &&
	test_wait_for 5 grep -q "\"a\"" term.out &&
	ksim_stop &&
	wait $cpid &&
	tr -d "\r" <term.out | tail -n 2 >tail && printf "0\n\n" >expect && test_cmp expect tail
'

test_done
