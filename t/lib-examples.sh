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
		echo $? >operator.code
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
		echo "iot-operator exited with $(cat operator.code)"
		tail -n 20 operator.log
		return 1
	fi
	test_no_sanitizer_report operator.log
}

example_get () {
	curl -sS -m 30 -o "$2" "$(sed -n 's/.*"server": *"\([^"]*\)".*/\1/p' "$KUBECONFIG")$1"
}
