#!/bin/bash
# Soak run (`make soak`): the whole operator against ksim for a long while,
# to show that what each process holds stays where it is. SOAK_N IoTServices
# (default 100) are created and become Available, then two phases of
# SOAK_SECONDS each (default 600):
#
#   edits   a spec edit every 0.2 s, the instances in turn (cockpit's size,
#           1 and 2 by turns): rollouts, statuses, Events
#   churn   every second an instance created and the one created five
#           before deleted (its namespace with it)
#
# The RSS of the supervisor, of each stage and of ksim is sampled every
# SOAK_EVERY seconds (default 60) and printed. The verdict:
#   - every kept instance is Available for its current generation, every
#     churned one is gone with its namespace;
#   - the operator logged no error and restarted no stage;
#   - no process of the operator grew by more than SOAK_GROWTH_KB (default
#     8192) from the first sample of the edits to the end: a cache that
#     fills up to its bound passes (kstatus keeps up to 4,096 recent
#     Events), memory that grows with every operation does not.
# Exit 0 when the verdict holds, 1 when it does not (the run directory is
# kept), 111 when the run could not be set up. Loopback only.
set -u
N=${SOAK_N:-100}
PHASE=${SOAK_SECONDS:-600}
EVERY=${SOAK_EVERY:-60}
GROWTH=${SOAK_GROWTH_KB:-8192}
root=$(cd "$(dirname "$0")/.." && pwd)
export OPERATOR_NAME=devawsk8s
. "$root/scripts/lib-run.sh"
verdict=0
log () { echo "soak: $(date -u +%H:%M:%S) $*" >&2; }
cleanup () {
	stop_operator
	test -n "$ksim_pid" && kill "$ksim_pid" 2>/dev/null
	wait 2>/dev/null
	if test "$verdict" != 0 || test -n "${SOAK_KEEP:-}"; then log "kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

run_ksim "$tmp/kc" "$tmp/ksim.log" --port 0 --pod-start-delay 0 --lb-delay 0 || { log "ksim did not start"; exit 111; }
export KUBECONFIG=$tmp/kc
run_operator "$tmp" || exit 111

IOT=$url/apis/cp.iot.sap/v1/namespaces/devawsk8s/iotservices
api () { curl -sS -f --max-time 10 "$@"; }
example_body "$tmp/example.json"
create () {
	jq -c --arg n "$1" '.metadata.name = $n | .spec.domain_name = "\($n).soak.example"' "$tmp/example.json" |
		api -o /dev/null -X POST -H 'Content-Type: application/json' --data-binary @- "$IOT" ||
		log "unable to create $1"
}
available () {	# the instances named soak-* Available for their generation
	api "$IOT" -o "$tmp/list.json" 2>/dev/null &&
	jq '[.items[] | select((.metadata.name | startswith("soak-")) and .status.phase == "Available"
		and .status.observedGeneration == .metadata.generation)] | length' "$tmp/list.json"
}
wait_available () {	# COUNT SECONDS
	local t0=$SECONDS a=
	while test $((SECONDS - t0)) -lt "$2"; do
		a=$(available) && test "$a" = "$1" && return 0
		sleep 1
	done
	log "only ${a:-?} of $1 instances Available after $2 s"
	return 1
}

# sample LABEL: a line of every process's RSS; the operator's also in $tmp/rss.LABEL
sample () {
	local line="" p name
	: >"$tmp/rss.$1"
	for p in $(op_procs); do
		name=$(cat "/proc/$p/comm" 2>/dev/null) || continue
		echo "$name $(status_kb "$p" VmRSS)" >>"$tmp/rss.$1"
		line="$line $name=$(status_kb "$p" VmRSS)"
	done
	log "$1:$line ksim=$(status_kb "$ksim_pid" VmRSS) (KB)"
}

log "creating $N IoTServices"
i=1
while test $i -le "$N"; do create "soak-$i"; i=$((i + 1)); done
wait_available "$N" 600 || { verdict=1; exit 1; }
sample start

log "edits for ${PHASE}s"
t0=$SECONDS next=$((SECONDS + EVERY)) edits=0 first=
while test $((SECONDS - t0)) -lt "$PHASE"; do
	edits=$((edits + 1))
	api -o /dev/null -X PATCH -H 'Content-Type: application/merge-patch+json' \
		-d "{\"spec\":{\"cockpit\":{\"size\":$(( (edits / N) % 2 + 1 ))}}}" "$IOT/soak-$(( edits % N + 1 ))" ||
		log "edit $edits failed"
	sleep 0.2
	if test $SECONDS -ge $next; then
		label=edits-$((SECONDS - t0))s
		sample "$label"
		test -n "$first" || first=$tmp/rss.$label
		next=$((SECONDS + EVERY))
	fi
done

log "churn for ${PHASE}s: created and deleted"
t0=$SECONDS next=$((SECONDS + EVERY)) k=0
while test $((SECONDS - t0)) -lt "$PHASE"; do
	k=$((k + 1))
	create "churn-$k"
	test $k -le 5 || api -o /dev/null -X DELETE "$IOT/churn-$((k - 5))" || log "unable to delete churn-$((k - 5))"
	sleep 1
	if test $SECONDS -ge $next; then sample "churn-$((SECONDS - t0))s"; next=$((SECONDS + EVERY)); fi
done
i=$((k > 4 ? k - 4 : 1))
while test $i -le $k; do api -o /dev/null -X DELETE "$IOT/churn-$i" || log "unable to delete churn-$i"; i=$((i + 1)); done
log "$edits edits, $k instances created and deleted; settling"

# The verdict.
wait_available "$N" 300 || verdict=1
# gone PATH PREFIX: nothing named PREFIX* left in the list at PATH (2 minutes at most)
gone () {
	local t1=$SECONDS
	while api "$1" 2>/dev/null | jq -e --arg p "$2" '[.items[] | select(.metadata.name | startswith($p))] | length > 0' \
		>/dev/null; do
		test $((SECONDS - t1)) -lt 120 || { log "$2* still there after 2 minutes"; return 1; }
		sleep 1
	done
}
gone "$IOT" churn- || verdict=1
gone "$url/api/v1/namespaces" devawsk8s-churn- || verdict=1
sample end
errors=$(grep -c '"level":"error"' "$tmp/operator.log")
test "$errors" = 0 || { log "the operator logged $errors errors"; grep '"level":"error"' "$tmp/operator.log" | head -n 5 >&2; verdict=1; }
restarts=$(api "http://127.0.0.1:$mport/metrics" | awk '/^iot_operator_stage_restarts_total/ { n += $2 } END { print n + 0 }')
test "$restarts" = 0 || { log "$restarts stage restarts"; verdict=1; }
test -n "$first" || first=$tmp/rss.start
while read -r name kb_end; do
	kb_first=$(awk -v n="$name" '$1 == n { print $2 }' "$first")
	test -n "$kb_first" || { log "$name: no first sample in $first"; verdict=1; continue; }
	growth=$((kb_end - kb_first))
	echo "{\"bench\":\"soak\",\"metric\":\"${name}_rss_growth_kb\",\"value\":$growth,\"unit\":\"KB\",\"target\":\"<= $GROWTH\"}"
	test "$growth" -le "$GROWTH" || { log "$name grew by $growth KB"; verdict=1; }
done <"$tmp/rss.end"
echo "{\"bench\":\"soak\",\"metric\":\"edits\",\"value\":$edits,\"unit\":\"count\"}"
echo "{\"bench\":\"soak\",\"metric\":\"instances_created_and_deleted\",\"value\":$k,\"unit\":\"count\"}"
if test "$verdict" = 0; then log "PASS"; else log "FAIL"; fi
exit "$verdict"
