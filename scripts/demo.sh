#!/bin/sh
# make demo: the whole operator on a local simulated cluster, with the project's own tools only
# (kubectl is not needed; when it is installed, the closing text shows how to use it too).
#
#   scripts/demo.sh          start ksim (RBAC on, --data), install deploy/ (kustomization.yaml's
#                            resources, in order, with its image) with kapply as the admin, run
#                            iot-operator under deploy/'s ServiceAccount token, apply the example
#                            and follow its phase with kwatch until Available; ksim and the
#                            operator stay running in the background (PIDs in $DEMO_DIR/pids)
#   scripts/demo.sh stop     stop them (make demo-stop)
#
# Environment: KOP_BIN (the tools; make sets it), DEMO_DIR (default ./.demo, ignored by git),
# DEMO_PORT (ksim's port, default 0: a free one), DEMO_TIMEOUT (seconds to wait for Available,
# default 180).
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
for t in jq setsid base64; do
	command -v $t >/dev/null || fail "$t is not installed: run 'make deps' first"
done
PATH=$KOP_BIN:$PATH
export PATH

mkdir -p "$DEMO_DIR" || fail "unable to create '$DEMO_DIR'"
if test -f "$DEMO_DIR/pids"; then
	say "a previous demo is still running: stopping it"
	demo_stop
fi
rm -rf "$DEMO_DIR/data"
rm -f "$DEMO_DIR/admin.kubeconfig" "$DEMO_DIR/operator.kubeconfig" "$DEMO_DIR/admin.token" \
	"$DEMO_DIR/ca.crt" "$DEMO_DIR"/*.log "$DEMO_DIR"/*.jsonl "$DEMO_DIR"/*.yaml

# Tokens made here, for this run only.
ADMIN_TOKEN=admin-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
OP_TOKEN=operator-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
KUBECONFIG=$DEMO_DIR/admin.kubeconfig
export KUBECONFIG

# Detached (own session): they outlive this script and make's terminal.
say "starting ksim (simulated cluster, RBAC enforced, data in $DEMO_DIR/data)"
setsid ksim --port "$DEMO_PORT" --tls --authorization rbac --token "$ADMIN_TOKEN" \
	--sa-token "$O/iot-operator=$OP_TOKEN" --data "$DEMO_DIR/data" \
	--kubeconfig "$KUBECONFIG" --log-format json \
	</dev/null >/dev/null 2>"$DEMO_DIR/ksim.log" &
echo "ksim $!" >"$DEMO_DIR/pids"
KSIM_PID=$!
WATCH_PID=

# On failure: say so loudly, show the logs, stop what was started.
die_with_logs () {
	printf '%s\n' "demo: error: $*" >&2
	if test -s "$DEMO_DIR/operator.log"; then
		printf '%s\n' "demo: the operator's last log lines ($DEMO_DIR/operator.log):" >&2
		tail -n 25 "$DEMO_DIR/operator.log" >&2
	fi
	printf '%s\n' "demo: ksim's last log lines ($DEMO_DIR/ksim.log):" >&2
	tail -n 5 "$DEMO_DIR/ksim.log" >&2
	test -n "$WATCH_PID" && kill "$WATCH_PID" 2>/dev/null
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
# For curl: the cluster's CA, and the admin's token readable by this user only.
(umask 077 && printf '%s\n' "$ADMIN_TOKEN" >"$DEMO_DIR/admin.token") ||
	die_with_logs "unable to write '$DEMO_DIR/admin.token'"
jq -r '.clusters[0].cluster["certificate-authority-data"]' "$KUBECONFIG" | base64 -d >"$DEMO_DIR/ca.crt" ||
	die_with_logs "unable to write '$DEMO_DIR/ca.crt'"
say "ksim serves $SERVER (pid $KSIM_PID)"

# deploy/ as kustomize builds it: kustomization.yaml's resources in order, each image it names
# set to its newName and newTag. Its simple form is read: top-level "resources:" and "images:"
# lists of plain entries, as deploy/ has them.
KUSTOMIZATION=$ROOT/deploy/kustomization.yaml
resources=$(awk '/^[^ #-]/ { in_list = /^resources:/ } in_list && /^- / { print $2 }' "$KUSTOMIZATION")
test -n "$resources" || die_with_logs "no resources in '$KUSTOMIZATION'"
awk '
	function flush() { if (n != "") print n, nn, (nt == "" ? "-" : nt); n = "" }
	/^[^ #-]/ { flush(); in_list = /^images:/; next }
	!in_list { next }
	/^- / { flush(); nn = ""; nt = ""; sub(/^- /, "  ") }
	$1 == "name:" { n = $2; if (nn == "") nn = $2 }
	$1 == "newName:" { nn = $2 }
	$1 == "newTag:" { nt = $2 }
	END { flush() }' "$KUSTOMIZATION" >"$DEMO_DIR/images.txt" ||
	die_with_logs "unable to read '$KUSTOMIZATION'"
: >"$DEMO_DIR/sed-images.txt"
while read -r name new_name new_tag; do
	test "$new_tag" = - && new_tag=
	printf 's#^\\([[:space:]]*image:[[:space:]]*\\)%s\\(:[^[:space:]]*\\)\\{0,1\\}[[:space:]]*$#\\1%s%s#\n' \
		"$name" "$new_name" "${new_tag:+:$new_tag}" >>"$DEMO_DIR/sed-images.txt"
done <"$DEMO_DIR/images.txt"
: >"$DEMO_DIR/deploy.yaml"
for r in $resources; do
	{ echo "---"; sed -f "$DEMO_DIR/sed-images.txt" "$ROOT/deploy/$r"; } >>"$DEMO_DIR/deploy.yaml" ||
		die_with_logs "unable to read 'deploy/$r'"
done
rm -f "$DEMO_DIR/images.txt" "$DEMO_DIR/sed-images.txt"

# One line per object: KIND/NAME and the HTTP code (201 created, 200 unchanged or updated).
show_results () {
	jq -r '"  \(.ref.kind)/\(.ref.name): \(if .ok then .code else "failed: \(.message // .code)" end)"' "$1"
}

# kapply waits for the CRD to be Established before it applies anything of its kind.
say "installing the operator as the admin: kapply -f deploy/{$(echo $resources | tr " " ,)}"
kapply --field-manager demo -f "$DEMO_DIR/deploy.yaml" >"$DEMO_DIR/apply-deploy.jsonl" 2>"$DEMO_DIR/apply-deploy.log" ||
	{ show_results "$DEMO_DIR/apply-deploy.jsonl" >&2; cat "$DEMO_DIR/apply-deploy.log" >&2
	  die_with_logs "kapply -f deploy/ failed"; }
show_results "$DEMO_DIR/apply-deploy.jsonl"

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

say "applying the example as the admin: kapply -f deploy/example-iotservice.yaml"
kapply --field-manager demo -f "$ROOT/deploy/example-iotservice.yaml" \
	>"$DEMO_DIR/apply-example.jsonl" 2>"$DEMO_DIR/apply-example.log" ||
	{ show_results "$DEMO_DIR/apply-example.jsonl" >&2; cat "$DEMO_DIR/apply-example.log" >&2
	  die_with_logs "kapply -f deploy/example-iotservice.yaml failed"; }
show_results "$DEMO_DIR/apply-example.jsonl"

# Progress: kwatch follows the example; each change of its phase or of what is not ready yet
# (the Progressing condition's message) is one line.
say "following $O/$X with kwatch until Available (at most ${DEMO_TIMEOUT}s)"
kwatch -n "$O" --field-selector "metadata.name=$X" --log-format json --project '
	[(.status.phase // "(no status yet)"),
	 ((.status.conditions // []) | map(select(.type == "Progressing")) | .[0].message // "")]
	| if .[1] == "" then .[0] else "\(.[0]): \(.[1])" end' iotservices \
	</dev/null >"$DEMO_DIR/progress.jsonl" 2>"$DEMO_DIR/kwatch.log" &
WATCH_PID=$!
start=$(date +%s)
seen=0
last=
done_=
while :; do
	elapsed=$(($(date +%s) - start))
	# Only whole lines: kwatch may be in the middle of writing the next one.
	total=$(wc -l <"$DEMO_DIR/progress.jsonl")
	if test "$total" -gt "$seen"; then
		sed -n "$((seen + 1)),${total}p" "$DEMO_DIR/progress.jsonl" |
			jq -r 'select(.type != "BOOKMARK") | .object' >"$DEMO_DIR/progress.new"
		seen=$total
		while IFS= read -r line; do
			test "$line" = "$last" && continue
			printf '[%3ds] %s\n' "$elapsed" "$line"
			last=$line
			case "$line" in Available|Available:*) done_=1 ;; esac
		done <"$DEMO_DIR/progress.new"
	fi
	test -n "$done_" && break
	kill -0 "$OP_PID" 2>/dev/null || die_with_logs "iot-operator exited"
	kill -0 "$WATCH_PID" 2>/dev/null || { cat "$DEMO_DIR/kwatch.log" >&2; WATCH_PID=; die_with_logs "kwatch exited"; }
	test "$elapsed" -ge "$DEMO_TIMEOUT" &&
		die_with_logs "$X is not Available after ${DEMO_TIMEOUT}s (last: ${last:-nothing})"
	sleep 0.2
done
kill "$WATCH_PID" 2>/dev/null
wait "$WATCH_PID" 2>/dev/null
rm -f "$DEMO_DIR/progress.new"

api=$SERVER/apis/cp.iot.sap/v1/namespaces/$O/iotservices/$X
cat <<TEXT

demo: $X is Available after ${elapsed}s.

Look around with the project's tools (as the admin):

  export PATH="$KOP_BIN:\$PATH" KUBECONFIG="$KUBECONFIG"
  kwatch --once -n $O iotservices --project '{name: .metadata.name, phase: .status.phase}'
  kwatch --once -n $I deployments statefulsets services --project '"\(.kind)/\(.metadata.name)"'
  kwatch -n $O events --project .message      # follows; ^C ends it

Edit the example (two cockpit replicas; server-side apply as another field manager), follow
it, then delete it (curl with the admin's token):

  echo '{"apiVersion": "cp.iot.sap/v1", "kind": "IoTService", "metadata": {"name": "$X",
    "namespace": "$O"}, "spec": {"cockpit": {"size": 2}}}' | kapply --field-manager me -f -
  kwatch -n $O iotservices --project '[.metadata.generation, .status.phase]'    # ^C ends it
  d="$DEMO_DIR"
  curl -s --cacert "\$d/ca.crt" -H "Authorization: Bearer \$(cat "\$d/admin.token")" \\
    -X DELETE $api | jq .metadata.deletionTimestamp

${METRICS_PORT:+The operator's metrics: curl -s http://127.0.0.1:$METRICS_PORT/metrics
}Logs: $DEMO_DIR/operator.log (iot-operator and its stages), $DEMO_DIR/ksim.log.
TEXT
if command -v kubectl >/dev/null; then
	cat <<EOF

kubectl is optional; it is installed here, so with the KUBECONFIG above this works too (add --kubeconfig
$DEMO_DIR/operator.kubeconfig to act as the operator's ServiceAccount):

  kubectl get iotservices -n $O -o wide
  kubectl get all -n $I
  kubectl get events -n $O
EOF
fi
cat <<EOF

ksim (pid $KSIM_PID) and iot-operator (pid $OP_PID) keep running in the background.
Stop them with:

  make demo-stop        # or: scripts/demo.sh stop
EOF
