# The whole operator end to end (t90NN): ksim with RBAC enforced, deploy/
# installed by kubectl as the admin, iot-operator under deploy/'s
# ServiceAccount token, the example IoTService. Sourced after test-lib.sh
# and lib-ksim.sh.
#
#   e2e_ksim_start [ksim args]   ksim_start with TLS, RBAC, the admin token and the ServiceAccount
#                                token, short pod and LoadBalancer delays; writes op.kubeconfig
#   e2e_install                  kubectl apply -k deploy/ (as the admin), the CRD Established
#   e2e_operator_start NAME [iot-operator args]
#                                iot-operator in the background under op.kubeconfig: NAME.pid,
#                                NAME.err (its log and its stages'), NAME.code once it ended
#   e2e_operator_stop NAME       SIGTERM, at most 20 s, then SIGKILL; fails when it was killed or
#                                did not exit 0
#   e2e_stage_pid NAME STAGE     the pid of the running STAGE (kwatch, ireconcile, ...) of NAME
#   k ARGS                       kubectl as the admin (bounded)
#   iot_get                      the example IoTService into iot.json
#   status_is PHASE...           the status is about the current generation, phase one of these
#   children_there               every child of the example exists (the counts of t2105)
#   children_dump FILE           the example's children as the API server holds them, without
#                                generated fields (uids, versions, times, cluster IPs), sorted
#   steady_state                 a fresh snapshot gives ireconcile nothing to do
#   ksim_writes AGENT_PREFIX     writes (POST, PUT, PATCH, DELETE) counted by ksim for user agents
#                                starting with AGENT_PREFIX since the last reset

X=example-iotservice
O=devawsk8s
I=$O-$X
SEL="cp.iot.sap%2Finstance%3D$X"
IOT_PATH=/apis/cp.iot.sap/v1/namespaces/$O/iotservices/$X

for e2e_t in ksim kwatch ireconcile kapply kstatus iot-operator; do
	test -x "$KOP_BIN/$e2e_t" || test_skip_all "no $e2e_t yet"
done
KUBECTL=$(command -v kubectl) || test_skip_all 'no kubectl'

k () {
	timeout 30 "$KUBECTL" --kubeconfig "$KSIM_CONFIG" "$@"
}

# The operators started, one name a line: a file, since e2e_operator_start
# often runs inside a test body (a subshell), where no variable outlives it;
# one left running would keep the TAP stream open and prove waiting.
e2e_exit_trap_ () {
	if test -f "$TRASH/e2e.operators"; then
		while read -r e2e_n; do
			if test -s "$TRASH/$e2e_n.pid"; then
				kill -KILL "$(cat "$TRASH/$e2e_n.pid")" 2>/dev/null
			fi
		done <"$TRASH/e2e.operators"
	fi
	ksim_exit_trap_
}

e2e_ksim_start () {
	ksim_start --tls --authorization rbac --token admin-token \
		--sa-token "$O/iot-operator=operator-token" \
		--pod-start-delay 200ms --lb-delay 200ms "$@" || exit 1
	trap e2e_exit_trap_ EXIT
	jq '.users[0].user = {token: "operator-token"}' "$KUBECONFIG" >"$TRASH/op.kubeconfig" || exit 1
}

e2e_install () {
	k apply -k "$PROJECT_ROOT/deploy" >"$TRASH/install.out" &&
	k wait --for=condition=Established crd/iotservices.cp.iot.sap --timeout=10s >/dev/null
}

# Call at the top level or inside a test body: the wrapper records the exit
# code in NAME.code from any shell.
e2e_operator_start () {
	e2e_name=$1
	shift
	rm -f "$TRASH/$e2e_name.pid" "$TRASH/$e2e_name.code"
	echo "$e2e_name" >>"$TRASH/e2e.operators"
	(
		OPERATOR_NAME=$O POD_NAME=$e2e_name "$KOP_BIN/iot-operator" --kubeconfig "$TRASH/op.kubeconfig" \
			--metrics-addr 127.0.0.1:0 --program "$PROJECT_ROOT/pipeline/iotservice" \
			--log-format json "$@" </dev/null >/dev/null 2>>"$TRASH/$e2e_name.err" &
		echo $! >"$TRASH/$e2e_name.pid.tmp" && mv "$TRASH/$e2e_name.pid.tmp" "$TRASH/$e2e_name.pid"
		wait $!
		echo $? >"$TRASH/$e2e_name.code"
	) >/dev/null 2>&1 &
	test_wait_for 5 test -s "$TRASH/$e2e_name.pid"
}

e2e_operator_stop () {
	test -s "$TRASH/$1.pid" || return 0
	test -f "$TRASH/$1.code" || kill -TERM "$(cat "$TRASH/$1.pid")" 2>/dev/null
	if ! test_wait_for 20 test -f "$TRASH/$1.code"; then
		kill -KILL "$(cat "$TRASH/$1.pid")" 2>/dev/null
		echo "e2e_operator_stop: $1 did not stop within 20 s of SIGTERM"
		return 1
	fi
	rm -f "$TRASH/$1.pid"
	if test "$(cat "$TRASH/$1.code")" != 0; then
		echo "e2e_operator_stop: $1 exited with $(cat "$TRASH/$1.code")"
		tail -n 20 "$TRASH/$1.err"
		return 1
	fi
	test_no_sanitizer_report "$TRASH/$1.err"
}

# The stages are the supervisor's children, each named by its executable.
e2e_stage_pid () {
	e2e_sup=$(cat "$TRASH/$1.pid") || return 1
	for e2e_c in $(cat /proc/"$e2e_sup"/task/*/children 2>/dev/null); do
		if test "$(cat /proc/"$e2e_c"/comm 2>/dev/null)" = "$2"; then
			echo "$e2e_c"
			return 0
		fi
	done
	return 1
}

iot_get () {
	ksim_curl -o "$TRASH/iot.json" "$IOT_PATH"
}

status_is () {
	iot_get &&
	jq -e ".status.observedGeneration == .metadata.generation and
		any(\$ARGS.positional[]; . == \$phase)" --arg phase "$(jq -r .status.phase "$TRASH/iot.json")" \
		--args "$@" <"$TRASH/iot.json" >/dev/null
}

count_ () {
	ksim_curl -o "$TRASH/list.json" "$1" && jq -e ".items | length" "$TRASH/list.json"
}

children_there () {
	test "$(count_ "/api/v1/namespaces?labelSelector=$SEL")" = 1 &&
	test "$(count_ "/api/v1/namespaces/$I/secrets?labelSelector=$SEL")" = 2 &&
	test "$(count_ "/api/v1/namespaces/$I/services?labelSelector=$SEL")" = 8 &&
	test "$(count_ "/apis/apps/v1/namespaces/$I/deployments?labelSelector=$SEL")" = 6 &&
	test "$(count_ "/apis/apps/v1/namespaces/$I/statefulsets?labelSelector=$SEL")" = 2 &&
	test "$(count_ "/apis/networking.k8s.io/v1/namespaces/$I/networkpolicies?labelSelector=$SEL")" = 1
}

children_dump () {
	: >"$1.all" &&
	for e2e_p in "/api/v1/namespaces?labelSelector=$SEL" \
		"/api/v1/namespaces/$I/secrets?labelSelector=$SEL" \
		"/api/v1/namespaces/$I/services?labelSelector=$SEL" \
		"/apis/apps/v1/namespaces/$I/deployments?labelSelector=$SEL" \
		"/apis/apps/v1/namespaces/$I/statefulsets?labelSelector=$SEL" \
		"/apis/networking.k8s.io/v1/namespaces/$I/networkpolicies?labelSelector=$SEL"
	do
		ksim_curl -o "$1.list" "$e2e_p" &&
		jq -c '.items[]' "$1.list" >>"$1.all" || return 1
	done &&
	jq -S -s '[.[] | {kind, namespace: .metadata.namespace, name: .metadata.name,
		labels: .metadata.labels, type, data, spec: (.spec // {} | del(.clusterIP, .clusterIPs))}]
		| sort_by(.kind, .name)' "$1.all" >"$1"
}

steady_state () {
	KUBECONFIG="$TRASH/op.kubeconfig" "$KOP_BIN/kwatch" --once \
		$(OPERATOR_NAME=$O "$KOP_BIN/ireconcile" --print-watches "$PROJECT_ROOT/pipeline/iotservice" |
		  jq -r '.resource + "@" + (if .namespace == "" then "*" else .namespace end) + ":l=" + .labelSelector + ":f=" + .fieldSelector') \
		>"$TRASH/snap.jsonl" 2>"$TRASH/snap.err" &&
	OPERATOR_NAME=$O "$KOP_BIN/ireconcile" "$PROJECT_ROOT/pipeline/iotservice" \
		<"$TRASH/snap.jsonl" >"$TRASH/steady.out" 2>"$TRASH/steady.err" &&
	test_cmp /dev/null "$TRASH/steady.out"
}

ksim_writes () {
	curl -sS -m 10 -k -o "$TRASH/stats.json" "$KSIM_URL/ksim/stats" &&
	jq --arg p "$1" '[.byAgent | to_entries[] | select(.key | startswith($p)) | .value
		| (.POST // 0) + (.PUT // 0) + (.PATCH // 0) + (.DELETE // 0)] | add // 0' "$TRASH/stats.json"
}
