#!/bin/sh
test_description='kwatch across a ksim restarted without --data on the same port: its resourceVersion is
too large for the new server (ERROR 504 ResourceVersionTooLarge), kwatch relists and emits the difference'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"

CM=/api/v1/namespaces/default/configmaps

mkcm () {
	ksim_curl -o /dev/null -f -X POST -H "Content-Type: application/json" -d "{\"metadata\":{\"name\":\"$1\"}}" $CM
}
# count JQ-CONDITION: how many lines of kw.out match
count () {
	jq -s "map(select($1)) | length" kw.out 2>/dev/null
}
has () { # N JQ-CONDITION
	test "$(count "$2")" = "$1"
}

ksim_start
PORT=${KSIM_URL##*:}

# kwatch outlives this test (it is stopped in the last one): no test_when_finished here.
test_expect_success 'kwatch follows configmaps of a ksim far ahead of a fresh one' '
	i=0 && while test $i -lt 30; do mkcm old-$i || return 1; i=$((i + 1)); done &&
	ksim_curl -f -o list.json $CM &&
	jq -r ".items[].metadata.uid" list.json | sort >old.uids &&
	{ KOP_STATS_FD=5 timeout 120 kwatch -v configmaps@default >kw.out 2>kw.err 5>kw.stats 3>&- 4>&- &
	  echo $! >kw.pid; } &&
	test_wait_for 20 has 1 ".type == \"BOOKMARK\"" &&
	test "$(count ".type == \"ADDED\"")" = "$(wc -l <old.uids)" &&
	kill -KILL $KSIM_PID &&
	test_wait_for 10 test -f "$TRASH/ksim.rc"
'

# The same port, no --data: the resourceVersions start low again.
test -f "$TRASH/ksim.rc" || kill -KILL "$KSIM_PID" 2>/dev/null
ksim_start --port "$PORT"

test_expect_success 'after the restart: kwatch relists, the new object comes out, DELETED stubs for the gone ones' '
	test "${KSIM_URL##*:}" = "$PORT" &&
	test "$(ksim_curl -f $CM | jq -r .metadata.resourceVersion)" -lt 30 &&
	mkcm fresh &&
	test_wait_for 15 has 1 ".type == \"ADDED\" and .object.metadata.name == \"fresh\"" &&
	ksim_curl -f -o list.json $CM &&
	jq -r ".items[].metadata.uid" list.json | sort >new.uids &&
	comm -23 old.uids new.uids >gone.uids &&
	test -s gone.uids &&
	test_wait_for 5 has "$(wc -l <gone.uids)" ".type == \"DELETED\"" &&
	jq -r "select(.type == \"DELETED\") | .object.metadata.uid" kw.out | sort >deleted.uids &&
	test_cmp gone.uids deleted.uids &&
	jq -s -e "map(select(.type == \"DELETED\"))
		| all(.object.kind == \"ConfigMap\" and .object.apiVersion == \"v1\" and .object.metadata.namespace == \"default\")" kw.out &&
	# every object of the new ksim is out, after the relist (a stable sort keeps the last event of each name)
	jq -r "select(.type != \"BOOKMARK\") | [.object.metadata.name, .type, .object.metadata.uid] | @tsv" kw.out |
		sort -s -k 1,1 | awk -F "\t" "{ last[\$1] = \$0 } END { for (n in last) print last[n] }" | sort >final &&
	jq -r ".items[] | [.metadata.name, .metadata.uid] | @tsv" list.json | sort >expect.live &&
	awk -F "\t" "\$2 != \"DELETED\" { print \$1 \"\t\" \$3 }" final >actual.live &&
	test_cmp expect.live actual.live &&
	grep "is newer than the server" kw.err &&
	grep "Too large resource version" kw.err
'

test_expect_success '... kwatch_relists_total counts it, and kwatch goes on watching live' '
	test_when_finished "kill $(cat kw.pid) 2>/dev/null; :" &&
	test_wait_for 5 grep -q kwatch_relists_total kw.stats &&
	tail -n 1 kw.stats | jq -e "[.metrics[] | select(.name == \"kwatch_relists_total\") | .value][0] >= 1" &&
	mkcm later &&
	test_wait_for 10 has 1 ".type == \"ADDED\" and .object.metadata.name == \"later\"" &&
	kill -TERM $(cat kw.pid) &&
	test_wait_for 10 eval "! kill -0 $(cat kw.pid)" &&
	test_no_sanitizer_report kw.err &&
	ksim_stop
'

test_done
