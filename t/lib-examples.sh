# Helpers for the example operators (pipeline/memcached, at, experimental):
# the golden tests t28NN, their make-fixtures.sh scripts, and the end-to-end
# tests t29NN. Needs PROJECT_ROOT and the tools on PATH; the ksim helpers need
# KUBECONFIG (lib-ksim.sh's ksim_start sets it).
#
#   example_watch_args PROGRAM         kwatch's arguments for the program's watches, one a line
#   example_snapshot PROGRAM FILE      kwatch --once of those watches into FILE (the initial
#                                      state and the BOOKMARK line: an ireconcile input)
#   example_step PROGRAM FILE [NOW]    ireconcile (with --now NOW) on FILE, its operations
#                                      through kapply and kstatus: one reconcile done by hand
#   example_operator_start PROGRAM     iot-operator --program PROGRAM in the background
#                                      (operator.pid, operator.log in the current directory)
#   example_operator_stop              SIGTERM, at most 15 s, then SIGKILL; fails unless it
#                                      exited 0 without a sanitizer report
#   example_get PATH FILE              GET PATH from the API server into FILE (curl, kubeconfig's server)
#   example_golden_tests               one test per $FIXTURES/NAME.in.jsonl: the script's own
#                                      `reconcile NAME` writes NAME.expect.jsonl to NAME.out,
#                                      with no warning or error in NAME.err
#   example_status_is NAME JSON        the status NAME.out writes is JSON (compact)
#   example_e2e_setup                  skips unless every tool is built; ksim started, and a
#                                      trap that stops the operator and ksim on exit
#   example_operator_done              the operator never restarted its pipeline, logged no
#                                      error and stops cleanly; then ksim stops
#   example_fixtures_ksim              for make-fixtures.sh (set -e): ksim in a new temporary
#                                      directory W (the current one, removed on exit),
#                                      KUBECONFIG exported, SERVER its address
#   example_wait_for CMD...            CMD every 0.2 s until it succeeds; fails after 20 s
#   example_record_deletion PROGRAM FILE PATH N
#                                      kwatch --record of the program's watches into FILE
#                                      while PATH is deleted, until FILE holds N DELETED events

example_watch_args () {
	ireconcile --print-watches "$1" >"${TMPDIR:-/tmp}/ex-watches.$$" || return 1
	jq -r '.resource + "@" + (if .namespace == "" then "*" else .namespace end) + ":l=" + .labelSelector + ":f=" + .fieldSelector' \
		<"${TMPDIR:-/tmp}/ex-watches.$$"
	ew_rc=$?
	rm -f "${TMPDIR:-/tmp}/ex-watches.$$"
	return $ew_rc
}

example_snapshot () {
	# the arguments hold no blanks: word splitting is what we want
	# shellcheck disable=SC2046
	timeout 30 kwatch --once $(example_watch_args "$1") >"$2"
}

example_step () {
	if test -n "$3"; then
		timeout 30 ireconcile --now "$3" "$1" <"$2" >"${TMPDIR:-/tmp}/ex-ops.$$"
	else
		timeout 30 ireconcile "$1" <"$2" >"${TMPDIR:-/tmp}/ex-ops.$$"
	fi || return 1
	timeout 60 kapply <"${TMPDIR:-/tmp}/ex-ops.$$" >"${TMPDIR:-/tmp}/ex-applied.$$" &&
	timeout 60 kstatus <"${TMPDIR:-/tmp}/ex-applied.$$" >"${TMPDIR:-/tmp}/ex-results.$$" &&
	! grep '"ok":false' "${TMPDIR:-/tmp}/ex-results.$$"
	es_rc=$?
	rm -f "${TMPDIR:-/tmp}/ex-ops.$$" "${TMPDIR:-/tmp}/ex-applied.$$" "${TMPDIR:-/tmp}/ex-results.$$"
	return $es_rc
}

example_operator_start () {
	rm -f operator.pid operator.code
	(
		OPERATOR_NAME=default iot-operator --leader-elect=false --metrics-addr 0 --program "$1" \
			>operator.out 2>operator.log </dev/null &
		echo $! >operator.pid.tmp && mv operator.pid.tmp operator.pid
		wait $!
		echo $? >operator.code.tmp && mv operator.code.tmp operator.code
	) >/dev/null 2>&1 &
	eo_i=0
	while ! test -s operator.pid && test $eo_i -lt 100; do
		sleep 0.05
		eo_i=$((eo_i + 1))
	done
	test -s operator.pid
}

example_operator_stop () {
	test -s operator.pid || return 0
	kill -TERM "$(cat operator.pid)" 2>/dev/null
	eo_i=0
	while ! test -f operator.code && test $eo_i -lt 150; do
		sleep 0.1
		eo_i=$((eo_i + 1))
	done
	if ! test -f operator.code; then
		kill -KILL "$(cat operator.pid)" 2>/dev/null
		echo "iot-operator did not stop within 15 s of SIGTERM"
		rm -f operator.pid
		return 1
	fi
	rm -f operator.pid
	if test "$(cat operator.code)" != 0; then
		tail -n 20 operator.log
		# (last: t/failures.sh keeps a failure's last lines)
		echo "iot-operator exited with $(cat operator.code)"
		return 1
	fi
	test_no_sanitizer_report operator.log
}

example_get () {
	curl -sS -m 30 -o "$2" "$(sed -n 's/.*"server": *"\([^"]*\)".*/\1/p' "$KUBECONFIG")$1"
}

example_golden_tests () {
	for eg_f in "$FIXTURES"/*.in.jsonl
	do
		eg_name=$(basename "$eg_f" .in.jsonl)
		test_expect_success "$eg_name: operations as recorded (golden)" "
			reconcile $eg_name &&
			test_no_sanitizer_report $eg_name.err &&
			! grep -E '\"level\":\"(warn|error)\"' $eg_name.err &&
			test_cmp_json '$FIXTURES/$eg_name.expect.jsonl' $eg_name.out
		"
	done
}

example_status_is () {
	jq -c 'select(.op == "status") | .object.status' "$1.out" >actual &&
	echo "$2" >expect &&
	test_cmp expect actual
}

example_e2e_setup () {
	for ee_t in ksim kwatch ireconcile kapply kstatus iot-operator
	do
		command -v $ee_t >/dev/null || test_skip_all "$ee_t not built"
	done
	ksim_start || exit 1
	trap 'example_operator_stop; ksim_exit_trap_' EXIT
}

example_operator_done () {
	example_operator_stop &&
	! grep "restarting the pipeline" operator.log &&
	! grep '"level":"error"' operator.log &&
	ksim_stop
}

example_fixtures_ksim () {
	W=$(mktemp -d)
	cd "$W"
	ksim --port 0 --kubeconfig "$W/kc" 2>"$W/ksim.log" &
	KSIM=$!
	trap 'kill $KSIM; rm -rf "$W"' EXIT
	i=0; while ! test -s "$W/kc"; do sleep 0.1; i=$((i + 1)); test $i -lt 100; done
	KUBECONFIG="$W/kc"
	export KUBECONFIG
	SERVER=$(sed -n 's/.*"server": *"\([^"]*\)".*/\1/p' "$KUBECONFIG")
}

example_wait_for () {
	ew_i=0
	while ! "$@"; do
		sleep 0.2
		ew_i=$((ew_i + 1))
		test $ew_i -lt 100 || return 1
	done
}

example_record_deletion () {
	# the arguments hold no blanks: word splitting is what we want
	# shellcheck disable=SC2046
	kwatch --record "$2" $(example_watch_args "$1") >/dev/null &
	er_kw=$!
	: >"$2"
	example_wait_for grep -q initial-events-end "$2" &&
	curl -sS -o /dev/null -X DELETE "$SERVER$3" &&
	example_wait_for example_deleted_ "$2" "$4"
	er_rc=$?
	sleep 0.5
	kill $er_kw
	wait $er_kw || :
	return $er_rc
}

example_deleted_ () {
	test "$(grep -c '"type":"DELETED"' "$1")" -ge "$2"
}
