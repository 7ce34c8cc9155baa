#!/bin/sh
test_description='end to end on servers without streaming lists (ksim --watch-list refuse-storage and
gate-off): each watch falling back once, then the whole lifecycle (refuse-storage); what the operator says when it cannot
work around a refusal (--watch-list=always, a forbidden watch): /readyz, the log, backoff'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"
. "$TEST_DIRECTORY/lib-e2e.sh"

REFUSED_MSG="a watch stream was requested by the client but the required storage feature RequestWatchProgress is disabled"
GATE_MSG="ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled"

test_expect_success 'iot-operator: a bad --watch-list or KOP_WATCH_LIST is a usage error' '
	test_expect_code 100 env OPERATOR_NAME=$O iot-operator --watch-list sometimes 2>bad.err &&
	grep "invalid --watch-list .sometimes." bad.err &&
	test_expect_code 100 env OPERATOR_NAME=$O KOP_WATCH_LIST=sometimes iot-operator 2>bad.err &&
	grep "invalid KOP_WATCH_LIST .sometimes." bad.err
'

for mode in refuse-storage gate-off; do
	case $mode in
	refuse-storage) code=500 msg=$REFUSED_MSG ;;
	gate-off) code=422 msg=$GATE_MSG ;;
	esac
	readyz_always="not ready: the initial lists are not in yet: kwatch: streaming list of 'iotservices.cp.iot.sap@$O:l=:f=' failed ($code: $msg) and --watch-list=always does not fall back"
	e2e_ksim_start --watch-list $mode

	# After its fallback a watch reads the same way whatever the refusal said: the whole
	# lifecycle runs on the first server; on the second, the operator starts and an instance is
	# created, so that every watch starts (the Secrets of its namespace, too) and falls back.
	if test $mode = refuse-storage; then
		e2e_lifecycle op-$mode
	else
		test_expect_success "$mode: setup: the operator's initial lists, an instance's namespace watched" '
			e2e_install &&
			e2e_operator_start op-$mode &&
			test_wait_for 20 grep -q "initial lists are in" op-$mode.err &&
			k apply -f "$PROJECT_ROOT/deploy/example-iotservice.yaml" >example.out &&
			secrets_watched () {
				grep -q "streaming list of .secrets@$O-[^ ]* refused" op-$mode.err
			} &&
			test_wait_for 30 secrets_watched &&
			e2e_operator_stop op-$mode
		'
	fi

	test_expect_success "$mode: each watch fell back once, with the server's reason, at info" '
		OPERATOR_NAME=$O ireconcile --print-watches "$PROJECT_ROOT/pipeline/iotservice" >watches &&
		test -s watches &&
		jq -r "select(.prog == \"kwatch\" and (.msg | contains(\"streaming list\"))) | [.level, .msg] | @tsv" \
			op-$mode.err >fallbacks &&
		test $(wc -l <fallbacks) = $(wc -l <watches) &&
		! grep -v -F "	streaming list of " fallbacks &&
		! grep -v -F "refused ($code: $msg): read with paged LISTs and watches from now on" fallbacks &&
		! grep -v "^info	" fallbacks &&
		cut -f2 fallbacks | sort | uniq -d >twice &&
		test_cmp /dev/null twice
	'

	# No fallback: the pipeline cannot start, and says so where a user looks.
	test_expect_success "$mode: --watch-list=always: /readyz names the watch and the reason, the log too, with backoff" '
		e2e_operator_start always-$mode --watch-list=always &&
		retried () {
			test $(grep -c "streaming list of .iotservices.cp.iot.sap@$O:l=:f=. failed before its initial state was complete ($code: .*does not fall back" \
				always-$mode.err) -ge 3
		} &&
		test_wait_for 30 retried &&
		echo "$readyz_always" >readyz.expect &&
		ready_says () {
			test "$(e2e_readyz always-$mode)" = 503 &&
			test_cmp readyz.expect always-$mode.readyz
		} &&
		test_wait_for 20 ready_says &&
		jq -r "select(.msg | contains(\"does not fall back\")) | .level" always-$mode.err | sort -u >levels &&
		echo error >levels.expect &&
		test_cmp levels.expect levels &&
		! grep "initial lists are in" always-$mode.err &&
		e2e_operator_stop always-$mode
	'

	test_expect_success "$mode: a forbidden watch: /readyz says so, the pipeline restarts with backoff" '
		k delete clusterrolebinding iot-operator >del.out &&
		e2e_operator_start forbidden-$mode &&
		test_wait_for 40 eval "test \$(grep -c \"restarting the pipeline\" forbidden-$mode.err) -ge 3" &&
		ready_says () {
			test "$(e2e_readyz forbidden-$mode)" = 503 &&
			grep -q "^not ready: .*: kwatch: forbidden: cannot watch " forbidden-$mode.readyz
		} &&
		test_wait_for 20 ready_says &&
		jq -r "select(.msg | contains(\"restarting the pipeline\")) | .restartInMs" forbidden-$mode.err >delays &&
		: the third restart waits at least 4 times the base, the first at most twice it &&
		awk "NR == 1 { first = \$1 } NR == 3 { third = \$1 } END { exit !(third > first) }" delays &&
		e2e_operator_stop forbidden-$mode
	'

	test_expect_success "$mode: stop ksim" '
		ksim_stop
	'
done

test_done
