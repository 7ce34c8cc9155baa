#!/bin/sh
# make demo: the whole operator on a local simulated cluster.
#
#   scripts/demo.sh          start ksim (RBAC on, --data), install deploy/ with kubectl as the
#                            admin, run iot-operator under deploy/'s ServiceAccount token, apply
#                            the example and follow it to Available; ksim and the operator stay
#                            running in the background (PIDs in $DEMO_DIR/pids)
#   scripts/demo.sh stop     stop them (make demo-stop)
#
# Environment: KOP_BIN (the tools; make sets it), DEMO_DIR (default ./.demo), DEMO_PORT (ksim's
# port, default 0: a free one), DEMO_TIMEOUT (seconds to wait for Available, default 180),
# CI=true (no in-place refresh: one line per change).
set -u

ROOT=$(cd "$(dirname "$0")/.." && pwd)
KOP_BIN=${KOP_BIN:-$ROOT/bin}
DEMO_DIR=${DEMO_DIR:-$ROOT/.demo}
DEMO_PORT=${DEMO_PORT:-0}
DEMO_TIMEOUT=${DEMO_TIMEOUT:-180}
O=devawsk8s
X=example-iotservice
I=$O-$X

say () { printf '%s\n' "demo: $*"; }
fail () {
	printf '%s\n' "demo: error: $*" >&2
	exit 1
}

# demo_stop: SIGTERM to what pids names (the operator first: it releases its Lease
# while ksim still answers), wait up to 15 s each, then SIGKILL.
demo_stop () {
	test -f "$DEMO_DIR/pids" || return 0
	# Lines: NAME PID, the operator last started, stopped first.
	tac "$DEMO_DIR/pids" >"$DEMO_DIR/pids.stop"
	while read -r name pid; do
		case "$pid" in ''|*[!0-9]*) continue ;; esac
		kill -0 "$pid" 2>/dev/null || continue
		# Only what this demo started: the command line names the tool.
		grep -qa "$name" "/proc/$pid/cmdline" 2>/dev/null || continue
		kill -TERM "$pid" 2>/dev/null
		i=0
		while kill -0 "$pid" 2>/dev/null && test $i -lt 150; do
			sleep 0.1
			i=$((i + 1))
		done
		if kill -0 "$pid" 2>/dev/null; then
			kill -KILL "$pid" 2>/dev/null
			say "$name (pid $pid) killed"
		else
			say "$name (pid $pid) stopped"
		fi
	done <"$DEMO_DIR/pids.stop"
	rm -f "$DEMO_DIR/pids" "$DEMO_DIR/pids.stop"
}

if test "${1:-}" = stop; then
	demo_stop
	exit 0
fi
test $# = 0 || fail "usage: scripts/demo.sh [stop]"

for t in ksim iot-operator kwatch ireconcile kapply kstatus; do
	test -x "$KOP_BIN/$t" || fail "'$KOP_BIN/$t' is missing: run 'make' first"
done
command -v kubectl >/dev/null || fail "kubectl is not installed: run 'make deps' first"
command -v jq >/dev/null || fail "jq is not installed: run 'make deps' first"
PATH=$KOP_BIN:$PATH
export PATH

mkdir -p "$DEMO_DIR" || fail "unable to create '$DEMO_DIR'"
if test -f "$DEMO_DIR/pids"; then
	say "a previous demo is still running: stopping it"
	demo_stop
fi
rm -rf "$DEMO_DIR/data" "$DEMO_DIR/kubecache"
rm -f "$DEMO_DIR/admin.kubeconfig" "$DEMO_DIR/operator.kubeconfig" "$DEMO_DIR"/*.log

# Tokens made here, for this run only.
ADMIN_TOKEN=admin-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
OP_TOKEN=operator-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
KUBECONFIG=$DEMO_DIR/admin.kubeconfig
KUBECACHEDIR=$DEMO_DIR/kubecache
export KUBECONFIG KUBECACHEDIR

# Detached (own session): they outlive this script and make's terminal.
say "starting ksim (simulated cluster, RBAC enforced, data in $DEMO_DIR/data)"
setsid ksim --port "$DEMO_PORT" --tls --authorization rbac --token "$ADMIN_TOKEN" \
	--sa-token "$O/iot-operator=$OP_TOKEN" --data "$DEMO_DIR/data" \
	--kubeconfig "$KUBECONFIG" --log-format json \
	</dev/null >/dev/null 2>"$DEMO_DIR/ksim.log" &
echo "ksim $!" >"$DEMO_DIR/pids"
KSIM_PID=$!

# On failure: say so loudly, show the logs, stop what was started.
die_with_logs () {
	printf '%s\n' "demo: error: $*" >&2
	if test -s "$DEMO_DIR/operator.log"; then
		printf '%s\n' "demo: the operator's last log lines ($DEMO_DIR/operator.log):" >&2
		tail -n 25 "$DEMO_DIR/operator.log" >&2
	fi
	printf '%s\n' "demo: ksim's last log lines ($DEMO_DIR/ksim.log):" >&2
	tail -n 5 "$DEMO_DIR/ksim.log" >&2
	demo_stop >&2
	exit 1
}

i=0
while ! test -s "$KUBECONFIG"; do
	kill -0 "$KSIM_PID" 2>/dev/null || die_with_logs "ksim exited before serving"
	i=$((i + 1))
	test $i -lt 150 || die_with_logs "ksim did not serve within 15 s"
	sleep 0.1
done
SERVER=$(jq -r '.clusters[0].cluster.server' "$KUBECONFIG" 2>/dev/null) ||
	die_with_logs "unreadable kubeconfig '$KUBECONFIG'"
say "ksim serves $SERVER (pid $KSIM_PID)"

k () {
	timeout 60 kubectl "$@"
}

say "installing the operator: kubectl apply -k deploy/ (as the admin)"
k apply -k "$ROOT/deploy" >"$DEMO_DIR/apply-deploy.log" 2>&1 ||
	{ cat "$DEMO_DIR/apply-deploy.log" >&2; die_with_logs "kubectl apply -k deploy/ failed"; }
sed 's/^/  /' "$DEMO_DIR/apply-deploy.log"
k wait --for=condition=Established crd/iotservices.cp.iot.sap --timeout=30s >/dev/null ||
	die_with_logs "the CRD did not become Established"

# The operator's credentials: deploy/'s ServiceAccount, nothing more.
jq --arg t "$OP_TOKEN" '.users[0].user = {token: $t}' "$KUBECONFIG" >"$DEMO_DIR/operator.kubeconfig" ||
	die_with_logs "unable to write '$DEMO_DIR/operator.kubeconfig'"

# ksim has no kubelet that could run the operator's image: deploy/operator.yaml's Deployment
# gets simulated pods, and the real operator runs here, under the same ServiceAccount.
say "starting iot-operator as system:serviceaccount:$O:iot-operator"
OPERATOR_NAME=$O POD_NAME=demo-operator setsid iot-operator \
	--kubeconfig "$DEMO_DIR/operator.kubeconfig" --metrics-addr 127.0.0.1:0 \
	--program "$ROOT/pipeline/iotservice" --log-format json \
	</dev/null >/dev/null 2>"$DEMO_DIR/operator.log" &
OP_PID=$!
echo "iot-operator $OP_PID" >>"$DEMO_DIR/pids"

i=0
while ! grep -q "initial lists are in" "$DEMO_DIR/operator.log" 2>/dev/null; do
	kill -0 "$OP_PID" 2>/dev/null || die_with_logs "iot-operator exited"
	i=$((i + 1))
	test $i -lt 300 || die_with_logs "iot-operator did not become leader and list within 30 s"
	sleep 0.1
done
METRICS_PORT=$(jq -r 'select(.port != null) | .port' "$DEMO_DIR/operator.log" 2>/dev/null | head -n 1)
say "iot-operator leads (pid $OP_PID${METRICS_PORT:+, metrics on http://127.0.0.1:$METRICS_PORT/metrics})"

say "applying the example: kubectl apply -f deploy/example-iotservice.yaml"
k apply -f "$ROOT/deploy/example-iotservice.yaml" >"$DEMO_DIR/apply-example.log" 2>&1 ||
	{ cat "$DEMO_DIR/apply-example.log" >&2; die_with_logs "kubectl apply -f deploy/example-iotservice.yaml failed"; }
sed 's/^/  /' "$DEMO_DIR/apply-example.log"

# Progress: the phase and what is not ready yet (the Progressing condition's message).
# On a terminal one line refreshed in place; otherwise (CI, a pipe) one line per change.
if test -t 1 && test "${CI:-}" != true; then
	tty=1
else
	tty=
fi
start=$(date +%s)
last=
phase=
while :; do
	now=$(date +%s)
	elapsed=$((now - start))
	if k get iotservices -n "$O" "$X" -o json >"$DEMO_DIR/iot.json" 2>"$DEMO_DIR/iot.err"; then
		line=$(jq -r '[(.status.phase // "(no status yet)"),
			((.status.conditions // []) | map(select(.type == "Progressing")) | .[0].message // "")]
			| if .[1] == "" then .[0] else "\(.[0]): \(.[1])" end' "$DEMO_DIR/iot.json")
		phase=$(jq -r '.status.phase // ""' "$DEMO_DIR/iot.json")
	else
		line="(not readable: $(head -n 1 "$DEMO_DIR/iot.err"))"
	fi
	if test -n "$tty"; then
		cols=$(tput cols 2>/dev/null || echo 100)
		printf '\r\033[K%s' "$(printf '[%3ds] %s' "$elapsed" "$line" | cut -c "1-$((cols - 1))")"
	elif test "$line" != "$last"; then
		printf '[%3ds] %s\n' "$elapsed" "$line"
	fi
	last=$line
	test "$phase" = Available && break
	kill -0 "$OP_PID" 2>/dev/null || { test -n "$tty" && echo; die_with_logs "iot-operator exited"; }
	if test "$elapsed" -ge "$DEMO_TIMEOUT"; then
		test -n "$tty" && echo
		die_with_logs "$X is not Available after ${DEMO_TIMEOUT}s (last: $line)"
	fi
	sleep 1
done
test -n "$tty" && echo

rel=$DEMO_DIR
case "$DEMO_DIR" in "$PWD"/*) rel=${DEMO_DIR#"$PWD"/} ;; esac
cat <<EOF

demo: $X is Available after ${elapsed}s.

Look around (as the admin; add --kubeconfig $rel/operator.kubeconfig to act as the operator's
ServiceAccount, which may only do what deploy/clusterrole.yaml grants):

  export KUBECONFIG=$rel/admin.kubeconfig
  kubectl get iotservices -n $O -o wide
  kubectl get all -n $I
  kubectl get events -n $O
  kubectl patch iotservice -n $O $X --type merge -p '{"spec":{"cockpit":{"size":2}}}'
  kubectl delete iotservice -n $O $X
  curl -s http://127.0.0.1:${METRICS_PORT:-PORT}/metrics | grep -E 'leader_election|operations_total'

Logs: $rel/operator.log (iot-operator and its stages), $rel/ksim.log.
ksim (pid $KSIM_PID) and iot-operator (pid $OP_PID) keep running in the background.
Stop them with:

  make demo-stop        # or: kill $OP_PID $KSIM_PID
EOF
