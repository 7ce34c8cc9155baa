#!/bin/sh
# ireconcile benchmark (issue 5): reconciles per second and RSS with N
# (default 1,000) primaries and their children in the view, fed from
# generated event files (no API server). Figures go to stdout as JSON lines.
#
#  iotservice: N IoTServices (the example of t2104) reconciled from nothing
#    ("create": every child applied), then the same N with all 20 children
#    each live in the view ("steady": the view holds 21 N objects).
#    Then "churn": that view complete before the bookmark, then every
#    workload's status changing and a pod per workload becoming Running,
#    as when an instance comes up (its reconciles only).
#  engine: the same first two passes with t2001's tiny program, whose jq is cheap,
#    so that the engine's own cost shows apart from the program's.
#
# reconciles/s is N divided by the time spent inside reconciles (the sum of
# the -v log's "ms"); wall time also counts reading and parsing the input.
#
# Wall figures vary by a quarter and more from run to run on a shared VM;
# instruction counts do not. So, where valgrind is installed, the same passes
# then run again with BENCH_IRECONCILE_N_INSTR (default 100) instances under
# callgrind, counting only inside reconciles, and print NAME_minstr_per_reconcile
# (millions of instructions per reconcile; the churn pass's rounds are then
# sent one at a time, each once the last is reconciled; valgrind's SHA-256 is without the
# CPU's SHA extensions, so digests weigh about 5 times what they do natively).
# BENCH_IRECONCILE_INSTR=0 skips it; =only runs only it.
set -eu
N=${BENCH_IRECONCILE_N:-1000}
INSTR=${BENCH_IRECONCILE_INSTR:-1}
[ "$INSTR" != only ] || N=${BENCH_IRECONCILE_N_INSTR:-100}
root=$(cd "$(dirname "$0")/.." && pwd)
: "${KOP_BIN:=$root/bin}"
PATH="$KOP_BIN:$PATH"
tmp=${BENCH_TMP:-$(mktemp -d)}
[ -n "${BENCH_TMP:-}" ] || trap 'rm -rf "$tmp"' EXIT
log () { echo "bench ireconcile: $*" >&2; }

# run NAME PROGRAM INPUT [SKIP]: runs ireconcile -v, prints the figures of
# the reconciles after the first SKIP (default 0). Every run renders in the
# one process (--no-render-worker): a reconcile's figures count its render.
run () {
	if [ "$INSTR" = only ]; then
		run_instr "$@"
		return
	fi
	/usr/bin/time -f "%e %M" -o "$tmp/$1.time" ireconcile -v --no-render-worker "$2" <"$3" >"$tmp/$1.out" \
		2>"$tmp/$1.err"
	read -r wall rss <"$tmp/$1.time"
	jq -s -c --arg name "$1" --arg wall "$wall" --arg rss "$rss" --argjson skip "${4:-0}" '
		[.[] | select(.msg? // "" | startswith("reconciled "))][$skip:] as $r
		| ($r | map(.ms) | add) as $ms
		| {bench: "ireconcile", metric: "\($name)_reconciles_per_s",
		   value: (if $ms > 0 then ($r | length) * 1000 / $ms | floor else null end), unit: "1/s",
		   target: ">= 1000"},
		  {bench: "ireconcile", metric: "\($name)_program_ms_per_reconcile",
		   value: (($r | map(.programMs + .functionsMs) | add) / ($r | length) * 100 | floor / 100), unit: "ms"},
		  {bench: "ireconcile", metric: "\($name)_engine_ms_per_reconcile",
		   value: (($r | map(.ms - .programMs - .functionsMs) | add) / ($r | length) * 100 | floor / 100),
		   unit: "ms"},
		  {bench: "ireconcile", metric: "\($name)_wall_s", value: ($wall | tonumber), unit: "s"},
		  {bench: "ireconcile", metric: "\($name)_peak_rss_kb", value: ($rss | tonumber), unit: "KB",
		   target: "< 100000"}' <"$tmp/$1.err"
	log "$1: $(grep -c '"reconciled ' "$tmp/$1.err") reconciles, $(wc -l <"$tmp/$1.out") operations, ${wall}s, ${rss} KB"
}

# cg_total FILE: the instructions callgrind counted in FILE.
cg_total () {
	callgrind_annotate "$1" | sed -n 's/^ *\([0-9,]*\) .*PROGRAM TOTALS.*/\1/p' | tr -d ,
}

# run_instr NAME PROGRAM INPUT: as run, under callgrind: millions of
# instructions per reconcile.
run_instr () {
	valgrind --tool=callgrind --toggle-collect=reconcile --toggle-collect=prerender \
		--callgrind-out-file="$tmp/$1.cg" --log-file="$tmp/$1.vg" \
		ireconcile -v --no-render-worker "$2" <"$3" >"$tmp/$1.out" 2>"$tmp/$1.err"
	ir=$(cg_total "$tmp/$1.cg")
	jq -s -c --arg name "$1" --argjson ir "$ir" '
		[.[] | select(.msg? // "" | startswith("reconciled "))] as $r
		| {bench: "ireconcile", metric: "\($name)_minstr_per_reconcile",
		   value: (if ($r | length) > 0 then $ir / ($r | length) / 1e4 | floor / 100 else null end),
		   unit: "M instructions"}' <"$tmp/$1.err"
	log "$1 (callgrind): $(grep -c '"reconciled ' "$tmp/$1.err") reconciles, $ir instructions in them"
}

# churn_instr NAME PROGRAM STEADY: pass 3 under callgrind. A round is sent
# only once the previous one has been reconciled (callgrind is too slow for
# wall pacing), and the first pass's reconciles and instructions, the same
# input as pass 2's (run STEADY), are taken off: millions of instructions per
# churn reconcile. (Approximately one round at a time: a round is more than a
# pipe holds, so an instance whose events were read in two parts is
# reconciled twice, and the next round may start a little early.)
churn_instr () {
	rm -f "$tmp/churn.fifo"
	mkfifo "$tmp/churn.fifo"
	first_n=$(grep -c '"reconciled ' "$tmp/$3.err")
	churn_log=$tmp/$1_churn.err
	: >"$churn_log"
	valgrind --tool=callgrind --toggle-collect=reconcile --toggle-collect=prerender \
		--callgrind-out-file="$tmp/$1_churn.cg" \
		--log-file="$tmp/$1_churn.vg" ireconcile -v --no-render-worker "$2" <"$tmp/churn.fifo" >"$tmp/$1_churn.out" \
		2>"$churn_log" &
	vg=$!
	{
		churn_input "$1" "$first_n" round_reconciled
		round_reconciled "$want"
	} >"$tmp/churn.fifo"
	wait "$vg"
	ir=$(cg_total "$tmp/$1_churn.cg")
	first=$(cg_total "$tmp/$3.cg")
	n=$(grep -c '"reconciled ' "$churn_log")
	jq -n -c --arg name "iotservice_churn" --argjson ir "$((ir - first))" --argjson n "$((n - first_n))" '
		{bench: "ireconcile", metric: "\($name)_minstr_per_reconcile",
		 value: (if $n > 0 then $ir / $n / 1e4 | floor / 100 else null end), unit: "M instructions"}'
	log "iotservice_churn (callgrind): $((n - first_n)) reconciles after the first $first_n, $((ir - first)) instructions in them"
}

# round_reconciled COUNT: churn_instr's wait before a round.
round_reconciled () {
	reconciled_at_least "$churn_log" "$1" "$vg"
}

# reconciled_at_least LOG COUNT PID: waits until LOG counts COUNT reconciles
# (fails when PID has exited, or after ten minutes without a new one).
reconciled_at_least () {
	i=0
	last=-1
	while :; do
		got=$(grep -c '"reconciled ' "$1" || :)
		[ "$got" -lt "$2" ] || return 0
		kill -0 "$3" 2>/dev/null || { log "ireconcile exited before $2 reconciles"; return 1; }
		[ "$got" = "$last" ] || { i=0; last=$got; }
		i=$((i + 1))
		[ "$i" -lt 3000 ] || { log "no reconcile for 10 minutes, $got of $2"; return 1; }
		sleep 0.2
	done
}

# churn NAME PROGRAM STEADY: pass 3, from pass 1's output (NAME) and pass
# 2's input: pass 2's initial state, the bookmark, then the children becoming
# ready (the common case once running), one component at a time for every
# instance: its workload's status changes and its pod becomes Running.
# Rounds are paced so that they are not all coalesced into one reconcile;
# the figures count only the reconciles after the first N (the initial ones);
# under callgrind, churn_instr (STEADY: pass 2's run).
churn () {
	jq -c 'select(.op == "apply" and (.object.kind == "Deployment" or .object.kind == "StatefulSet"))
		| .object | .metadata.uid = "u-\(.metadata.namespace)-\(.kind)-\(.metadata.name)"
		| .metadata.resourceVersion = "8" | .metadata.generation = 1   # as in the view: only the status changes
		| .spec.replicas as $r
		| ({type: "MODIFIED", object: (.status = {observedGeneration: 1, replicas: $r, readyReplicas: $r,
			updatedReplicas: $r, availableReplicas: $r, currentRevision: "r1", updateRevision: "r1"})},
		   {type: "ADDED", object: {apiVersion: "v1", kind: "Pod",
			metadata: {name: "\(.metadata.name)-0", namespace: .metadata.namespace,
				   uid: "pod-\(.metadata.namespace)-\(.metadata.name)", resourceVersion: "9",
				   labels: .spec.template.metadata.labels},
			status: {phase: "Running"}}})' "$tmp/$1.out" >"$tmp/$1.churn.events"
	if [ "$INSTR" = only ]; then
		churn_instr "$1" "$2" "$3"
		return
	fi
	pace=$((N / 250 + 1))
	churn_input "$1" "$N" round_paced | run iotservice_churn "$2" /dev/stdin "$N"
}

# round_paced COUNT: churn's wait before a round (wall time).
round_paced () {
	sleep "$pace"
}

# churn_input NAME COUNT WAIT: pass 3's input from pass 1's run NAME: pass 2's
# initial state, the bookmark, then a round per component, each after
# "WAIT N" (N: the reconciles due before it, COUNT the first time, N more
# each round); $want is left at the count due after the last.
churn_input () {
	grep -v '"type":"BOOKMARK"' "$tmp/$1.steady.jsonl"
	grep '"type":"BOOKMARK"' "$tmp/$1.steady.jsonl"
	want=$2
	for c in $(jq -r '.object.metadata.labels.component' "$tmp/$1.churn.events" | sort -u); do
		"$3" "$want"
		jq -c --arg c "$c" 'select(.object.metadata.labels.component == $c)' "$tmp/$1.churn.events"
		want=$((want + N))
	done
}

# Pass 2's input: pass 1's primaries with the finalizer and status they asked
# for, and every applied child as a live object.
steady_input () {
	jq -c -s '[.[] | select(.op == "status")] | map({key: .primary, value: .object.status}) | from_entries' \
		<"$tmp/$1.out" >"$tmp/$1.status.json"
	{
		grep -v '"kind":"'"$2"'"' "$3" || :
		jq -c --slurpfile st "$tmp/$1.status.json" --arg f "$4" \
			'select(.object.kind == "'"$2"'" and .type != "BOOKMARK")
			 | .object.metadata.finalizers = [$f]
			 | .object.status = $st[0]["\(.object.metadata.namespace)/\(.object.metadata.name)"]' "$3"
		jq -c 'select(.op == "apply" or .op == "create") | {type: "ADDED", object: (.object
			| .metadata.uid = "u-\(.metadata.namespace)-\(.kind)-\(.metadata.name)"
			| .metadata.resourceVersion = "7"
			| if .kind == "Deployment" or .kind == "StatefulSet" then .metadata.generation = 1 else . end)}' "$tmp/$1.out"
		grep '"type":"BOOKMARK"' "$3"	# the initial list ends once everything is in the view
	} >"$tmp/$1.steady.jsonl"
}

log "generating $N IoTServices"
# (the state once the finalizer is stored: children are applied only then)
F="$root/t/t2104-iotservice-ireconcile/01-finalized.in.jsonl"
{
	jq -c 'select(.object.kind != "IoTService")' "$F"
	jq -c --argjson n "$N" 'select(.object.kind == "IoTService" and .type != "BOOKMARK") | range(0; $n) as $i
		| .object.metadata.name = "inst\($i)" | .object.metadata.uid = "uid-\($i)"
		| .object.metadata.resourceVersion = "\(1000 + $i)"' "$F"
	grep '"type":"BOOKMARK"' "$F"
} >"$tmp/iot-nons.jsonl"
export OPERATOR_NAME=devawsk8s
# The instance namespaces first: each is created, alone, before its other
# children are applied (adopt: false); in the create pass they are live.
ireconcile "$root/pipeline/iotservice" <"$tmp/iot-nons.jsonl" >"$tmp/ns.out"
{
	grep -v '"type":"BOOKMARK"' "$tmp/iot-nons.jsonl"
	jq -c 'select(.op == "create") | {type: "ADDED", object: (.object
		| .metadata.uid = "u-\(.metadata.name)" | .metadata.resourceVersion = "6" | .status = {phase: "Active"})}' "$tmp/ns.out"
	grep '"type":"BOOKMARK"' "$tmp/iot-nons.jsonl"
} >"$tmp/iot.jsonl"
test "$(grep -c '"kind":"Namespace"' "$tmp/iot.jsonl")" -ge "$N" || { log "the instance namespaces were not created"; exit 1; }
run iotservice_create "$root/pipeline/iotservice" "$tmp/iot.jsonl"
steady_input iotservice_create IoTService "$tmp/iot.jsonl" com.sap.iotservices/namespace-dropper
run iotservice_steady "$root/pipeline/iotservice" "$tmp/iotservice_create.steady.jsonl"
churn iotservice_create "$root/pipeline/iotservice" iotservice_steady

log "generating $N widgets"
mkdir -p "$tmp/prog"
cp -R "$root/t/t2001-ireconcile-engine/widgets" "$root/pipeline/lib" "$tmp/prog/"
W="$root/t/t2001-ireconcile-engine/01-create.in.jsonl"
{
	jq -c --argjson n "$N" 'select(.object.kind == "Widget" and .type != "BOOKMARK") | range(0; $n) as $i
		| .object.metadata.name = "w\($i)" | .object.metadata.uid = "uid-\($i)"
		| .object.metadata.finalizers = ["test.example.org/cleanup"] | .object.spec.size = 2' "$W"
	grep '"type":"BOOKMARK"' "$W"
} >"$tmp/widgets.jsonl"
export WIDGET_TEAM=blue
run engine_create "$tmp/prog/widgets" "$tmp/widgets.jsonl"
steady_input engine_create Widget "$tmp/widgets.jsonl" test.example.org/cleanup
run engine_steady "$tmp/prog/widgets" "$tmp/engine_create.steady.jsonl"

if [ "$INSTR" = 1 ]; then
	if command -v valgrind >/dev/null && command -v callgrind_annotate >/dev/null; then
		log "the same passes under callgrind, ${BENCH_IRECONCILE_N_INSTR:-100} instances"
		BENCH_IRECONCILE_INSTR=only BENCH_TMP= sh "$0"
	else
		log "no valgrind: instruction counts left out"
	fi
fi
