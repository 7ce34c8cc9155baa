#!/bin/sh
# Sharding benchmark (issue 33): BENCH_SHARDS_N IoTServices (default 1000)
# over BENCH_SHARDS_REPLICAS replicas (default 3) of `iot-operator --shards
# R` (R = BENCH_SHARDS_RANGES, default 16), each its own POD_NAME (a, b, c
# ...) and metrics port, against one ksim with the server-side shard
# selector (--feature-gates ShardedListAndWatch=true) and its request log
# (-v), instant readiness (--pod-start-delay 0 --lb-delay 0). Then one
# replica alone, the same way, on a fresh ksim.
#
#  sharded: the replicas started, N IoTServices created at once (curl
#    --parallel); time until every one is Available for its generation;
#    after BENCH_SHARDS_SETTLE_S seconds (default 5): each replica's PSS
#    (smaps_rollup of the supervisor and its stages, summed), the bytes its
#    kwatch received since it started (ksim's /ksim/stats, bytesByAgent of
#    "iot-operator/kwatch (POD)": lists and watches), split by resource
#    (bytesByAgentResource) into the kinds the shard selector cuts (every
#    resource but iotservices.cp.iot.sap and namespaces: the instance
#    namespaces' Deployments, Pods, Secrets ...) and the shared ones every
#    replica lists and watches whole (IoTServices in namespace O, and
#    Namespaces), discovery apart, each resource's bytes logged; the
#    instances it holds (those whose range its shard Leases hold; its
#    ireconcile's count, /metrics ireconcile_primaries, logged beside).
#  takeover: the ranges replica a holds (the shard Leases naming it) and so
#    its instances (bench/shards-writers --keys); kill -9 of a, and at once
#    an edit of each of those instances (the cockpit image); the time from
#    the kill until every one of them has been written for by another
#    replica (ksim's request log: a write in its namespace, or to it or its
#    status); then until every instance is Available for its generation.
#  writers: bench/shards-writers over ksim's whole request log: instances
#    written for by two replicas less than a Lease duration (15 s) apart but
#    across a hand-over (target 0).
#  single: one replica (--shards R, POD_NAME a) holding every range, the
#    same N: its PSS and kwatch's bytes, split, as above.
#
# Figures go to stdout as JSON lines (bench/run), progress to stderr. What
# does not happen within BENCH_SHARDS_TIMEOUT seconds (default 1200; the
# writes of the takeover: 120) is reported as measured (the count reached, null for a
# time), nothing extrapolated. ksim's logs and the replicas' are kept in
# BENCH_SHARDS_KEEP (a directory) when set.
set -eu
N=${BENCH_SHARDS_N:-1000}
REPLICAS=${BENCH_SHARDS_REPLICAS:-3}
RANGES=${BENCH_SHARDS_RANGES:-16}
TIMEOUT=${BENCH_SHARDS_TIMEOUT:-1200}
SETTLE=${BENCH_SHARDS_SETTLE_S:-5}
KEEP=${BENCH_SHARDS_KEEP:-}
LEASE_S=15	# the supervisor's default --lease-duration
O=devawsk8s
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/lib-run.sh"
writers="$root/bench/shards-writers"
names=
pids=
stop_replicas () {
	for p in $pids; do kill -TERM "$p" 2>/dev/null || :; done
	i=0
	for p in $pids; do
		while kill -0 "$p" 2>/dev/null && test $i -lt 150; do sleep 0.1; i=$((i + 1)); done
		kill -KILL "$p" 2>/dev/null || :
	done
	pids=
}
stop_all () {
	stop_replicas
	test -n "$ksim_pid" && kill "$ksim_pid" 2>/dev/null || :
	wait 2>/dev/null || :
	ksim_pid=
}
keep () {
	if test -n "$KEEP" && test -d "$tmp"; then
		mkdir -p "$KEEP" && cp -r "$tmp"/. "$KEEP"/ || :
	fi
}
trap 'stop_all; keep; rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
log () { echo "bench shards: $*" >&2; }
now_ms () { date +%s%3N; }
figure () { # metric value unit [target]
	printf '{"bench":"shards","metric":"%s","value":%s,"unit":"%s"%s}\n' "$1" "$2" "$3" "${4:+,\"target\":\"$4\"}"
}
case $REPLICAS in ''|*[!0-9]*) log "BENCH_SHARDS_REPLICAS: not a number: '$REPLICAS'"; exit 100 ;; esac
test "$REPLICAS" -ge 2 && test "$REPLICAS" -le 26 || { log "BENCH_SHARDS_REPLICAS: 2 to 26"; exit 100; }

available () { # -> number of IoTServices Available for their current generation
	curl -sS -f "$url/apis/cp.iot.sap/v1/namespaces/$O/iotservices" -o "$tmp/list.json" &&
	jq '[.items[] | select(.status.phase == "Available" and
		.status.observedGeneration == .metadata.generation)] | length' "$tmp/list.json"
}
# wait_available N LIMIT_S: polls until N are Available; prints how many were
wait_available () {
	wa_t0=$(now_ms)
	# a list of N IoTServices parsed by jq costs what the replicas would use: polled every N/500 s, 0.5 s at least
	wa_poll=$(awk -v n="$1" 'BEGIN { s = n / 500; printf "%.1f", s < 0.5 ? 0.5 : s }')
	while :; do
		wa_a=$(available || echo 0)
		test "$wa_a" -ge "$1" && break
		test $(( ($(now_ms) - wa_t0) / 1000 )) -ge "$2" && break
		sleep "$wa_poll"
	done
	echo "$wa_a"
}
# pss PID: the PSS (kB) of PID and its children (the supervisor and its stages)
pss () {
	ps_t=0
	for ps_p in $(tree_procs "$1"); do
		ps_v=$(awk '$1 == "Pss:" { print $2 }' "/proc/$ps_p/smaps_rollup" 2>/dev/null)
		ps_t=$((ps_t + ${ps_v:-0}))
	done
	echo "$ps_t"
}
# watch_bytes POD STATS: the bytes ksim sent kwatch of replica POD (lists and watches)
watch_bytes () {
	jq --arg a "iot-operator/kwatch ($1)" '[.bytesByAgent[$a] // {} | .[]] | add // 0' "$2"
}
# watch_split POD STATS: "SHARDED SHARED DISCOVERY", the bytes of watch_bytes by resource: the kinds
# the shard selector cuts, the IoTServices and Namespaces every replica receives whole, discovery
watch_split () {
	jq -r --arg a "iot-operator/kwatch ($1)" '.bytesByAgentResource[$a] // {} | to_entries
		| def sum(f): [.[] | select(.key | f) | .value] | add // 0;
		def shared: IN("iotservices.cp.iot.sap", "namespaces");
		"\(sum(shared or . == "(discovery)" | not)) \(sum(shared)) \(sum(. == "(discovery)"))"' "$2"
}
# by_resource POD STATS: kwatch's bytes by resource, "RESOURCE=N ..." (most first), for the log
by_resource () {
	jq -r --arg a "iot-operator/kwatch ($1)" '.bytesByAgentResource[$a] // {} | to_entries
		| sort_by(-.value) | map("\(.key)=\(.value)") | join(" ")' "$2"
}
# primaries POD: the instances replica POD's ireconcile holds (its /metrics), empty when it does not answer
primaries () {
	curl -sS -f -m 5 "http://127.0.0.1:$(cat "$d/$1.port")/metrics" 2>/dev/null |
		awk '$1 ~ /^ireconcile_primaries($|\{)/ { s += $2; seen = 1 } END { if (seen) print s }'
}
# start_replica POD: iot-operator --shards, POD_NAME=POD, its stderr in $d/POD.log, its metrics port in $d/POD.port
start_replica () {
	POD_NAME=$1 OPERATOR_NAME=$O iot-operator --shards "$RANGES" --metrics-addr 127.0.0.1:0 \
		--program "$root/pipeline/iotservice" --log-format json >/dev/null 2>"$d/$1.log" </dev/null &
	eval "pid_$1=$!"
	pids="$pids $!"
	sr_i=0
	until sr_port=$(sed -n 's/.*"port":\([0-9]*\).*/\1/p' "$d/$1.log" | head -n 1) && test -n "$sr_port"; do
		sr_i=$((sr_i + 1))
		if test $sr_i -gt 600 || ! kill -0 "$(eval echo "\$pid_$1")" 2>/dev/null; then
			log "replica $1 did not start; its log ends:"; tail -n 5 "$d/$1.log" >&2; return 1
		fi
		sleep 0.05
	done
	echo "$sr_port" >"$d/$1.port"
}
# start_ksim DIR: a fresh ksim with the gate and the request log, deploy/'s CRD and namespace
start_ksim () {
	run_ksim "$1/kc" "$1/ksim.log" --port 0 --pod-start-delay 0 --lb-delay 0 --history 100000 \
		--feature-gates ShardedListAndWatch=true -v --log-format json || { log "ksim did not start"; exit 111; }
	KUBECONFIG=$1/kc
	export KUBECONFIG
	if ! kapply -f "$root/deploy/crd.yaml" -f "$root/deploy/namespace.yaml" >"$1/setup.out" 2>&1 ||
	   grep -q '"ok":false' "$1/setup.out"; then
		log "unable to install deploy/'s CRD and namespace:"; cat "$1/setup.out" >&2; exit 111
	fi
	curl -sS -f -X POST -d '{"reset":true}' "$url/ksim/stats" >/dev/null
}
# create N: N IoTServices bench-1-iot .. bench-N-iot at once; prints the ms it took. (Not bench-N:
# FNV-1a mixes a character into the top bits, which pick the range, only when a few more follow it,
# so names that differ only in their last digits fall into a few ranges; real names differ more.)
create () {
	jq -r --argjson n "$1" --arg url "$url" --arg o "$O" '. as $b | range(1; $n + 1) | . as $i
		| ($b | .metadata.name = "bench-\($i)-iot" | .spec.domain_name = "bench-\($i).bench.example") as $x
		| "url = \"\($url)/apis/cp.iot.sap/v1/namespaces/\($o)/iotservices\"",
		  "request = \"POST\"", "header = \"Content-Type: application/json\"",
		  "data = \($x | tojson | tojson)", "output = \"/dev/null\"", "next"' "$tmp/example.json" |
		sed '$d' >"$d/create.cfg"
	cr_t0=$(now_ms)
	curl -sS -f --no-progress-meter --parallel --parallel-max 16 -K "$d/create.cfg"
	echo $(( $(now_ms) - cr_t0 ))
}
secs_ms () { awk -v t="$1" 'BEGIN { printf "%.1f", t / 1000 }'; }

example_body "$tmp/example.json"

# converge RUN PREFIX: N IoTServices created at once; the time until all are Available, logged as
# RUN and printed as PREFIX_instances_available and PREFIX_time_to_available_s (null when not all are)
converge () {
	t0=$(now_ms)
	log "$1: creating $N IoTServices"
	create "$N" >/dev/null
	a=$(wait_available "$N" "$TIMEOUT")
	t1=$(now_ms)
	log "$1: $a of $N Available after $((t1 - t0)) ms"
	figure "$2_instances_available" "$a" count "$N"
	if test "$a" -ge "$N"; then
		figure "$2_time_to_available_s" "$(secs_ms $((t1 - t0)))" s
	else
		figure "$2_time_to_available_s" null s
	fi
}

# ---- sharded ----------------------------------------------------------------
d=$tmp/sharded
mkdir -p "$d"
i=1
while test $i -le "$REPLICAS"; do names="$names $(echo abcdefghijklmnopqrstuvwxyz | cut -c$i)"; i=$((i + 1)); done
log "sharded: ksim, $REPLICAS replicas ($names) of --shards $RANGES, $N IoTServices"
start_ksim "$d"
for r in $names; do start_replica "$r" || exit 111; done
converge sharded shards
sleep "$SETTLE"
curl -sS -f "$url/ksim/stats" >"$d/stats.json"
# who holds which instance: the shard Leases' holders, each instance's range (bench/shards-writers --keys)
curl -sS -f "$url/apis/coordination.k8s.io/v1/namespaces/$O/leases" -o "$d/leases.json"
jq -r '.items[] | select(.metadata.name | test("^iot-operator-shard-[0-9]+$"))
	| "\(.metadata.name | sub("^iot-operator-shard-"; "") | tonumber) \(.spec.holderIdentity // "")"' \
	"$d/leases.json" >"$d/holders"
i=1
while test $i -le "$N"; do echo "$O-bench-$i-iot"; i=$((i + 1)); done |
	"$writers" --keys --ranges "$RANGES" >"$d/keys"
# held_by POD: the instances whose range POD's Lease holds
held_by () {
	awk -v p="$1" 'NR == FNR { if ($2 == p) mine[$1] = 1; next } ($2 in mine) { n++ } END { print n + 0 }' \
		"$d/holders" "$d/keys"
}
pss_max=0 pss_min= wb_max=0 wb_min= held_min= held_max=0 held_sum=0 cut_max=0 cut_min= shared_max=0
for r in $names; do
	p=$(pss "$(eval echo "\$pid_$r")")
	b=$(watch_bytes "$r" "$d/stats.json")
	set -- $(watch_split "$r" "$d/stats.json")
	h=$(held_by "$r")
	log "replica $r: PSS $p kB, kwatch received $b bytes, holds $h instances by its Leases, its ireconcile $(primaries "$r" || :)"
	log "replica $r: kwatch's bytes: $1 of kinds cut by the shard selector, $2 of IoTServices and Namespaces, $3 of discovery"
	log "replica $r: by resource: $(by_resource "$r" "$d/stats.json")"
	test "$1" -gt "$cut_max" && cut_max=$1
	test -z "$cut_min" || test "$1" -lt "$cut_min" && cut_min=$1
	test "$2" -gt "$shared_max" && shared_max=$2
	test "$p" -gt "$pss_max" && pss_max=$p
	test -z "$pss_min" || test "$p" -lt "$pss_min" && pss_min=$p
	test "$b" -gt "$wb_max" && wb_max=$b
	test -z "$wb_min" || test "$b" -lt "$wb_min" && wb_min=$b
	held_sum=$((held_sum + h))
	test "$h" -gt "$held_max" && held_max=$h
	test -z "$held_min" || test "$h" -lt "$held_min" && held_min=$h
done
figure shards_replica_pss_kb_max "$pss_max" KB
figure shards_replica_pss_kb_min "$pss_min" KB
figure shards_watch_bytes_replica_max "$wb_max" bytes
figure shards_watch_bytes_replica_min "$wb_min" bytes
figure shards_watch_bytes_sharded_replica_max "$cut_max" bytes
figure shards_watch_bytes_sharded_replica_min "$cut_min" bytes
figure shards_watch_bytes_shared_replica_max "$shared_max" bytes
figure shards_instances_held_max "$held_max" count "about $((N / REPLICAS))"
figure shards_instances_held_min "$held_min" count "about $((N / REPLICAS))"
figure shards_instances_held_total "$held_sum" count "$N"

# ---- takeover: kill -9 of replica a -----------------------------------------
curl -sS -f "$url/apis/coordination.k8s.io/v1/namespaces/$O/leases" -o "$d/leases.json"
jq -r '.items[] | select(.metadata.name | test("^iot-operator-shard-[0-9]+$")) | select(.spec.holderIdentity == "a")
	| .metadata.name | sub("^iot-operator-shard-"; "") | tonumber' "$d/leases.json" >"$d/a.ranges"
awk 'NR == FNR { held[$1] = 1; next } ($2 in held) { sub("^'"$O"'-", "", $1); print $1 }' "$d/a.ranges" "$d/keys" >"$d/victims"
nv=$(wc -l <"$d/victims" | tr -d ' ')
log "takeover: a holds ranges $(tr '\n' ' ' <"$d/a.ranges")($nv instances); kill -9"
figure shards_takeover_instances "$nv" count
img="iot-service-dev.docker.repositories.sap.ondemand.com/cockpit:4.33.0-takeover"
jq -R -r --arg url "$url" --arg o "$O" --arg img "$img" '
	"url = \"\($url)/apis/cp.iot.sap/v1/namespaces/\($o)/iotservices/\(.)\"",
	"request = \"PATCH\"", "header = \"Content-Type: application/merge-patch+json\"",
	"data = \({spec: {cockpit: {image: $img}}} | tojson | tojson)", "output = \"/dev/null\"", "next"' "$d/victims" |
	sed '$d' >"$d/edit.cfg"
log_off=$(wc -c <"$d/ksim.log")
t_kill=$(now_ms)
kill -KILL "$pid_a"
pids=$(echo "$pids" | tr ' ' '\n' | grep -vx "$pid_a" | tr '\n' ' ')
test "$nv" -gt 0 && curl -sS -f --no-progress-meter --parallel --parallel-max 16 -K "$d/edit.cfg"
# taken () -> the victims written for by another replica since the kill, "NAME MS" (ms after the kill)
taken () {
	tail -c +"$((log_off + 1))" "$d/ksim.log" |
	jq -R -r --arg o "$O" --argjson k "$t_kill" 'fromjson? | select(type == "object" and .msg == "request"
			and (.method | IN("POST", "PUT", "PATCH", "DELETE"))
			and ((.userAgent // "") | (capture("\\((?<p>[^()]+)\\)$").p // "a") != "a"))
		| ((.time | (.[0:19] + "Z" | fromdate) + ("0" + .[19:-1] | tonumber)) * 1000 - $k) as $ms
		| select($ms >= 0)
		| (.path | capture("/namespaces/\($o)-(?<x>[^/]+)(/|$)").x //
		   capture("/namespaces/\($o)/iotservices/(?<x>[^/]+)").x // empty) as $x
		| "\($x) \($ms | floor)"' |
	awk 'NR == FNR { v[$1] = 1; next } ($1 in v) && !($1 in first) { first[$1] = $2 }
		END { for (x in first) print x, first[x] }' "$d/victims" -
}
done_at=
i=0
while :; do
	taken >"$d/taken"
	if test "$(wc -l <"$d/taken")" -ge "$nv"; then done_at=$(sort -k2,2n "$d/taken" | tail -n 1 | cut -d' ' -f2); break; fi
	i=$((i + 1))
	test $i -ge 240 && break
	sleep 0.5
done
nt=$(wc -l <"$d/taken" | tr -d ' ')
log "takeover: $nt of $nv instances written for by another replica${done_at:+, the last ${done_at} ms after the kill}"
figure shards_takeover_reconciled "$nt" count "$nv"
if test -n "$done_at"; then
	figure shards_takeover_s "$(secs_ms "$done_at")" s "< 20 (Lease duration 15 s)"
else
	figure shards_takeover_s null s "< 20 (Lease duration 15 s)"
fi
# (the edits roll out at most --max-parallel-updates, 30, at a time per replica: a while at N = 1,000)
a2=$(wait_available "$N" "$TIMEOUT")
log "takeover: $a2 of $N Available for their generation $(( $(now_ms) - t_kill )) ms after the kill"
figure shards_available_after_takeover "$a2" count "$N"
edited=$(curl -sS -f "$url/apis/apps/v1/deployments" |
	jq --arg img "$img" '[.items[] | select(.metadata.name | startswith("cockpit-"))
		| select(.spec.template.spec.containers[0].image == $img)] | length')
figure shards_takeover_edits_applied "$edited" count "$nv"

stop_replicas
"$writers" --lease "$LEASE_S" --ranges "$RANGES" --namespace "$O" "$d/ksim.log" >"$d/writers.out" 2>"$d/writers.err" ||
	{ log "shards-writers failed:"; cat "$d/writers.err" >&2; exit 111; }
head -n 20 "$d/writers.err" >&2
figure shards_double_writers "$(sed -n 's/^shards_double_writers //p' "$d/writers.out")" count 0
stop_all

# ---- single: one replica holding every range --------------------------------
d=$tmp/single
mkdir -p "$d"
log "single: ksim, one replica of --shards $RANGES, $N IoTServices"
start_ksim "$d"
start_replica a || exit 111
converge single shards_single
sleep "$SETTLE"
curl -sS -f "$url/ksim/stats" >"$d/stats.json"
p=$(pss "$pid_a")
b=$(watch_bytes a "$d/stats.json")
set -- $(watch_split a "$d/stats.json")
log "single: PSS $p kB, kwatch received $b bytes, holds $(primaries a) instances"
log "single: kwatch's bytes: $1 of kinds cut by the shard selector, $2 of IoTServices and Namespaces, $3 of discovery"
log "single: by resource: $(by_resource a "$d/stats.json")"
figure shards_single_pss_kb "$p" KB
figure shards_watch_bytes_single "$b" bytes
figure shards_watch_bytes_sharded_single "$1" bytes
figure shards_watch_bytes_shared_single "$2" bytes
