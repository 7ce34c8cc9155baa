# Start and stop ksim, the local API server, for a test script.
#
#   . "$TEST_DIRECTORY/lib-ksim.sh"
#   ksim_start [extra ksim args]   starts "$KSIM_BIN --port 0 --kubeconfig $TRASH/ksim.kubeconfig ...",
#                                  waits (at most 10 s) for the kubeconfig; sets KSIM_PID, KSIM_URL,
#                                  exports KUBECONFIG and KUBECACHEDIR ($TRASH/kubecache); when ksim
#                                  does not come up, the script stops ("Bail out!")
#   ksim_stop                      SIGTERM, wait (at most 10 s); fails if ksim crashed, had to be
#                                  killed, exited non-zero or printed a sanitizer report
#
# Call ksim_start at the top level of the script (not inside a
# test_expect_success body, which runs in a subshell); ksim_stop works
# anywhere.
#   ksim_admin PATH                POST to ksim's admin endpoint: ksim_admin cut-watches,
#                                  ksim_admin compact, ksim_admin error-watches
#   ksim_curl [curl args] PATH     curl against ksim with the token (if any), e.g.
#                                  ksim_curl -o out.json /api/v1/namespaces
#   ksim_wait_json SECONDS JQ ARGS...  waits (at most SECONDS) until jq -e JQ holds for
#                                  "kubectl get ARGS -o json" (left in wait.json); says what it
#                                  waited for when it times out
#   ksim_wait_get SECONDS JQ PATH  the same for the JSON ksim answers at PATH (ksim_curl)
#   ksim_unreachable KUBECONFIG    a server that cannot be reached: a port on which nothing listens
#                                  (one ksim had, stopped) in $server ($port), a kubeconfig naming it at
#                                  KUBECONFIG (at the top level, as ksim_start)
#   now_ms                         the wall clock in milliseconds
#   ksim_kubectls                  sets $versions to the kubectls to test with (1.27 and 1.33 of
#                                  the Cloud SDK, those installed, else the default one); skips
#                                  the script when there is none
#
# ksim's stderr (JSON log lines) goes to $TRASH/ksim.log. ksim_start makes
# sure ksim is stopped when the script exits, even when a test fails.
#
# Which ksim: "$KOP_BIN/ksim", except that where KOP_FIXTURE_KSIM names
# another (make check SANITIZE=1 names the normal build's), the scripts
# that test another tool against ksim (every one but t06NN and t07NN,
# ksim's own) start that one. ksim is there a fixture, not what is tested,
# and about half the CPU of an end-to-end script: under the sanitizers it
# made that pass the longer of the two. ksim's own scripts always run the
# build under test.

KSIM_LOG="$TRASH/ksim.log"
KSIM_BIN="$KOP_BIN/ksim"
case ${0##*/} in
t06[0-9][0-9]-*|t07[0-9][0-9]-*) ;;
*) test -z "${KOP_FIXTURE_KSIM:-}" || KSIM_BIN=$KOP_FIXTURE_KSIM ;;
esac
KSIM_PID=
KSIM_URL=
KSIM_TOKEN=

ksim_exit_trap_ () {
	if test -n "$KSIM_PID" && kill -0 "$KSIM_PID" 2>/dev/null; then
		kill -TERM "$KSIM_PID" 2>/dev/null
		ks_i=0
		while kill -0 "$KSIM_PID" 2>/dev/null && test "$ks_i" -lt 100; do
			sleep 0.1
			ks_i=$((ks_i + 1))
		done
		kill -KILL "$KSIM_PID" 2>/dev/null
	fi
}

# Nothing can be tested without ksim: stop the whole script (TAP "Bail out!").
ksim_bail_ () {
	echo "Bail out! $*" >&3
	exit 1
}

ksim_start () {
	KSIM_CONFIG="$TRASH/ksim.kubeconfig"
	rm -f "$KSIM_CONFIG"
	KSIM_TOKEN=
	ks_prev=
	for ks_a in "$@"; do
		if test "$ks_prev" = "--token"; then
			KSIM_TOKEN=$ks_a
		fi
		case "$ks_a" in
		--token=*) KSIM_TOKEN=${ks_a#--token=} ;;
		esac
		ks_prev=$ks_a
	done
	rm -f "$TRASH/ksim.pid" "$TRASH/ksim.rc"
	# A wrapper records the exit code, so that ksim_stop can check it from
	# any subshell (test bodies run in one). Without fds 3 and 4 (the TAP
	# stream and the script's stderr): a ksim left behind never holds prove.
	(
		"$KSIM_BIN" --port 0 --kubeconfig "$KSIM_CONFIG" "$@" >/dev/null 2>>"$KSIM_LOG" </dev/null &
		echo $! >"$TRASH/ksim.pid.tmp" && mv "$TRASH/ksim.pid.tmp" "$TRASH/ksim.pid"
		wait $!
		echo $? >"$TRASH/ksim.rc.tmp" && mv "$TRASH/ksim.rc.tmp" "$TRASH/ksim.rc"
	) >/dev/null 2>&1 3>&- 4>&- &
	ks_i=0
	while ! test -s "$TRASH/ksim.pid" && test "$ks_i" -lt 100; do
		sleep 0.05
		ks_i=$((ks_i + 1))
	done
	KSIM_PID=$(cat "$TRASH/ksim.pid")
	trap ksim_exit_trap_ EXIT
	ks_i=0
	while ! test -s "$KSIM_CONFIG"; do
		if test -f "$TRASH/ksim.rc"; then
			sed "s/^/# /" "$KSIM_LOG" >&3
			KSIM_PID=
			ksim_bail_ "ksim exited before serving (exit $(cat "$TRASH/ksim.rc"))"
		fi
		ks_i=$((ks_i + 1))
		if test "$ks_i" -ge 100; then
			ksim_bail_ "ksim did not write its kubeconfig within 10 s"
		fi
		sleep 0.1
	done
	KSIM_URL=$(sed -n 's/.*"server": *"\([^"]*\)".*/\1/p' "$KSIM_CONFIG")
	KUBECONFIG=$KSIM_CONFIG
	KUBECACHEDIR="$TRASH/kubecache"
	export KUBECONFIG KUBECACHEDIR KSIM_URL KSIM_PID
}

ksim_stop () {
	if test -z "$KSIM_PID"; then
		echo "ksim_stop: ksim is not running"
		return 1
	fi
	if ! kill -TERM "$KSIM_PID" 2>/dev/null; then
		echo "ksim_stop: ksim (pid $KSIM_PID) is gone: it crashed"
		cat "$KSIM_LOG"
		return 1
	fi
	ks_i=0
	while ! test -f "$TRASH/ksim.rc"; do
		ks_i=$((ks_i + 1))
		if test "$ks_i" -ge 100; then
			echo "ksim_stop: ksim did not stop within 10 s of SIGTERM"
			kill -KILL "$KSIM_PID"
			return 1
		fi
		sleep 0.1
	done
	ks_rc=$(cat "$TRASH/ksim.rc")
	if test "$ks_rc" != 0; then
		echo "ksim_stop: ksim exited with $ks_rc"
		tail -n 40 "$KSIM_LOG"
		return 1
	fi
	if ! test_no_sanitizer_report "$KSIM_LOG" >/dev/null; then
		echo "ksim_stop: sanitizer report in $KSIM_LOG"
		cat "$KSIM_LOG"
		return 1
	fi
	return 0
}

ksim_admin () {
	curl -sS -k -f -m 10 -X POST "$KSIM_URL/ksim/${1#/}" >/dev/null
}

# curl with ksim's CA and token; the last argument is the path.
ksim_curl () {
	ks_n=$#
	ks_path=$(eval "echo \"\${$ks_n}\"")
	ks_args=
	ks_i=1
	while test "$ks_i" -lt "$ks_n"; do
		ks_args="$ks_args \"\${$ks_i}\""
		ks_i=$((ks_i + 1))
	done
	if test -n "$KSIM_TOKEN"; then
		eval "curl -sS -m 30 -k -H \"Authorization: Bearer \$KSIM_TOKEN\" $ks_args \"\$KSIM_URL\$ks_path\""
	else
		eval "curl -sS -m 30 -k $ks_args \"\$KSIM_URL\$ks_path\""
	fi
}

ksim_kubectls () {
	versions=
	for kk_v in kubectl.1.27 kubectl.1.33; do
		test -x "/usr/lib/google-cloud-sdk/bin/$kk_v" && versions="$versions /usr/lib/google-cloud-sdk/bin/$kk_v"
	done
	# (the oldest and the newest; plain kubectl, a dispatcher to the version nearest the
	# server's there, only when neither is installed)
	test -n "$versions" || { command -v kubectl >/dev/null && versions=$(command -v kubectl); }
	test -n "$versions" || test_skip_all 'no kubectl'
}

ksim_wait_json () {
	wj_limit=$(($1 * 10))
	wj_expr=$2
	shift 2
	wj_i=0
	while :; do
		if kubectl --request-timeout=20s get "$@" -o json >wait.json 2>wait.err && test -s wait.json &&
			jq -e "$wj_expr" wait.json >/dev/null 2>&1; then
			return 0
		fi
		wj_i=$((wj_i + 1))
		if test "$wj_i" -ge "$wj_limit"; then
			echo "timed out waiting for: $wj_expr on $*"
			cat wait.json wait.err
			return 1
		fi
		sleep 0.1
	done
}

ksim_wait_get () {
	wg_i=0
	while :; do
		if ksim_curl -s -o wait.json "$3" && jq -e "$2" wait.json >/dev/null 2>&1; then
			return 0
		fi
		wg_i=$((wg_i + 1))
		if test "$wg_i" -ge $(($1 * 10)); then
			echo "timed out waiting for: $2 on $3"
			cat wait.json
			return 1
		fi
		sleep 0.1
	done
}

# ksim_code TOKEN METHOD PATH [BODY [CONTENT-TYPE]]: the HTTP code of the request, made with that
# bearer token; the body in body.json, the headers in headers.txt. A body is JSON, or for a PATCH a
# merge patch, unless CONTENT-TYPE says otherwise.
ksim_code () {
	if test -n "$4"; then
		kc_type=${5:-application/json}
		test -z "$5" && test "$2" = PATCH && kc_type=application/merge-patch+json
		curl -k -sS -m 10 -D headers.txt -o body.json -w "%{http_code}" -X "$2" -H "Authorization: Bearer $1" \
			-H "Content-Type: $kc_type" -d "$4" "$KSIM_URL$3"
	else
		curl -k -sS -m 10 -D headers.txt -o body.json -w "%{http_code}" -X "$2" -H "Authorization: Bearer $1" \
			"$KSIM_URL$3"
	fi
}

# ksim_expect_code WANT TOKEN METHOD PATH [BODY [CONTENT-TYPE]]: ksim_code gives WANT (else says
# what came, with the body)
ksim_expect_code () {
	kec_want=$1
	shift
	kec_got=$(ksim_code "$@")
	if test "$kec_got" != "$kec_want"; then
		echo "want $kec_want, got $kec_got: $2 $3 (token $1)"
		cat body.json
		return 1
	fi
}

ksim_unreachable () {
	ksim_start
	port=${KSIM_URL##*:}
	server=http://127.0.0.1:$port
	ksim_stop >ksim-stop.out 2>&1 || { cat ksim-stop.out; echo "Bail out! ksim did not stop"; exit 1; }
	cat >"$1" <<-EOF
	apiVersion: v1
	kind: Config
	clusters:
	- name: c
	  cluster: {server: "$server"}
	users:
	- name: u
	  user: {}
	contexts:
	- name: c
	  context: {cluster: c, user: u, namespace: default}
	current-context: c
	EOF
}

now_ms () {
	echo $(($(date +%s%N) / 1000000))
}
