#!/bin/sh
test_description='make demo without kubectl: deploy/ and the example installed with the tools, Available, stopped clean'
. "${0%/*}/test-lib.sh"

DEMO="$PROJECT_ROOT/scripts/demo.sh"
D="$TRASH/demo"

# A PATH of only what the demo uses: the system's tools, linked one by one.
mkdir pbin || exit 1
for t in sh jq setsid base64 od tr awk sed cat grep head tail wc date sleep rm mkdir tac dirname
do
	p=$(command -v "$t") && ln -s "$p" "pbin/$t" || test_skip_all "'$t' is missing"
done
NOKUBECTL="$TRASH/pbin"

# demo ARGS...: the demo script with that PATH and its own state folder
demo () {
	env PATH="$NOKUBECTL" KOP_BIN="$KOP_BIN" DEMO_DIR="$D" DEMO_TIMEOUT=120 CI=true sh "$DEMO" "$@"
}

# Whatever happens, nothing the demo started outlives this script.
trap 'demo stop >/dev/null 2>&1' EXIT

# The work tree's state: changed and untracked files, and the default
# state folder .demo (ignored), which this run must leave alone.
tree_state () {
	git -C "$PROJECT_ROOT" status --porcelain --untracked-files=all | sed "/^?? t\/trash\./d" | sort &&
	if test -e "$PROJECT_ROOT/.demo"; then ls -la --time-style=+%s "$PROJECT_ROOT/.demo"; else echo "no .demo"; fi
}

test_expect_success 'the PATH the demo gets has no kubectl' '
	! env PATH="$NOKUBECTL:$KOP_BIN" sh -c "command -v kubectl" &&
	env PATH="$NOKUBECTL:$KOP_BIN" sh -c "command -v jq && command -v kapply"
'

test_expect_success 'the demo reaches Available with the tools alone' '
	tree_state >tree.before &&
	demo >out 2>err &&
	grep "^demo: installing the operator as the admin: kapply -f deploy/" out &&
	grep "^  CustomResourceDefinition/iotservices.cp.iot.sap: 201$" out &&
	grep "^  Deployment/iot-operator: 201$" out &&
	grep "^  IoTService/example-iotservice: 201$" out &&
	grep "^\[ *[0-9]*s\] Available: " out &&
	grep "^demo: example-iotservice is Available after [0-9]*s\.$" out &&
	! grep -i kubectl out &&
	test "$(cut -d" " -f1 "$D/pids" | tr "\n" " ")" = "ksim iot-operator " &&
	while read -r name pid; do
		kill -0 "$pid" || return 1
	done <"$D/pids" &&
	tree_state >tree.after &&
	test_cmp tree.before tree.after
'

test_expect_success 'what the closing text shows works: kwatch and curl as the admin' '
	KUBECONFIG="$D/admin.kubeconfig" kwatch --once -n devawsk8s iotservices \
		--project "{name: .metadata.name, phase: .status.phase}" >watch.out &&
	grep -x "{\"type\":\"ADDED\",\"object\":{\"name\":\"example-iotservice\",\"phase\":\"Available\"}}" watch.out &&
	server=$(jq -r ".clusters[0].cluster.server" "$D/admin.kubeconfig") &&
	curl -sS --cacert "$D/ca.crt" -H "Authorization: Bearer $(cat "$D/admin.token")" \
		-o iot.json "$server/apis/cp.iot.sap/v1/namespaces/devawsk8s/iotservices/example-iotservice" &&
	jq -e ".status.phase == \"Available\"" iot.json
'

test_expect_success 'the demo runs ksim with RBAC and the operator with its ServiceAccount token' '
	ksim_pid=$(sed -n "s/^ksim //p" "$D/pids") &&
	tr "\0" "\n" <"/proc/$ksim_pid/cmdline" >ksim.args &&
	grep -x rbac ksim.args &&
	grep -x "devawsk8s/iot-operator=operator-[0-9a-f]*" ksim.args &&
	jq -e ".users[0].user | keys == [\"token\"] and (.token | startswith(\"operator-\"))" "$D/operator.kubeconfig"
'

test_expect_success 'demo stop ends ksim, the operator and its stages' '
	: >procs &&
	while read -r name pid; do
		echo "$pid" >>procs &&
		ps -o pid= --ppid "$pid" >>procs
	done <"$D/pids" &&
	test "$(wc -l <procs)" -gt 2 &&
	demo stop >stop.out 2>&1 &&
	grep -x "demo: iot-operator (pid [0-9]*) stopped" stop.out &&
	grep -x "demo: ksim (pid [0-9]*) stopped" stop.out &&
	! test -e "$D/pids" &&
	none_left () {
		for pid in $(cat procs); do
			! kill -0 "$pid" 2>/dev/null || return 1
		done
	} &&
	test_wait_for 10 none_left
'

test_done
