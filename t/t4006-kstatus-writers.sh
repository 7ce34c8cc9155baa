#!/bin/sh
test_description='kstatus --concurrency: writers side by side, each object on one of them

An object'"'"'s operations always go to the same writer, in the order they came;
other objects'"'"' are written meanwhile, so one object'"'"'s retries hold up only
its own. Results come as writes finish; a line passed through waits for the
operations before it of its primary. SIGTERM ends a retry'"'"'s wait. Faults are
ksim'"'"'s (POST /ksim/faults).'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"
. "$TEST_DIRECTORY/lib-kstatus.sh"

ksim_start

# event_line NAME REASON: an event about Widget ns/NAME
event_line () {
	printf '{"op":"event","primary":"ns/%s","event":{"involvedObject":{"apiVersion":"test.example.org/v1","kind":"Widget","namespace":"ns","name":"%s"},"type":"Normal","reason":"%s","message":"m"}}\n' \
		"$1" "$1" "$2"
}

# applied_line NAME: a result of kapply's for ns/NAME, passing through
applied_line () {
	printf '{"op":"result","for":"apply","primary":"ns/%s","ok":true}\n' "$1"
}

faults () {
	curl -sS -f -m 10 -X POST -d "$1" "$KSIM_URL/ksim/faults" >/dev/null
}

# order: the lines of out as "FOR PRIMARY OK"
order () {
	jq -r "[.for, .primary, .ok] | map(tostring) | join(\" \")" out
}

test_expect_success 'setup: ksim, a CRD with a status subresource, Widgets w1 and w2' '
	widgets_setup
'
uid1=$(cat uid1 2>/dev/null)
uid2=$(cat uid2 2>/dev/null)

test_expect_success '--help documents --concurrency; a bad value exits 100' '
	kstatus --help >help &&
	grep -e "--concurrency N" help &&
	test_expect_code 100 kstatus --concurrency 0 </dev/null >out 2>err &&
	test_expect_code 100 kstatus --concurrency 65 </dev/null >out 2>err &&
	test_expect_code 100 kstatus --concurrency x </dev/null >out 2>err
'

# w1's requests all fail (500, retried: 100, 200, 400 ms of backoff) while
# w2's are answered. (The writer of an object is a hash of it: w1 and w2
# are on different writers of 64, on one of 1.)
cat >in <<EOF
$(status_line w1 "$uid1" Retried)
$(applied_line w1)
$(status_line w2 "$uid2" Written)
$(applied_line w2)
EOF

test_expect_success 'one object retried holds up only its writer: the other written meanwhile, its lines passed' '
	faults "{\"rate\":1,\"code\":500,\"path\":\"/apis/test.example.org/v1/namespaces/ns/widgets/w1\"}" &&
	timeout 30 kstatus --concurrency 64 --coalesce 0 --max-retries 3 <in >out 2>err &&
	order >actual &&
	cat >expect <<-\EOF &&
	status ns/w2 true
	apply ns/w2 true
	status ns/w1 false
	apply ns/w1 true
	EOF
	test_cmp expect actual &&
	test "$(phase_of w2)" = Written &&
	test "$(phase_of w1)" = ""
'

test_expect_success 'one writer: everything in the order it came' '
	timeout 30 kstatus --concurrency 1 --coalesce 0 --max-retries 3 <in >out 2>err &&
	order >actual &&
	cat >expect <<-\EOF &&
	status ns/w1 false
	apply ns/w1 true
	status ns/w2 true
	apply ns/w2 true
	EOF
	test_cmp expect actual
'

# (read for its "op" and "primary" alone: a number no double holds, and the
# spacing, come out as they went in; the line waits for w2's status)
test_expect_success 'a line passed through goes on as its text, after its primary'"'"'s operations' '
	{
		status_line w2 "$uid2" Text &&
		echo "{\"op\": \"result\", \"for\": \"apply\", \"primary\": \"ns/w2\", \"n\": 9007199254740993}"
	} >in6 &&
	timeout 30 kstatus --concurrency 4 --coalesce 0 <in6 >out 2>err &&
	sed -n 2p out >actual &&
	echo "{\"op\": \"result\", \"for\": \"apply\", \"primary\": \"ns/w2\", \"n\": 9007199254740993}" >expect &&
	test_cmp expect actual &&
	jq -r -s "map(.for) | join(\" \")" out >actual &&
	echo "status apply" >expect &&
	test_cmp expect actual &&
	test "$(phase_of w2)" = Text
'

# (what comes after it is not held back: w2's status may be written first)
test_expect_success 'a line naming no primary waits for everything before it' '
	{
		status_line w1 "$uid1" Retried &&
		echo "{\"barrier\":7}" &&
		status_line w2 "$uid2" After
	} >in2 &&
	timeout 30 kstatus --concurrency 64 --coalesce 0 --max-retries 3 <in2 >out 2>err &&
	jq -c -s "map(.barrier // [.primary, .ok]) | map(select(. != [\"ns/w2\",true]))" out >actual &&
	echo "[[\"ns/w1\",false],7]" >expect &&
	test_cmp expect actual &&
	jq -e -s "length == 3" out
'

test_expect_success 'each object'"'"'s operations are written in the order they came, side by side' '
	faults "{\"reset\":true}" &&
	for i in 1 2 3 4 5 6; do
		status_line w1 "$uid1" "P$i" && event_line w1 Counted &&
		status_line w2 "$uid2" "Q$i" && event_line w2 Counted || return 1
	done >in3 &&
	timeout 30 kstatus --concurrency 8 --coalesce 0 <in3 >out 2>err &&
	test "$(phase_of w1)" = P6 && test "$(phase_of w2)" = Q6 &&
	# an Event repeated: its count rises by one with each write, in order
	jq -c -s "[.[] | select(.for == \"event\" and .primary == \"ns/w1\") | .count]" out >actual &&
	echo "[1,2,3,4,5,6]" >expect &&
	test_cmp expect actual &&
	jq -c -s "[.[] | select(.for == \"event\" and .primary == \"ns/w2\") | .count]" out >actual &&
	test_cmp expect actual &&
	jq -e -s "length == 24 and all(.ok)" out
'

test_expect_success 'SIGTERM ends a retry'"'"'s wait: the object'"'"'s failed result, then exit 0' '
	faults "{\"rate\":1,\"code\":503,\"path\":\"/apis/test.example.org/v1/namespaces/ns/widgets/w1\"}" &&
	rm -f fifo && mkfifo fifo &&
	# (the default --max-retries, 10, would wait 26 s and more)
	{ kstatus --coalesce 0 <fifo >out 2>err & } &&
	pid=$! &&
	exec 8>fifo &&
	status_line w1 "$uid1" Stopped >&8 &&
	test_wait_for 20 grep -q "retrying in" err &&
	start=$(now_ms) &&
	kill -TERM $pid &&
	wait $pid &&
	end=$(now_ms) &&
	exec 8>&- &&
	test $((end - start)) -lt 5000 &&
	order >actual &&
	echo "status ns/w1 false" >expect &&
	test_cmp expect actual
'
exec 8>&-

# (the backoff doubles: SIGTERM once a wait of 2 s or more has begun)
test_expect_success 'SIGTERM after the end of the input ends a retry'"'"'s wait too' '
	status_line w1 "$uid1" Stopped >in4 &&
	{ kstatus --coalesce 0 <in4 >out 2>err & } &&
	pid=$! &&
	test_wait_for 40 grep -Eq "retrying in ([2-9][0-9]{3}|[0-9]{5,}) ms" err &&
	start=$(now_ms) &&
	kill -TERM $pid &&
	wait $pid &&
	end=$(now_ms) &&
	test $((end - start)) -lt 1500 &&
	order >actual &&
	echo "status ns/w1 false" >expect &&
	test_cmp expect actual
'

# (w1 failing: each status retried for 0.7 to 1.4 s; one every 100 ms for 1.5 s,
# 200 ms windows: the window holds on while the one before is retried)
test_expect_success 'coalescing: one status of an object queued at a time, however long its retries' '
	faults "{\"rate\":1,\"code\":500,\"path\":\"/apis/test.example.org/v1/namespaces/ns/widgets/w1\"}" &&
	for i in $(seq 1 15); do status_line w1 "$uid1" "S$i" && sleep 0.1 || return 1; done |
		timeout 60 kstatus --coalesce 200ms --max-retries 3 >out 2>err &&
	jq -s "map(select(.for == \"status\" and .ok == false)) | length" out >failed &&
	test "$(cat failed)" -le 3 &&
	jq -e -s "length == 15 and (map(select(.skipped == \"superseded\")) | length) >= 12" out
'

# The repeats of one Event are known by the object'"'"'s kind, namespace (the
# default one when the line names none) and name: one writer counts them all.
test_expect_success 'the repeats of one Event go to one writer, however the line names its namespace' '
	faults "{\"reset\":true}" &&
	for i in 1 2 3 4 5 6 7 8; do
		printf "{\"op\":\"event\",\"primary\":\"default/c\",\"event\":{\"involvedObject\":{\"kind\":\"ConfigMap\",\"name\":\"c\"%s},\"type\":\"Normal\",\"reason\":\"Repeated\",\"message\":\"m\"}}\n" \
			"$(test $((i % 2)) = 0 && echo ",\"namespace\":\"default\",\"apiVersion\":\"v1\"")" || return 1
	done >in5 &&
	timeout 30 kstatus --concurrency 64 --coalesce 0 <in5 >out 2>err &&
	jq -c -s "map(.count)" out >actual &&
	echo "[1,2,3,4,5,6,7,8]" >expect &&
	test_cmp expect actual &&
	timeout 30 kubectl get events -n default -o json >events.json &&
	jq -c "[.items[] | select(.reason == \"Repeated\") | .count]" events.json >actual &&
	echo "[8]" >expect &&
	test_cmp expect actual
'

# (a writer at a time, each request 100 ms late: the writers hold 32 operations
# at most; the rest of the input stays in the pipe, its writer blocked)
test_expect_success 'input is not read further while the writers have as much as they may queue' '
	faults "{\"latency\":\"100ms\"}" &&
	for i in $(seq 1 3000); do status_line w2 "$uid2" "L$i" || return 1; done >big &&
	rm -f fifo2 && mkfifo fifo2 &&
	{ kstatus --concurrency 1 --coalesce 0 <fifo2 >out 2>err & } &&
	pid=$! &&
	{ cat big >fifo2 & } &&
	cat_pid=$! &&
	sleep 2 &&
	kill -0 $cat_pid &&
	kill -TERM $pid &&
	wait $pid &&
	test "$(wc -l <out)" -lt 100 &&
	faults "{\"reset\":true}"
'

test_expect_success 'cleanup' '
	faults "{\"reset\":true}"
'

test_done
