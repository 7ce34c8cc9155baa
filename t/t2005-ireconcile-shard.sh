#!/bin/sh
test_description='ireconcile --shard: two complementary shards write exactly what one unsharded run writes, each for its own instances'
. "${0%/*}/test-lib.sh"

command -v ireconcile >/dev/null || test_skip_all 'ireconcile not built'

F="$PROJECT_ROOT/t/t2104-iotservice-ireconcile"
NOW=2026-11-22T10:05:00Z
OPERATOR_NAME=devawsk8s
export OPERATOR_NAME

# The two halves of the hash space, as the supervisor would give them to two replicas.
SHARD0=$("$KOP_TEST_TOOL" shard-split namespace 0 2)
SHARD1=$("$KOP_TEST_TOOL" shard-split namespace 1 2)
WHOLE=$("$KOP_TEST_TOOL" shard-mask namespace 3 2)

# shard_of NAME: 0 or 1, the half that instance NAME's namespace devawsk8s-NAME hashes into
shard_of () {
	case $("$KOP_TEST_TOOL" shard-hash "devawsk8s-$1") in
	[0-7]*) echo 0 ;;
	*) echo 1 ;;
	esac
}

# instance FIXTURE NAME [drop-primary]: t2104's FIXTURE with example-iotservice renamed NAME, into
# NAME.pre (before the bookmark) and NAME.post (after it), without the related Secret in devawsk8s;
# with drop-primary, without the IoTService (children whose instance is never seen)
instance () {
	jq -c --arg x "$2" --arg drop "${3:-}" '
		select(.type != "BOOKMARK" and (.object.metadata.namespace != "devawsk8s" or .object.kind != "Secret"))
		| select($drop == "" or .object.kind != "IoTService")
		| walk(if type == "string" then gsub("example-iotservice"; $x) else . end)' \
		"$F/$1.in.jsonl" >"$2.all" &&
	n=$(grep -n "\"type\":\"BOOKMARK\"" "$F/$1.in.jsonl" | cut -d: -f1) &&
	jq -c --arg x "$2" --arg drop "${3:-}" --argjson n "$n" '
		[inputs] | to_entries[] | select(.key + 2 > $n) | .value
		| select(.type != "BOOKMARK")
		| select($drop == "" or .object.kind != "IoTService")
		| walk(if type == "string" then gsub("example-iotservice"; $x) else . end)' \
		-n "$F/$1.in.jsonl" >"$2.post" &&
	grep -v -x -F -f "$2.post" "$2.all" >"$2.pre" || :
}

# canon FILE: its lines canonical and sorted (the order across primaries is the engine's)
canon () {
	jq -S -c -f "$TEST_DIRECTORY/normalize.jq" "$1" | sort
}

# primaries FILE: the primary of each operation in FILE, sorted, each once
primaries () {
	jq -r .primary "$1" | sort -u
}

test_expect_success 'setup: seven instances over both halves, a spread of work, children of one never seen' '
	instance 07-prune alpha &&
	instance 06-core bravo &&
	instance 05-edit-image delta &&
	instance 01-namespace golf &&
	instance 04-steady echo &&
	instance 09-delete charlie &&
	instance 04-steady hotel drop-primary &&
	test -s alpha.pre && test -s alpha.post && test -s hotel.pre && ! grep IoTService hotel.pre hotel.post &&
	# alpha and delta in one half, bravo, golf, charlie and hotel in the other
	for x in alpha delta echo; do test $(shard_of $x) = 0 || return 1; done &&
	for x in bravo golf charlie hotel; do test $(shard_of $x) = 1 || return 1; done &&
	{
		grep "\"name\":\"image-pull-secret\",\"namespace\":\"devawsk8s\"" "$F/04-steady.in.jsonl" &&
		cat alpha.pre bravo.pre delta.pre golf.pre echo.pre charlie.pre hotel.pre &&
		grep "\"type\":\"BOOKMARK\"" "$F/04-steady.in.jsonl" &&
		cat alpha.post bravo.post delta.post golf.post echo.post charlie.post hotel.post &&
		# alpha'"'"'s cockpit Deployment relabelled to bravo: it leaves alpha (in the other half) for bravo
		jq -c "select(.object.kind == \"Deployment\" and .object.metadata.name == \"cockpit-alpha\")
			| .type = \"MODIFIED\" | .object.metadata.resourceVersion = \"777\"
			| .object.metadata.labels[\"cp.iot.sap/instance\"] = \"bravo\"" alpha.pre
	} >in.jsonl &&
	test $(grep -c "\"cockpit-alpha\"" in.jsonl) -ge 2
'

test_expect_success 'unsharded: one run writes for every instance seen' '
	ireconcile --now $NOW "$PROJECT_ROOT/pipeline/iotservice" <in.jsonl >all.out 2>all.err &&
	test_no_sanitizer_report all.err &&
	primaries all.out >actual &&
	printf "devawsk8s/%s\n" alpha bravo charlie delta echo golf >expect &&
	test_cmp expect actual &&
	# deletes in both halves: what a shard must never do to the other'"'"'s children
	jq -r "select(.op == \"delete\") | .primary" all.out | sort -u >deleters &&
	printf "devawsk8s/%s\n" alpha bravo charlie >expect &&
	test_cmp expect deleters
'

for s in 0 1
do
	test_expect_success "shard $s: operations for its own instances only, none on another's objects" '
		eval sel=\$SHARD'$s' &&
		KOP_STATS_FD=5 ireconcile -v --now $NOW --shard "$sel" "$PROJECT_ROOT/pipeline/iotservice" \
			<in.jsonl >s'$s'.out 2>s'$s'.err 5>s'$s'.metrics &&
		test_no_sanitizer_report s'$s'.err &&
		test -s s'$s'.out &&
		for p in $(primaries s'$s'.out); do
			test $(shard_of ${p#devawsk8s/}) = '$s' || { echo "$p is not in shard '$s'"; return 1; }
		done &&
		# every object written or deleted lives in an instance namespace of the shard (or is the
		# IoTService), but the Deployment relabelled below: in alpha'"'"'s namespace, bravo'"'"'s now
		jq -r "select(.object.metadata.namespace != null and .object.metadata.namespace != \"devawsk8s\")
			| select(.object.metadata.name != \"cockpit-alpha\")
			| .object.metadata.namespace" s'$s'.out | sort -u >namespaces &&
		test -s namespaces &&
		while read -r ns; do
			test $(shard_of ${ns#devawsk8s-}) = '$s' || { echo "$ns is not in shard '$s'"; return 1; }
		done <namespaces
	'
done

test_expect_success 'both shards together: exactly the operations of the unsharded run' '
	canon all.out >expect &&
	cat s0.out s1.out >both.out &&
	canon both.out >actual &&
	test_cmp expect actual &&
	# (and neither is empty: each shard has its part)
	test -s s0.out && test -s s1.out
'

test_expect_success 'a child relabelled to another shard'"'"'s instance leaves the view, never deleted by its old shard' '
	# shard 0 (alpha) applies its cockpit Deployment again, shard 1 (bravo) prunes the one now labelled its own
	jq -r "select(.object.metadata.name == \"cockpit-alpha\") | [.op, .primary] | @tsv" s0.out | sort -u >actual &&
	printf "apply\tdevawsk8s/alpha\n" >expect &&
	test_cmp expect actual &&
	jq -r "select(.object.metadata.name == \"cockpit-alpha\") | [.op, .primary] | @tsv" s1.out | sort -u >actual &&
	printf "delete\tdevawsk8s/bravo\n" >expect &&
	test_cmp expect actual
'

test_expect_success 'children whose instance is never seen: nothing written, in either shard' '
	! grep -h "hotel" all.out s0.out s1.out
'

# dropped_events S: how many events of in.jsonl are of another shard'"'"'s instance: its IoTService,
# or an object labelled as one of its (the label the program maps children by)
dropped_events () {
	jq -r "select(.type != \"BOOKMARK\")
		| if .object.kind == \"IoTService\" then .object.metadata.name
		  else .object.metadata.labels[\"cp.iot.sap/instance\"] // empty end" in.jsonl |
		sort | uniq -c >instances &&
	n=0 &&
	while read -r c x; do
		test $(shard_of $x) = $1 || n=$((n + c))
	done <instances &&
	echo $n
}

for s in 0 1
do
	test_expect_success "shard $s: the events dropped counted (stats and metric), its primaries a gauge" '
		dropped_events '$s' >expect &&
		test $(cat expect) -gt 0 &&
		jq -r "select(.msg == \"stats\") | .shardDropped" s'$s'.err >actual &&
		test_cmp expect actual &&
		jq -r ".metrics[] | select(.name == \"ireconcile_shard_dropped_events_total\") | .value" \
			s'$s'.metrics | tail -n 1 >actual &&
		test_cmp expect actual &&
		jq -r ".metrics[] | select(.name == \"ireconcile_primaries\") | .value" s'$s'.metrics | tail -n 1 >actual &&
		jq -r "select(.object.kind == \"IoTService\" and .type != \"BOOKMARK\") | .object.metadata.name" in.jsonl |
			sort -u >names &&
		n=0 && while read -r x; do test $(shard_of $x) != '$s' || n=$((n + 1)); done <names &&
		echo $n >expect &&
		test_cmp expect actual
	'
done

# Aggregates count the shard'"'"'s instances only: the limit on parallel updates holds per replica.
test_expect_success 'aggregates are the shard'"'"'s: MAX_PARALLEL_UPDATES=1 admits one update per shard' '
	instance 05-edit-image india &&
	test $(shard_of india) = 1 &&
	{
		grep "\"name\":\"image-pull-secret\",\"namespace\":\"devawsk8s\"" "$F/04-steady.in.jsonl" &&
		cat delta.pre india.pre &&
		grep "\"type\":\"BOOKMARK\"" "$F/04-steady.in.jsonl" &&
		cat delta.post india.post
	} >two.jsonl &&
	# (the reason of each Progressing condition written)
	updating () {
		jq -r "select(.op == \"status\") | .object.status.conditions[] | select(.type == \"Progressing\") | .reason" "$1" |
			sort | uniq -c | sed "s/^ *//"
	} &&
	MAX_PARALLEL_UPDATES=1 ireconcile --now $NOW "$PROJECT_ROOT/pipeline/iotservice" <two.jsonl >two.out 2>two.err &&
	updating two.out >actual &&
	printf "1 UpdateQueued\n1 Updating\n" >expect && test_cmp expect actual &&
	for s in 0 1; do
		eval sel=\$SHARD$s &&
		MAX_PARALLEL_UPDATES=1 ireconcile --now $NOW --shard "$sel" "$PROJECT_ROOT/pipeline/iotservice" <two.jsonl \
			>two.$s.out 2>two.$s.err &&
		test_no_sanitizer_report two.$s.err &&
		updating two.$s.out >actual &&
		echo "1 Updating" >expect && test_cmp expect actual || return 1
	done
'

# Ranges added while running (a SHARDS line, as the supervisor sends when its replica gains them).
# shard 0 is fed what its kwatch would pass (the objects in shard 1'"'"'s instance namespaces left out,
# the unsharded ones kept), then the SHARDS line adding shard 1, then the objects in shard 1'"'"'s
# namespaces as their list gives them, then the bookmark that ends that list.
test_expect_success 'setup: what shard 0 is sent, and the list of shard 1'"'"'s namespaces' '
	jq -r ".object.metadata.namespace // empty" in.jsonl | sort -u | grep -v -x devawsk8s >namespaces.all &&
	while read -r ns; do
		case $("$KOP_TEST_TOOL" shard-hash "$ns") in
		[0-7]*) echo "{\"$ns\": 0}" ;;
		*) echo "{\"$ns\": 1}" ;;
		esac
	done <namespaces.all | jq -s add >ns-shard.json &&
	jq -e "[.[]] | index(0) and index(1)" ns-shard.json &&
	sharded="(.object.metadata.namespace // \"devawsk8s\") as \$ns | \$ns != \"devawsk8s\" and \$m[0][\$ns] == 1" &&
	jq -c --slurpfile m ns-shard.json "select(($sharded) | not)" in.jsonl >g0.jsonl &&
	test $(wc -l <g0.jsonl) -lt $(wc -l <in.jsonl) &&
	jq -n -c --arg add "$SHARD1" "{type: \"SHARDS\", add: \$add}" >shards.jsonl &&
	# the list: the last state of each object of shard 1'"'"'s namespaces still there, ADDED
	jq -c -n --slurpfile m ns-shard.json "[inputs | select($sharded)]
		| group_by(.object.kind, .object.metadata.namespace, .object.metadata.name) | .[] | last
		| select(.type != \"DELETED\") | .type = \"ADDED\"" in.jsonl >list1.jsonl &&
	test -s list1.jsonl &&
	grep "\"type\":\"BOOKMARK\"" "$F/04-steady.in.jsonl" >bookmark.jsonl &&
	# a change of alpha (shard 0) after the list: once its write is out, all before it was read
	jq -c "select(.object.kind == \"IoTService\" and .object.metadata.name == \"alpha\") | .type = \"MODIFIED\"
		| .object.metadata.generation += 10 | .object.metadata.resourceVersion = \"9001\"
		| .object.spec.cockpit.image = \"example.org/cockpit:sentinel\"" alpha.all | tail -n 1 >sentinel.jsonl &&
	test -s sentinel.jsonl &&
	# what shard 1 alone writes from the same final state, fresh: the objects no selector picks, and
	# those in its namespaces
	jq -c -n "[inputs | select(.type != \"BOOKMARK\") | select((.object.metadata.namespace // \"devawsk8s\") == \"devawsk8s\")]
		| group_by(.object.kind, .object.metadata.namespace, .object.metadata.name) | .[] | last
		| select(.type != \"DELETED\") | .type = \"ADDED\"" in.jsonl >unsharded.last &&
	cat unsharded.last list1.jsonl bookmark.jsonl >fresh1.jsonl &&
	ireconcile --now $NOW --shard "$SHARD1" "$PROJECT_ROOT/pipeline/iotservice" <fresh1.jsonl >fresh1.out 2>fresh1.err &&
	test_no_sanitizer_report fresh1.err &&
	test -s fresh1.out
'

# others_written FILE: how many of FILE's writes are for primaries other than alpha
others_written () {
	jq -c "select(.primary != null and .primary != \"devawsk8s/alpha\")" "$1" | wc -l
}

# shard0_written N: gain.out holds at least N writes for primaries other than alpha (before the
# bookmark, shard 0's: shard 1's wait for it)
shard0_written () {
	test "$(others_written gain.out)" -ge "$1"
}

test_expect_success 'ranges added: their primaries wait for the list, then are worked for as by a fresh run' '
	mkfifo gain.in &&
	{ (ireconcile -v --now $NOW --shard "$SHARD0" "$PROJECT_ROOT/pipeline/iotservice" <gain.in >gain.out 2>gain.err;
	   echo $? >gain.code) & } &&
	exec 7>gain.in &&
	cat g0.jsonl shards.jsonl list1.jsonl sentinel.jsonl >&7 &&
	test_wait_for 30 grep -q "cockpit:sentinel" gain.out &&
	grep "cockpit:sentinel" gain.out >/dev/null &&
	# (the reconciles queued behind alpha'"'"'s may still be on their way: what shard 0 wrote alone)
	test_wait_for 30 shard0_written $(others_written s0.out) &&
	# before the bookmark: shard 0'"'"'s own writes only (shard 1'"'"'s primaries were parked, then waited)
	cp gain.out before.out &&
	for p in $(primaries before.out); do
		test $(shard_of ${p#devawsk8s/}) = 0 || { echo "$p written for before its list was in"; return 1; }
	done &&
	grep "ranges added: $SHARD1" gain.err >/dev/null &&
	cat bookmark.jsonl >&7 &&
	exec 7>&- &&
	test_wait_for 30 test -s gain.code &&
	test "$(cat gain.code)" = 0 &&
	test_no_sanitizer_report gain.err &&
	n=0 && for x in $(jq -r "select(.object.kind == \"IoTService\") | .object.metadata.name" unsharded.last); do
		test $(shard_of $x) = 0 || n=$((n + 1))
	done &&
	grep "the initial lists of the ranges added are in: reconciling their $n primaries" gain.err >/dev/null &&
	# after it: for shard 1, what a fresh run of shard 1 writes from the same state
	jq -c "select(.primary != null)" gain.out >gain.ops &&
	jq -c --argjson n "$(wc -l <before.out)" -n "[inputs] | .[\$n:][]" gain.out >after.out &&
	jq -c "select(.primary | IN(\"devawsk8s/alpha\", \"devawsk8s/delta\", \"devawsk8s/echo\") | not)" after.out >after1.out &&
	canon fresh1.out >expect &&
	canon after1.out >actual &&
	test_cmp expect actual &&
	# and before it, for shard 0, what shard 0 wrote alone (alpha aside: its change may join its last
	# reconcile before it)
	jq -c "select(.primary != \"devawsk8s/alpha\")" s0.out >s0-alpha.out &&
	jq -c "select(.primary != \"devawsk8s/alpha\")" before.out >before0.out &&
	test -s before0.out &&
	canon s0-alpha.out >expect &&
	canon before0.out >actual &&
	test_cmp expect actual
'

# Pods listed with a range being added start no --settle burst: the primary
# waits for its list, then is reconciled once (not again when a burst would
# end).
test_expect_success 'ranges added: pods listed with them start no --settle burst, each primary reconciled once' '
	mkdir burst &&
	(cd burst && instance 04-steady bravo) &&
	grep -q "\"kind\":\"Pod\"" burst/bravo.all &&
	mkfifo burst.in &&
	{ ( grep "\"name\":\"image-pull-secret\",\"namespace\":\"devawsk8s\"" "$F/04-steady.in.jsonl"
	    jq -c "select(.object.metadata.namespace == \"devawsk8s\")" burst/bravo.all
	    cat bookmark.jsonl shards.jsonl
	    jq -c "select(.object.metadata.namespace != \"devawsk8s\" and .object.kind != \"Pod\")" burst/bravo.all
	    # (the pods once the queue has been drained of the waiting primary)
	    test_wait_for 30 grep -q "ranges added: " burst.err
	    sleep 0.3
	    jq -c "select(.object.kind == \"Pod\")" burst/bravo.all
	    cat bookmark.jsonl
	    test_wait_for 30 grep -q "the initial lists of the ranges added are in" burst.err
	    sleep 1 ) >burst.in & } &&
	ireconcile -v --now $NOW --shard "$SHARD0" "$PROJECT_ROOT/pipeline/iotservice" <burst.in >burst.out 2>burst.err &&
	test_no_sanitizer_report burst.err &&
	grep "the initial lists of the ranges added are in: reconciling their 1 primaries" burst.err >/dev/null &&
	test "$(grep -c "\"reconciled .devawsk8s/bravo.\"" burst.err)" = 1
'

test_expect_success 'ranges removed: their primaries leave unreconciled, a barrier after their writes, nothing of theirs after' '
	ireconcile --now $NOW --shard "$WHOLE" "$PROJECT_ROOT/pipeline/iotservice" <in.jsonl >whole.out 2>whole.err &&
	canon all.out >expect && canon whole.out >actual && test_cmp expect actual &&
	jq -c "select(.object.kind == \"IoTService\" and (.object.metadata.name | IN(\"alpha\", \"bravo\"))) | .type = \"MODIFIED\"
		| .object.metadata.generation += 20 | .object.metadata.resourceVersion = \"9100\"
		| .object.spec.cockpit.image = \"example.org/cockpit:after-remove\"" alpha.all bravo.all |
		jq -s -c "group_by(.object.metadata.name) | .[] | last" >edits.jsonl &&
	test $(wc -l <edits.jsonl) = 2 &&
	{
		cat in.jsonl &&
		jq -n -c --arg r "$SHARD1" "{type: \"SHARDS\", remove: \$r, barrier: 7}" &&
		cat edits.jsonl
	} >remove.jsonl &&
	ireconcile -v --now $NOW --shard "$WHOLE" "$PROJECT_ROOT/pipeline/iotservice" <remove.jsonl >remove.out 2>remove.err &&
	test_no_sanitizer_report remove.err &&
	grep -c "^{\"barrier\":7}\$" remove.out >n && echo 1 >expect && test_cmp expect n &&
	sed -n "/^{\"barrier\":7}\$/,\$p" remove.out | sed 1d >after.out &&
	grep "cockpit:after-remove" after.out >/dev/null &&
	for p in $(primaries after.out); do
		test $(shard_of ${p#devawsk8s/}) = 0 || { echo "$p written for after its range was removed"; return 1; }
	done &&
	: every instance of shard 1 known, by its IoTService or by its children alone &&
	n=0 && for x in $(jq -r "select(.type != \"BOOKMARK\") | if .object.kind == \"IoTService\" then .object.metadata.name
			else .object.metadata.labels[\"cp.iot.sap/instance\"] // empty end" in.jsonl | sort -u); do
		test $(shard_of $x) = 0 || n=$((n + 1))
	done &&
	jq -r .msg remove.err | grep -F "ranges removed: $SHARD1; $n primaries left the view, unreconciled"
'

test_expect_success 'ranges removed, then added again: their primaries come back from the park, wait, then are worked for' '
	{
		cat remove.jsonl &&
		jq -n -c --arg a "$SHARD1" "{type: \"SHARDS\", add: \$a}" &&
		cat list1.jsonl bookmark.jsonl
	} >readd.jsonl &&
	ireconcile -v --now $NOW --shard "$WHOLE" "$PROJECT_ROOT/pipeline/iotservice" <readd.jsonl >readd.out 2>readd.err &&
	test_no_sanitizer_report readd.err &&
	sed -n "/^{\"barrier\":7}\$/,\$p" readd.out | sed 1d >after.out &&
	primaries after.out >ps &&
	grep -x "devawsk8s/bravo" ps &&
	n=0 && for x in $(jq -r "select(.object.kind == \"IoTService\") | .object.metadata.name" unsharded.last); do
		test $(shard_of $x) = 0 || n=$((n + 1))
	done &&
	jq -r .msg readd.err | grep -F "the initial lists of the ranges added are in: reconciling their $n primaries"
'

test_expect_success 'a SHARDS remove that cannot be read is skipped, named; everything removed leaves none held' '
	{
		cat g0.jsonl &&
		echo "{\"type\":\"SHARDS\",\"remove\":\"shardRange(object.metadata.uid, '"'"'0x0000000000000000'"'"', '"'"'0x10000000000000000'"'"')\"}" &&
		echo "{\"type\":\"SHARDS\",\"remove\":\"shardRange(\"}" &&
		jq -n -c --arg r "$SHARD0" "{type: \"SHARDS\", remove: \$r, barrier: 1}" &&
		cat edits.jsonl
	} >rm-bad.jsonl &&
	KOP_STATS_FD=5 ireconcile --now $NOW --shard "$SHARD0" "$PROJECT_ROOT/pipeline/iotservice" <rm-bad.jsonl \
		>rm-bad.out 2>rm-bad.err 5>rm-bad.metrics &&
	test_no_sanitizer_report rm-bad.err &&
	jq -r .msg rm-bad.err >msg &&
	test $(grep -c "a SHARDS line whose \"remove\" .* is not a shard selector of the same field as --shard" msg) = 2 &&
	sed -n "/^{\"barrier\":1}\$/,\$p" rm-bad.out | sed 1d >after.out &&
	test_cmp /dev/null after.out &&
	jq -r ".metrics[] | select(.name == \"ireconcile_primaries\") | .value" rm-bad.metrics | tail -n 1 >actual &&
	echo 0 >expect && test_cmp expect actual
'

test_expect_success 'a SHARDS line that cannot be read is skipped, named; without --shard, said and skipped' '
	{ cat g0.jsonl && echo "{\"type\":\"SHARDS\",\"add\":\"shardRange(object.metadata.uid, '"'"'0x0000000000000000'"'"', '"'"'0x10000000000000000'"'"')\"}" &&
	  echo "{\"type\":\"SHARDS\"}"; } >bad.jsonl &&
	ireconcile --now $NOW --shard "$SHARD0" "$PROJECT_ROOT/pipeline/iotservice" <bad.jsonl >bad.out 2>bad.err &&
	test_no_sanitizer_report bad.err &&
	jq -r .msg bad.err >msg &&
	grep -F "is not a shard selector of the same field as --shard" msg &&
	grep -F "all shard ranges must use the same field" msg &&
	grep -F "a SHARDS line without \"add\"" msg &&
	canon s0.out >expect && canon bad.out >actual && test_cmp expect actual &&
	ireconcile --now $NOW "$PROJECT_ROOT/pipeline/iotservice" <shards.jsonl >none.out 2>none.err &&
	test_cmp /dev/null none.out &&
	grep -F "a SHARDS line without --shard" none.err
'

test_expect_success 'a --shard that does not parse: 100, naming the option and what the parser says' '
	test_expect_code 100 ireconcile --shard "shardRange(object.metadata.namespace, 0x0" "$PROJECT_ROOT/pipeline/iotservice" \
		</dev/null >out 2>err &&
	test_cmp /dev/null out &&
	"$KOP_TEST_TOOL" shard-parse "shardRange(object.metadata.namespace, 0x0" >parser || : &&
	words=$(sed "s/^error: //" parser) && test -n "$words" &&
	jq -r .msg err >msg &&
	grep -F -- "invalid --shard '"'"'shardRange(object.metadata.namespace, 0x0'"'"': $words" msg
'

test_expect_success 'a --shard on uids: 100 (a primary'"'"'s key is a namespace'"'"'s name)' '
	test_expect_code 100 ireconcile --shard "$("$KOP_TEST_TOOL" shard-split uid 0 2)" "$PROJECT_ROOT/pipeline/iotservice" \
		</dev/null >out 2>err &&
	jq -r .msg err >msg &&
	grep -F -- "invalid --shard" msg && grep -F "object.metadata.namespace" msg
'

test_expect_success 'a program without a shard key: --shard is refused (100), naming the program and the key' '
	test_expect_code 100 ireconcile --shard "$SHARD0" "$PROJECT_ROOT/pipeline/at" </dev/null >out 2>err &&
	test_cmp /dev/null out &&
	jq -r .msg err >msg &&
	grep -F -- "--shard: program '"'"'at'"'"' declares no shard key (primary.shardKey)" msg
'

test_expect_success '--print-watches: "shard": "namespace" on the namespaced children and pods, nowhere else' '
	ireconcile --print-watches "$PROJECT_ROOT/pipeline/iotservice" >watches &&
	jq -r "[.role, .resource, .namespace, .shard // \"-\"] | @tsv" watches >actual &&
	cat >expect <<-\EOT &&
	primary	iotservices.cp.iot.sap	devawsk8s	-
	child	namespaces		-
	child	rolebindings.rbac.authorization.k8s.io		namespace
	child	secrets	~	namespace
	child	services		namespace
	child	deployments.apps		namespace
	child	statefulsets.apps		namespace
	child	networkpolicies.networking.k8s.io		namespace
	observed	pods		namespace
	related	secrets	devawsk8s	-
	EOT
	test_cmp expect actual &&
	ireconcile --print-watches "$PROJECT_ROOT/pipeline/memcached" >watches &&
	jq -r "[.role, .resource, .shard // \"-\"] | @tsv" watches >actual &&
	printf "primary\tmemcacheds.cache.example.com\t-\nchild\tdeployments.apps\tnamespace\nobserved\tpods\tnamespace\n" >expect &&
	test_cmp expect actual &&
	ireconcile --print-watches "$PROJECT_ROOT/pipeline/at" >watches &&
	! grep shard watches
'

# A copy of t2001's widgets program with a shard key (SED: the edit of its program.yml).
widgets () {
	rm -rf prog && mkdir prog &&
	cp -R "$PROJECT_ROOT/t/t2001-ireconcile-engine/widgets" prog/ &&
	cp -R "$PROJECT_ROOT/pipeline/lib" prog/lib &&
	sed "$1" "$PROJECT_ROOT/t/t2001-ireconcile-engine/widgets/program.yml" >prog/widgets/program.yml
}

test_expect_success '--print-watches: a kind held to one namespace, or of scope Cluster, has no shard field' '
	widgets "s|^  finalizer: test.example.org/cleanup|&\n  shardKey: \"{team}-{name}\"|
		s|^  - {resource: configmaps, apiVersion: v1, kind: ConfigMap}|&\n  - {resource: widgetclasses.test.example.org, apiVersion: test.example.org/v1, kind: WidgetClass, scope: Cluster}\n  - {resource: secrets, apiVersion: v1, kind: Secret, namespace: elsewhere}|" &&
	grep -c "shardKey\|WidgetClass\|elsewhere" prog/widgets/program.yml >n && echo 3 >expect && test_cmp expect n &&
	WIDGET_TEAM=blue ireconcile --print-watches prog/widgets >watches &&
	jq -r "[.role, .resource, .shard // \"-\"] | @tsv" watches >actual &&
	cat >expect <<-\EOT &&
	primary	widgets.test.example.org	-
	child	namespaces	-
	child	configmaps	namespace
	child	widgetclasses.test.example.org	-
	child	secrets	-
	observed	pods	namespace
	related	configmaps	-
	EOT
	test_cmp expect actual
'

# bad_key SED MESSAGE: the widgets program so edited is refused (100) with MESSAGE
bad_key () {
	widgets "s|^  finalizer: test.example.org/cleanup|&\n  shardKey: $1|" &&
	test_expect_code 100 env WIDGET_TEAM=blue ireconcile --print-watches prog/widgets >out 2>err &&
	test_cmp /dev/null out &&
	jq -r .msg err >msg &&
	grep -F -- "$2" msg
}

test_expect_success 'a shard key is checked when the program loads: each fault named (100)' '
	bad_key "\"{color}-{name}\"" "'"'"'primary.shardKey'"'"': unknown or empty setting '"'"'color'"'"'" &&
	bad_key "\"{team}\"" "'"'"'primary.shardKey'"'"' '"'"'{team}'"'"' names neither {name} nor {namespace}" &&
	bad_key "\"{name\"" "'"'"'primary.shardKey'"'"': a '"'"'{'"'"' without its '"'"'}'"'"'" &&
	bad_key "\"\"" "'"'"'primary.shardKey'"'"' is empty" &&
	bad_key "[a]" "'"'"'primary.shardKey'"'"' must be a string" &&
	widgets "s|^  finalizer: test.example.org/cleanup|&\n  shardKey: \"{name}\"|
		s|^  - {name: loud,|  - {name: name, env: WIDGET_NAME, default: x}\n&|" &&
	test_expect_code 100 env WIDGET_TEAM=blue ireconcile --print-watches prog/widgets >out 2>err &&
	grep -F "'"'"'{name}'"'"' is the primary'"'"'s metadata.name, and a setting has that name too" err &&
	widgets "s|^  finalizer: test.example.org/cleanup|&\n  shardKey: \"{team}-{name}\"|
		s|^  - {resource: configmaps, apiVersion: v1, kind: ConfigMap}|  - {resource: configmaps, apiVersion: v1, kind: ConfigMap, scope: Global}|" &&
	test_expect_code 100 env WIDGET_TEAM=blue ireconcile --print-watches prog/widgets >out 2>err &&
	grep -F "'"'"'children[1].scope'"'"' must be Cluster or Namespaced, not '"'"'Global'"'"'" err
'

test_done
