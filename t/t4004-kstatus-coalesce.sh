#!/bin/sh
test_description='kstatus --coalesce: per object, the lines that follow a write within the window are held

A status of an object is written at once when no window is open for it;
the statuses that come within the window are held: only the newest is
written when the window ends (the replaced ones answer "skipped":"superseded"),
then the events that came while it was held, repeats of one Event as one
write. Other objects are not held by it; end of input and SIGTERM write what
is held. Writes are counted by ksim (GET /ksim/stats, user agent
iot-operator/kstatus).'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"
. "$TEST_DIRECTORY/lib-kstatus.sh"

ksim_start

# event_line NAME UID REASON MESSAGE
event_line () {
	printf '{"op":"event","primary":"ns/%s","event":{"involvedObject":{"apiVersion":"test.example.org/v1","kind":"Widget","namespace":"ns","name":"%s","uid":"%s"},"type":"Normal","reason":"%s","message":"%s"}}\n' \
		"$1" "$1" "$2" "$3" "$4"
}

reset_stats () {
	curl -sS -f -m 10 -X POST -d "{\"reset\":true}" "$KSIM_URL/ksim/stats" >/dev/null
}

# kstatus_writes VERB: requests of that verb kstatus sent since the last reset
kstatus_writes () {
	curl -sS -f -m 10 "$KSIM_URL/ksim/stats" >stats.json &&
	jq -r --arg v "$1" ".byAgent[\"iot-operator/kstatus\"][\$v] // 0" stats.json
}

phase_is () {
	test "$(phase_of "$1")" = "$2"
}

# results_for NAME: the status results for ns/NAME in out, as [ok, code, skipped]
results_for () {
	jq -c -s "[.[] | select(.op == \"result\" and .for == \"status\" and .primary == \"ns/$1\")
		| [.ok, .code, .skipped]]" out
}

test_expect_success 'setup: ksim, a CRD with a status subresource, Widgets w1 and w2' '
	widgets_setup
'
uid1=$(cat uid1 2>/dev/null)
uid2=$(cat uid2 2>/dev/null)

test_expect_success '--help documents --coalesce; a bad window exits 100' '
	kstatus --help >help &&
	grep -e "--coalesce D" help &&
	test_expect_code 100 kstatus --coalesce nonsense </dev/null >out 2>err &&
	test_expect_code 100 kstatus --coalesce 31s </dev/null >out 2>err &&
	test_expect_code 100 kstatus --coalesce -1 </dev/null >out 2>err
'

test_expect_success 'four statuses of one object in a window: the first and the last are written' '
	{
		status_line w1 "$uid1" One &&
		status_line w1 "$uid1" Two &&
		status_line w1 "$uid1" Three &&
		status_line w1 "$uid1" Four
	} >in &&
	reset_stats &&
	timeout 30 kstatus --coalesce 10s <in >out 2>err &&
	test "$(kstatus_writes PATCH)" = 2 &&
	test "$(phase_of w1)" = Four &&
	results_for w1 >actual &&
	echo "[[true,200,null],[true,null,\"superseded\"],[true,null,\"superseded\"],[true,200,null]]" >expect &&
	test_cmp expect actual &&
	jq -e -s "map(select(.skipped == \"superseded\")) | all(.ref.name == \"w1\" and .ref.kind == \"Widget\")" out
'

test_expect_success 'the default window (500ms) coalesces too' '
	{
		status_line w1 "$uid1" Five &&
		status_line w1 "$uid1" Six &&
		status_line w1 "$uid1" Seven
	} >in &&
	reset_stats &&
	timeout 30 kstatus <in >out 2>err &&
	test "$(kstatus_writes PATCH)" = 2 &&
	test "$(phase_of w1)" = Seven
'

test_expect_success '--coalesce 0 writes every line at once' '
	{
		status_line w1 "$uid1" One &&
		status_line w1 "$uid1" Two &&
		status_line w1 "$uid1" Three &&
		status_line w1 "$uid1" Four
	} >in &&
	reset_stats &&
	timeout 30 kstatus --coalesce 0 <in >out 2>err &&
	test "$(kstatus_writes PATCH)" = 4 &&
	test "$(phase_of w1)" = Four &&
	results_for w1 >actual &&
	echo "[[true,200,null],[true,200,null],[true,200,null],[true,200,null]]" >expect &&
	test_cmp expect actual
'

test_expect_success 'a window ends on its own: the held status is written with the input still open' '
	rm -f fifo && mkfifo fifo &&
	# braces: "mkfifo && (...) &" would send mkfifo to the background too
	{ (
		status_line w1 "$uid1" A1 &&
		status_line w1 "$uid1" A2 &&
		status_line w2 "$uid2" B1 &&
		exec sleep 30
	) >fifo & } &&
	echo $! >writer.pid &&
	test_when_finished "kill \$(cat writer.pid) 2>/dev/null; wait \$(cat kstatus.pid) 2>/dev/null; :" &&
	reset_stats &&
	{ timeout 60 kstatus --coalesce 3s <fifo >out 2>err & } &&
	echo $! >kstatus.pid &&
	test_wait_for 10 grep -q "\"primary\":\"ns/w2\"" out &&
	# w2 was not held by the window of w1: its status is there, w1 still has A1
	test "$(phase_of w2)" = B1 &&
	test "$(phase_of w1)" = A1 &&
	test "$(results_for w1)" = "[[true,200,null]]" &&
	# then the window of w1 ends while the input is still open
	test_wait_for 10 phase_is w1 A2 &&
	kill -0 "$(cat writer.pid)" &&
	test "$(results_for w1)" = "[[true,200,null],[true,200,null]]" &&
	test "$(kstatus_writes PATCH)" = 3 &&
	kill "$(cat writer.pid)" &&
	wait "$(cat kstatus.pid)"
'

test_expect_success 'end of input writes what is held at once, not when the window ends' '
	{
		status_line w1 "$uid1" C1 &&
		status_line w1 "$uid1" C2 &&
		status_line w1 "$uid1" C3
	} >in &&
	start=$(date +%s) &&
	timeout 25 kstatus --coalesce 30s <in >out 2>err &&
	test $(( $(date +%s) - start )) -lt 20 &&
	test "$(phase_of w1)" = C3 &&
	test "$(results_for w1)" = "[[true,200,null],[true,null,\"superseded\"],[true,200,null]]"
'

test_expect_success 'SIGTERM writes what is held, then exits 0' '
	rm -f fifo && mkfifo fifo &&
	# braces: "mkfifo && (...) &" would send mkfifo to the background too
	{ (
		status_line w1 "$uid1" D1 &&
		status_line w1 "$uid1" D2 &&
		exec sleep 30
	) >fifo & } &&
	echo $! >writer.pid &&
	test_when_finished "kill \$(cat writer.pid) 2>/dev/null; :" &&
	{ timeout 60 kstatus --coalesce 30s <fifo >out 2>err & } &&
	pid=$! &&
	test_wait_for 10 grep -q "\"for\":\"status\"" out &&
	test "$(phase_of w1)" = D1 &&
	kill -TERM $pid &&
	rc=0 && wait $pid || rc=$? &&
	test "$rc" = 0 &&
	test "$(phase_of w1)" = D2 &&
	test "$(results_for w1)" = "[[true,200,null],[true,200,null]]"
'

test_expect_success 'events behind a held status wait for it: repeats are one write with their count, a distinct one is kept' '
	{
		status_line w1 "$uid1" E1 &&
		event_line w1 "$uid1" Ready "all ready" &&
		status_line w1 "$uid1" E2 &&
		event_line w1 "$uid1" Ready "all ready" &&
		event_line w1 "$uid1" Scaled "scaled to 2" &&
		event_line w1 "$uid1" Ready "all ready"
	} >in &&
	reset_stats &&
	timeout 30 kstatus --coalesce 10s <in >out 2>err &&
	# E1 and the first Ready at once (no status held), E2 held, then the
	# events that came after it: Ready twice as one PATCH (count 3), Scaled
	test "$(kstatus_writes POST)" = 2 &&
	test "$(kstatus_writes PATCH)" = 3 &&
	jq -c -s "map(select(.for == \"event\") | [.ok, .count])" out >actual &&
	echo "[[true,1],[true,2],[true,3],[true,1]]" >expect &&
	test_cmp expect actual &&
	timeout 30 kubectl get events -n ns -o json >events.json &&
	jq -c "[.items[] | select(.involvedObject.name == \"w1\") | [.reason, .message, .count]] | sort" events.json >actual &&
	echo "[[\"Ready\",\"all ready\",3],[\"Scaled\",\"scaled to 2\",1]]" >expect &&
	test_cmp expect actual &&
	test "$(phase_of w1)" = E2 &&
	# the results in the order of the writes: E1, Ready, E2, Ready x2, Scaled
	jq -c -s "map(.for)" out >actual &&
	echo "[\"status\",\"event\",\"status\",\"event\",\"event\",\"event\"]" >expect &&
	test_cmp expect actual &&
	jq -s -e "(.[2].resourceVersion | tonumber) < (.[3].resourceVersion | tonumber) and
		(.[1].resourceVersion | tonumber) < (.[2].resourceVersion | tonumber)" out
'

test_expect_success 'an event with no status held is written at once, as before' '
	{
		event_line w2 "$uid2" Polled "polled" &&
		event_line w2 "$uid2" Polled "polled" &&
		event_line w2 "$uid2" Polled "polled"
	} >in &&
	reset_stats &&
	timeout 30 kstatus --coalesce 10s <in >out 2>err &&
	test "$(kstatus_writes POST)" = 1 &&
	test "$(kstatus_writes PATCH)" = 2 &&
	jq -c -s "map(.count)" out >actual &&
	echo "[1,2,3]" >expect &&
	test_cmp expect actual &&
	timeout 30 kubectl get events -n ns -o json >events.json &&
	jq -e "[.items[] | select(.reason == \"Polled\")] | length == 1 and .[0].count == 3" events.json
'

test_expect_success 'a barrier line: what is held is written first, then it passes, the input still open' '
	rm -f fifo && mkfifo fifo &&
	# braces: "mkfifo && (...) &" would send mkfifo to the background too
	{ (
		status_line w1 "$uid1" E1 &&
		status_line w1 "$uid1" E2 &&
		event_line w1 "$uid1" Held "behind E2" &&
		echo "{\"barrier\":3}" &&
		exec sleep 30
	) >fifo & } &&
	echo $! >writer.pid &&
	test_when_finished "kill \$(cat writer.pid) 2>/dev/null; wait \$(cat kstatus.pid) 2>/dev/null; :" &&
	{ timeout 60 kstatus --coalesce 30s <fifo >out 2>err & } &&
	echo $! >kstatus.pid &&
	test_wait_for 10 grep -q "^{\"barrier\":3}\$" out &&
	grep "^{\"barrier\":3}\$" out >/dev/null &&
	# before it: both statuses and the event written, their results out
	sed "/^{\"barrier\":3}\$/,\$d" out >before &&
	test "$(jq -c -s "[.[] | select(.for == \"status\") | .ok]" before)" = "[true,true]" &&
	test "$(jq -c -s "[.[] | select(.for == \"event\") | .ok]" before)" = "[true]" &&
	test "$(phase_of w1)" = E2 &&
	kill -0 "$(cat writer.pid)" &&
	kill "$(cat writer.pid)" &&
	wait "$(cat kstatus.pid)"
'

test_expect_success 'cleanup' '
	ksim_stop
'

test_done
