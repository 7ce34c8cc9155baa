# The whole operator end to end (t90NN): ksim with RBAC enforced, deploy/
# installed by kubectl as the admin, iot-operator under deploy/'s
# ServiceAccount token, the example IoTService. Sourced after test-lib.sh
# and lib-ksim.sh.
#
#   e2e_ksim_start [ksim args]   ksim_start with TLS, RBAC, the admin token and the ServiceAccount
#                                token, short pod and LoadBalancer delays; writes op.kubeconfig
#   e2e_install                  kubectl apply -k deploy/ and deploy/policy/ (as the admin), the CRD
#                                Established, the policy in force (e2e_policy_in_force)
#   e2e_policy_in_force          the ValidatingAdmissionPolicy iot-operator and its binding are there,
#                                and refuse the ServiceAccount a write (labelling kube-system)
#   e2e_operator_start NAME [iot-operator args]
#                                iot-operator in the background under op.kubeconfig: NAME.pid,
#                                NAME.err (its log and its stages'), NAME.code once it ended
#   e2e_operator_stop NAME       SIGTERM, at most 20 s, then SIGKILL; fails when it was killed or
#                                did not exit 0
#   e2e_teardown                 kill -9 of every operator started and ksim's stop (at the top level,
#                                before a script starts ksim again: whatever its tests left running)
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
#   e2e_readyz NAME              /readyz of operator NAME: its code on stdout, its body in NAME.readyz
#   e2e_lifecycle NAME [args]    the tests of the example's whole life (below)

X=example-iotservice
O=devawsk8s
I=$O-$X
SEL="cp.iot.sap%2Finstance%3D$X"
IOT_PATH=/apis/cp.iot.sap/v1/namespaces/$O/iotservices/$X

for e2e_t in ksim kwatch ireconcile kapply kstatus iot-operator; do
	test -x "$KOP_BIN/$e2e_t" || test_skip_all "no $e2e_t yet"
done
test_kubectl

k () {
	timeout 30 "$KUBECTL" --kubeconfig "$KSIM_CONFIG" "$@"
}

# The operators started, one name a line: a file, since e2e_operator_start
# often runs inside a test body (a subshell), where no variable outlives it;
# one left running would keep the TAP stream open and prove waiting, were
# it not started without fds 3 and 4 (the TAP stream and the script's
# stderr, test-lib.sh): it would still be a leftover, killed here.
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

e2e_teardown () {
	e2e_exit_trap_
	rm -f "$TRASH/e2e.operators"
	KSIM_PID=
}

e2e_ksim_start () {
	ksim_start --tls --authorization rbac --token admin-token \
		--sa-token "$O/iot-operator=operator-token" \
		--pod-start-delay 200ms --lb-delay 200ms "$@" || exit 1
	trap e2e_exit_trap_ EXIT
	# A TERM (the watchdog's, at its time limit: to the whole process group) runs
	# the EXIT trap too: the operators are killed then, not left to drain alone.
	trap 'exit 143' TERM INT HUP
	jq '.users[0].user = {token: "operator-token"}' "$KUBECONFIG" >"$TRASH/op.kubeconfig" || exit 1
}

# deploy/policy/ always: ksim serves ValidatingAdmissionPolicies (admissionregistration.k8s.io/v1, as
# Kubernetes 1.30 and later do), so every end-to-end test runs under the policy; a ksim without them
# fails here rather than testing less.
e2e_install () {
	k apply -k "$PROJECT_ROOT/deploy" >"$TRASH/install.out" &&
	k wait --for=condition=Established crd/iotservices.cp.iot.sap --timeout=10s >/dev/null &&
	k apply -k "$PROJECT_ROOT/deploy/policy" >>"$TRASH/install.out" &&
	e2e_policy_in_force
}

e2e_policy_in_force () {
	ksim_curl -o "$TRASH/vap.json" /apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/iot-operator &&
	jq -e '.kind == "ValidatingAdmissionPolicy" and .spec.failurePolicy == "Fail"' "$TRASH/vap.json" >/dev/null &&
	ksim_curl -o "$TRASH/vapb.json" \
		/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings/iot-operator &&
	jq -e '.spec.policyName == "iot-operator" and .spec.validationActions == ["Deny"]' "$TRASH/vapb.json" >/dev/null &&
	e2e_code=$(curl -k -sS -m 10 -o "$TRASH/refused.json" -w "%{http_code}" -X PATCH \
		-H "Authorization: Bearer operator-token" -H "Content-Type: application/merge-patch+json" \
		-d '{"metadata":{"labels":{"cp.iot.sap/operator":"'"$O"'"}}}' "$KSIM_URL/api/v1/namespaces/kube-system") &&
	if test "$e2e_code" != 403 ||
	   ! jq -e '.reason == "Forbidden" and (.message | startswith("namespaces \"kube-system\" is forbidden: ValidatingAdmissionPolicy '"'iot-operator'"' with binding '"'iot-operator'"' denied request: "))' \
		"$TRASH/refused.json" >/dev/null; then
		echo "e2e_policy_in_force: labelling kube-system as the ServiceAccount gave $e2e_code:"
		cat "$TRASH/refused.json"
		return 1
	fi
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
		echo $? >"$TRASH/$e2e_name.code.tmp" && mv "$TRASH/$e2e_name.code.tmp" "$TRASH/$e2e_name.code"
	) >/dev/null 2>&1 3>&- 4>&- &
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
		tail -n 20 "$TRASH/$1.err"
		# (last: t/failures.sh keeps a failure's last lines)
		echo "e2e_operator_stop: $1 exited with $(cat "$TRASH/$1.code")"
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

e2e_readyz () {
	e2e_port=$(sed -n "s/.*\"port\":\([0-9]*\).*/\1/p" "$TRASH/$1.err" | head -n 1) &&
	test -n "$e2e_port" &&
	curl -s -m 10 -o "$TRASH/$1.readyz" -w "%{http_code}" "http://127.0.0.1:$e2e_port/readyz"
}

# The example's whole life under one operator (t9002, and t9008 on servers
# without streaming lists): deploy/ installed, the operator started (NAME, with
# ARGS), create, spec edit, core <-> core-spring, drift, delete, a clean stop.
# Defines the tests (their names start with NAME); ksim is left running.
#
#   e2e_lifecycle NAME [iot-operator args]

deploy_names () {
	ksim_curl -o deploys.json "/apis/apps/v1/namespaces/$I/deployments?labelSelector=$SEL" &&
	jq -r ".items[].metadata.name" deploys.json | sort >"$1"
}

e2e_lifecycle () {
	e2e_op=$1
	shift
	e2e_op_args="$*"

	test_expect_success "$e2e_op: setup: deploy/ and deploy/policy/ as the admin, the policy in force, the operator under its ServiceAccount" '
		e2e_install &&
		e2e_operator_start $e2e_op $e2e_op_args &&
		test_wait_for 20 grep -q "initial lists are in" $e2e_op.err
	'

	test_expect_success "$e2e_op: create: every child, then Available with its pods" '
		k apply -f "$PROJECT_ROOT/deploy/example-iotservice.yaml" >example.out &&
		test_wait_for 30 children_there &&
		test_wait_for 30 status_is Available &&
		jq -c "[.metadata.generation, .status.observedGeneration, (.status.pods | length),
			[.status.conditions[] | [.type, .status, .reason]], .metadata.finalizers]" iot.json >actual &&
		echo "[1,1,8,[[\"Available\",\"True\",\"AllChildrenReady\"],[\"Progressing\",\"False\",\"Complete\"]],[\"com.sap.iotservices/namespace-dropper\"]]" >expect &&
		test_cmp expect actual &&
		test_wait_for 10 steady_state
	'

	test_expect_success "$e2e_op: spec edit: rolled out, Available with observedGeneration current" '
		ksim_curl -o before.json "/apis/apps/v1/namespaces/$I/deployments/haproxy-$X" &&
		k patch iotservice -n $O $X --type merge -p "{\"spec\":{\"cockpit\":{\"image\":\"registry.example/cockpit:5\",\"size\":2}}}" >patch.out &&
		cockpit_rolled () {
			ksim_curl -o cockpit.json "/apis/apps/v1/namespaces/$I/deployments/cockpit-$X" &&
			jq -e ".spec.template.spec.containers[0].image == \"registry.example/cockpit:5\" and
				.spec.replicas == 2 and .status.updatedReplicas == 2 and .status.readyReplicas == 2" cockpit.json
		} &&
		test_wait_for 30 cockpit_rolled &&
		test_wait_for 30 status_is Available &&
		jq -e ".metadata.generation == 2 and .status.observedGeneration == 2 and (.status.pods | length) == 9" iot.json &&
		ksim_curl -o after.json "/apis/apps/v1/namespaces/$I/deployments/haproxy-$X" &&
		jq "[.metadata.generation, .spec]" before.json >expect &&
		jq "[.metadata.generation, .spec]" after.json >actual &&
		test_cmp expect actual &&
		test_wait_for 10 steady_state
	'

	test_expect_success "$e2e_op: core-spring -> core: core-spring and processing pruned, core Available" '
		k patch iotservice -n $O $X --type merge -p "{\"spec\":{\"core_spring\":{\"enabled\":false}}}" >patch.out &&
		cat >expect <<-EOF &&
		cockpit-$X
		core-$X
		gateway-rest-$X
		haproxy-$X
		postgresql-$X
		EOF
		test_wait_for 30 eval "deploy_names actual && test_cmp expect actual" &&
		test_wait_for 30 status_is Available &&
		jq -e ".status.observedGeneration == 3" iot.json &&
		ksim_curl -o svc.json "/api/v1/namespaces/$I/services?labelSelector=$SEL" &&
		jq -r ".items[].metadata.name" svc.json | sort >actual &&
		grep "^core-$X\$" actual &&
		! grep -e "^core-spring-" -e "^processing-" actual &&
		test_wait_for 10 steady_state
	'

	test_expect_success "$e2e_op: core -> core-spring: back as it was" '
		k patch iotservice -n $O $X --type merge -p "{\"spec\":{\"core_spring\":{\"enabled\":true}}}" >patch.out &&
		cat >expect <<-EOF &&
		cockpit-$X
		core-spring-$X
		gateway-rest-$X
		haproxy-$X
		postgresql-$X
		processing-$X
		EOF
		test_wait_for 30 eval "deploy_names actual && test_cmp expect actual" &&
		test_wait_for 30 status_is Available &&
		jq -e ".status.observedGeneration == 4" iot.json &&
		test_wait_for 10 children_there &&
		test_wait_for 10 steady_state
	'

	# The Service edit keeps the port number: ports are a list keyed by port and
	# protocol, so an edited port number is another element (kubectl's), which
	# server-side apply leaves alone (see the report of issue 7's e2e tests).
	test_expect_success "$e2e_op: drift: a deleted Deployment comes back, an edited Service (targetPort, selector) is put back" '
		ksim_curl -o old.json "/apis/apps/v1/namespaces/$I/deployments/gateway-rest-$X" &&
		k delete deployment -n $I gateway-rest-$X --wait=false >del.out &&
		k patch service -n $I cockpit-$X --type json -p "[{\"op\":\"replace\",\"path\":\"/spec/ports/0/targetPort\",\"value\":9999},{\"op\":\"replace\",\"path\":\"/spec/selector/component\",\"value\":\"other\"}]" -o json >svc.out &&
		jq -e ".spec.ports[0].targetPort == 9999 and .spec.selector.component == \"other\"" svc.out &&
		recreated () {
			ksim_curl -o new.json "/apis/apps/v1/namespaces/$I/deployments/gateway-rest-$X" &&
			jq -e --arg old "$(jq -r .metadata.uid old.json)" ".metadata.uid != null and .metadata.uid != \$old" new.json
		} &&
		port_back () {
			ksim_curl -o svc.json "/api/v1/namespaces/$I/services/cockpit-$X" &&
			jq -S -c "[.spec.ports, .spec.selector]" svc.json >svc.actual &&
			echo "[[{\"name\":\"http\",\"port\":8080,\"protocol\":\"TCP\",\"targetPort\":8080}],{\"component\":\"cockpit\",\"instance\":\"$X\"}]" >svc.expect &&
			test_cmp svc.expect svc.actual
		} &&
		test_wait_for 30 recreated &&
		test_wait_for 30 port_back &&
		test_wait_for 30 status_is Available &&
		test_wait_for 10 steady_state
	'

	# Secrets are watched per instance namespace (README, the operator's rights): a change by hand
	# is seen as any child's.
	test_expect_success "$e2e_op: Secrets: a hand-edited one is put back, a deleted one made again, the pull-secret copy follows its template, the RoleBinding too" '
		ksim_curl -o cfg.json "/api/v1/namespaces/$I/secrets/iotservice-$X" &&
		jq -e ".data[\"config.yml\"] | length > 100" cfg.json >/dev/null &&
		k patch secret -n $I iotservice-$X --type merge -p "{\"data\":{\"config.yml\":\"aGFuZA==\"}}" >patch.out &&
		k delete secret -n $I image-pull-secret --wait=false >del.out &&
		k delete rolebinding -n $I iot-operator-instance --wait=false >del.out &&
		cfg_back () {
			ksim_curl -o cfg2.json "/api/v1/namespaces/$I/secrets/iotservice-$X" &&
			jq -e --slurpfile a cfg.json ".data == \$a[0].data" cfg2.json >/dev/null
		} &&
		pull_is () {
			ksim_curl -o pull.json "/api/v1/namespaces/$I/secrets/image-pull-secret" &&
			jq -e --arg v "$1" ".data[\".dockerconfigjson\"] == \$v" pull.json >/dev/null
		} &&
		rb_back () {
			ksim_curl -o rb.json "/apis/rbac.authorization.k8s.io/v1/namespaces/$I/rolebindings/iot-operator-instance" &&
			jq -e ".roleRef.name == \"iot-operator-instance\"" rb.json >/dev/null
		} &&
		ksim_curl -o tmpl.json "/api/v1/namespaces/$O/secrets/image-pull-secret" &&
		test_wait_for 30 cfg_back &&
		test_wait_for 30 pull_is "$(jq -r ".data[\".dockerconfigjson\"]" tmpl.json)" &&
		test_wait_for 30 rb_back &&
		new=$(printf "{\"auths\":{\"registry.example.com\":{\"auth\":\"bmV3Om5ldw==\"}}}" | base64 -w0) &&
		k patch secret -n $O image-pull-secret --type merge -p "{\"data\":{\".dockerconfigjson\":\"$new\"}}" >patch.out &&
		test_wait_for 30 pull_is "$new" &&
		test_wait_for 30 status_is Available &&
		test_wait_for 10 steady_state
	'

	test_expect_success "$e2e_op: delete: the instance namespace goes, then the finalizer and the IoTService" '
		k delete iotservice -n $O $X --wait=false >del.out &&
		iot_gone () { iot_get && jq -e ".code == 404" iot.json; } &&
		ns_gone () { ksim_curl -o ns.json /api/v1/namespaces/$I && jq -e ".code == 404" ns.json; } &&
		test_wait_for 30 iot_gone &&
		test_wait_for 30 ns_gone &&
		ksim_curl -o opns.json /api/v1/namespaces/$O &&
		jq -e ".status.phase == \"Active\"" opns.json
	'

	test_expect_success "$e2e_op: the operator: no 403, no restart, a clean stop; the policy still in force" '
		e2e_policy_in_force &&
		: a server with the WatchList gate off says sendInitialEvents is Forbidden, no 403 &&
		! grep -i forbidden $e2e_op.err | grep -v "streaming list of .* refused (422: .*sendInitialEvents: Forbidden: " &&
		! grep "restarting the pipeline" $e2e_op.err &&
		e2e_operator_stop $e2e_op
	'
}
