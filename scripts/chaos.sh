#!/bin/bash
# Chaos run (issue 9; `make chaos`): the whole operator against ksim (with
# --data) while CHAOS_N IoTServices (default 200) roll out and get edited,
# and faults are injected for CHAOS_SECONDS (default 120), one every
# CHAOS_EVERY seconds (default 2), chosen at random:
#
#   kill    kill -9 of a random stage (kwatch, ireconcile, kapply, kstatus)
#   cut     POST /ksim/cut-watches: every watch stream ends
#   gone    POST /ksim/error-watches (an ERROR 410 event) or /ksim/compact
#   errors  POST /ksim/faults: 20% of requests answered 429, 500 or 503 (at most 200 of them)
#   restart ksim killed (-9) and started again on the same port and --data
#   edit    a spec edit of 1 to 5 random instances (an image tag, or haproxy's size)
#   delete  one random instance deleted (at most CHAOS_DELETES, default 10)
#
# Then faults stop and the operator has CHAOS_SETTLE seconds (default 300)
# to converge. The verdict:
#   - every remaining instance is Available for its current generation;
#   - the namespaces of deleted instances are gone, nothing else is missing
#     and nothing extra exists: a fresh `ireconcile --once` of a
#     `kwatch --once` snapshot (the program's own watches) wants to write
#     nothing (no apply, delete, patch, status or event);
#   - the operator's pipeline is running.
# Counts of the faults injected and of the recoveries (pipeline restarts,
# relists, ksim's injected errors) are printed. Exit 0 when the verdict holds,
# 1 when it does not, 111 when the run could not be set up. Loopback only.
set -u
N=${CHAOS_N:-200}
SECONDS_CHAOS=${CHAOS_SECONDS:-120}
EVERY=${CHAOS_EVERY:-2}
SETTLE=${CHAOS_SETTLE:-300}
MAXDEL=${CHAOS_DELETES:-10}
root=$(cd "$(dirname "$0")/.." && pwd)
export OPERATOR_NAME=devawsk8s
. "$root/scripts/lib-run.sh"
log () { echo "chaos: $(date -u +%H:%M:%S) $*" >&2; }
cleanup () {
	stop_operator
	test -n "$ksim_pid" && kill "$ksim_pid" 2>/dev/null
	wait 2>/dev/null
	if test -n "${CHAOS_KEEP:-}"; then log "kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

port=0
ksim_up () {
	run_ksim "$tmp/kc" "$tmp/ksim.log" --port "$port" --data "$tmp/data" --pod-start-delay 200ms --lb-delay 200ms \
		--history 100000 || { log "ksim did not start"; return 1; }
	port=${url##*:}
}
api () { curl -sS -f --max-time 10 "$@"; }
admin () { curl -sS -f --max-time 10 -X POST "$@" >/dev/null 2>&1; }
stages () { op_procs | tail -n +2; }
count () { jq -n '[inputs] | length' <"$1"; }

mkdir -p "$tmp/data"
ksim_up || exit 111
cp "$tmp/kc" "$tmp/kubeconfig"	# the operator's: the port stays the same across restarts
export KUBECONFIG=$tmp/kubeconfig
run_operator "$tmp" || exit 111

IOT=/apis/cp.iot.sap/v1/namespaces/devawsk8s/iotservices
example_body "$tmp/example.json"
jq -r --argjson n "$N" --arg url "$url" '. as $b | range(1; $n + 1) | . as $i
	| ($b | .metadata.name = "chaos-\($i)" | .spec.domain_name = "chaos-\($i).chaos.example") as $o
	| "url = \"\($url)'"$IOT"'\"", "request = \"POST\"", "header = \"Content-Type: application/json\"",
	  "data = \($o | tojson | tojson)", "output = \"/dev/null\"", "next"' "$tmp/example.json" | sed '$d' >"$tmp/create.cfg"
log "creating $N IoTServices; chaos for ${SECONDS_CHAOS}s, a fault every ${EVERY}s"
curl -sS -f --no-progress-meter --parallel --parallel-max 16 -K "$tmp/create.cfg" || { log "create failed"; exit 111; }

declare -A F=()
ksim_injected=0
injected_now () { api "$url/ksim/faults" 2>/dev/null | jq '.injected // 0' 2>/dev/null || echo 0; }
deleted=" "
ndel=0
edits=0
edit_one () {
	local i=$((RANDOM % N + 1)) body
	case " $deleted " in *" $i "*) return ;; esac
	if ((RANDOM % 2)); then
		body="{\"spec\":{\"cockpit\":{\"image\":\"iot-service-dev.docker.repositories.sap.ondemand.com/cockpit:4.33.$RANDOM\"}}}"
	else
		body="{\"spec\":{\"haproxy\":{\"size\":$((RANDOM % 3 + 1))}}}"
	fi
	api -X PATCH -H 'Content-Type: application/merge-patch+json' -d "$body" "$url$IOT/chaos-$i" >/dev/null 2>&1 &&
		edits=$((edits + 1))
}

end=$((SECONDS + SECONDS_CHAOS))
while test $SECONDS -lt $end; do
	sleep "$EVERY"
	case $((RANDOM % 8)) in
	0) st=($(stages))
	   if test ${#st[@]} -gt 0; then
		victim=${st[RANDOM % ${#st[@]}]}
		name=$(cat "/proc/$victim/comm" 2>/dev/null)
		kill -9 "$victim" 2>/dev/null && F[kill_$name]=$((${F[kill_$name]:-0} + 1)) && log "kill -9 $name"
	   fi ;;
	1) admin "$url/ksim/cut-watches" && F[cut_watches]=$((${F[cut_watches]:-0} + 1)) && log "watches cut" ;;
	2) if ((RANDOM % 2)); then
		admin "$url/ksim/error-watches" && F[watch_410]=$((${F[watch_410]:-0} + 1)) && log "410 in the watches"
	   else
		admin "$url/ksim/compact" && F[compact_410]=$((${F[compact_410]:-0} + 1)) && log "history compacted"
	   fi ;;
	3) codes=(429 500 503); c=${codes[RANDOM % 3]}
	   admin -H 'Content-Type: application/json' -d "{\"rate\":0.2,\"code\":$c,\"count\":200}" "$url/ksim/faults" &&
		F[errors_$c]=$((${F[errors_$c]:-0} + 1)) && log "20% of requests answer $c (200 at most)" ;;
	4) log "ksim restart"
	   ksim_injected=$((ksim_injected + $(injected_now)))
	   kill -9 "$ksim_pid"; wait "$ksim_pid" 2>/dev/null
	   ksim_up || { sleep 1; ksim_up; } || { log "ksim did not come back"; exit 111; }
	   F[ksim_restart]=$((${F[ksim_restart]:-0} + 1)) ;;
	5|6) k=$((RANDOM % 5 + 1)); while test $k -gt 0; do edit_one; k=$((k - 1)); done ;;
	7) if test $ndel -lt "$MAXDEL"; then
		i=$((RANDOM % N + 1))
		case "$deleted" in *" $i "*) ;; *)
			if api -X DELETE "$url$IOT/chaos-$i" >/dev/null 2>&1; then
				deleted="$deleted$i " ndel=$((ndel + 1)); log "deleted chaos-$i"
			fi ;;
		esac
	   fi ;;
	esac
done
F[edits]=$edits
F[deletes]=$ndel
ksim_injected=$((ksim_injected + $(injected_now)))
admin -H 'Content-Type: application/json' -d '{"reset":true}' "$url/ksim/faults"
log "faults stopped; waiting up to ${SETTLE}s for convergence"

want=$((N - ndel))
converged () {
	api "$url$IOT" -o "$tmp/list.json" 2>/dev/null || return 1
	a=$(jq '[.items[] | select(.status.phase == "Available" and .status.observedGeneration == .metadata.generation)] | length' "$tmp/list.json")
	total=$(jq '.items | length' "$tmp/list.json")
	gone=1
	for i in $deleted; do
		api -o /dev/null "$url/api/v1/namespaces/devawsk8s-chaos-$i" 2>/dev/null && gone=0 && break
	done
	test "$a" = "$want" && test "$total" = "$want" && test $gone = 1
}
t0=$SECONDS
ok=0
while test $((SECONDS - t0)) -lt "$SETTLE"; do
	if converged; then ok=1; break; fi
	sleep 1
done
settle_s=$((SECONDS - t0))
verdict=0
if test $ok = 1; then
	log "converged ${settle_s}s after the faults stopped: $want instances Available"
else
	log "NOT converged after ${SETTLE}s: ${a:-?} of $want Available, ${total:-?} IoTServices, deleted namespaces gone: ${gone:-?}"
	jq -r '.items[] | select(.status.phase != "Available" or .status.observedGeneration != .metadata.generation)
		| "  stuck: \(.metadata.name) generation \(.metadata.generation) status \(.status | tojson)"' \
		"$tmp/list.json" 2>/dev/null | head -n 20 >&2
	verdict=1
fi

# A fresh reconcile of the final state: nothing to write.
args=$(ireconcile --print-watches "$root/pipeline/iotservice" | jq -r '.resource + "@" +
	(if .namespace == "" then "*" else .namespace end) + ":l=" + .labelSelector + ":f=" + .fieldSelector')
# shellcheck disable=SC2086
if ! kwatch --once $args >"$tmp/snapshot.jsonl" 2>"$tmp/kwatch.err"; then
	log "kwatch --once failed"; cat "$tmp/kwatch.err" >&2; verdict=1
fi
if ! ireconcile --once "$root/pipeline/iotservice" <"$tmp/snapshot.jsonl" >"$tmp/fresh.jsonl" 2>"$tmp/fresh.err"; then
	log "ireconcile --once failed"; cat "$tmp/fresh.err" >&2; verdict=1
fi
jq -c 'select(.op? != null)' "$tmp/fresh.jsonl" >"$tmp/writes.jsonl" 2>/dev/null
nw=$(count "$tmp/writes.jsonl")
objs=$(jq -n '[inputs | select(.type != "BOOKMARK")] | length' <"$tmp/snapshot.jsonl")
if test "$nw" != 0; then
	log "a fresh reconcile of the final state wants $nw writes:"
	jq -c '{op, primary, kind: (.object.kind // .event.reason), name: .object.metadata.name}' "$tmp/writes.jsonl" |
		head -n 20 >&2
	verdict=1
else
	log "a fresh reconcile of the final state ($objs objects) wants to write nothing"
fi
# Duplicates: each instance namespace exactly once, none for deleted ones.
nns=$(jq -n '[inputs | select(.object.kind == "Namespace")] | length' <"$tmp/snapshot.jsonl")
if test "$nns" != "$want"; then log "$nns instance namespaces, $want expected"; verdict=1; fi
if ! kill -0 "$op_pid" 2>/dev/null; then log "the operator is not running"; verdict=1; fi

curl -s "http://127.0.0.1:$mport/metrics" >"$tmp/metrics" 2>/dev/null
restarts=$(awk '/^iot_operator_stage_restarts_total/ { s += $2 } END { print s + 0 }' "$tmp/metrics")
relists=$(awk '/^kwatch_relists_total/ { s += $2 } END { print s + 0 }' "$tmp/metrics")

echo "chaos: $N instances, ${SECONDS_CHAOS}s of faults every ${EVERY}s, settle ${settle_s}s"
echo "faults injected:"
for k in $(printf '%s\n' "${!F[@]}" | sort); do printf '  %-16s %s\n' "$k" "${F[$k]}"; done
printf '  %-16s %s\n' "ksim_errors_sent" "$ksim_injected (429/500/503 answers sent by ksim's fault injection)"
echo "recoveries:"
printf '  %-16s %s\n' pipeline_restarts "$restarts (the supervisor restarted the pipeline)"
printf '  %-16s %s\n' kwatch_relists "$relists (410s recovered by reading the state again)"
printf '  %-16s %s\n' converged "$([ $ok = 1 ] && echo yes || echo no) ($want instances Available, $ndel deleted and gone)"
printf '  %-16s %s\n' fresh_writes "$nw (a fresh reconcile of $objs live objects)"
if test $verdict = 0; then echo "chaos: PASS"; else echo "chaos: FAIL"; CHAOS_KEEP=1; fi
exit $verdict
