#!/bin/sh
# The memcached operator side by side (issue 31): `iot-operator --program
# memcached` and, when BENCH_PEER names one, an operator of the user's own
# (the operator-sdk tutorial's on controller-runtime, say), one after the
# other, each on a fresh ksim with instant pods (--pod-start-delay 0). For
# each N in BENCH_MEMCACHED_N (default "300 1000"):
#
#   N Memcacheds of size 3 created at once (curl --parallel); converged when
#   every Deployment has 3 ready replicas and every status.nodes 3 names (seen
#   on two watches the benchmark opens before, then checked once by lists: a
#   poll of lists would weigh on ksim's CPU with the square of N);
#   the operator's requests and writes (ksim's /ksim/stats, by user agent:
#   iot-operator/* for ours, BENCH_PEER_AGENT, default memcached-peer, for the
#   peer), CPU (utime+stime of the operator's process tree) and ksim's, peak
#   RSS and PSS of the operator's processes (sampled every 0.5 s from /proc),
#   steady PSS after the quiet period, time to converge; then writes and
#   requests over BENCH_QUIET_S (default 10) seconds of nothing changing.
#
#   BENCH_PEER='/path/run-peer'   a command given the kubeconfig path as its
#                                 one argument; it runs the peer until killed
#
# Figures (bench/run): ours_nN_*, peer_nN_*, and with a peer nN_peer_over_ours_*
# (the peer's figure divided by ours: how many times lighter we are). The
# peer is never part of this repository: the script runs the command given.
set -eu
NS_LIST=${BENCH_MEMCACHED_N:-300 1000}
QUIET=${BENCH_QUIET_S:-10}
TIMEOUT=${BENCH_MEMCACHED_TIMEOUT:-1200}
PEER=${BENCH_PEER:-}
PEER_AGENT=${BENCH_PEER_AGENT:-memcached-peer}
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/lib-run.sh"
sampler_pid=
peer_pid=
watch_pids=
stop_all () {
	test -n "$sampler_pid" && kill "$sampler_pid" 2>/dev/null || :
	stop_watches
	stop_operator
	if test -n "$peer_pid"; then
		kill -TERM "$peer_pid" 2>/dev/null || :
		wait "$peer_pid" 2>/dev/null || :
	fi
	test -n "$ksim_pid" && kill "$ksim_pid" 2>/dev/null || :
	wait 2>/dev/null || :
	ksim_pid= op_pid= sampler_pid= peer_pid=
}
# stop_watches: each watch's subshell (count_watch) and its curl and jq; the timer and its sleep
stop_watches () {
	for w in $watch_pids; do stop_tree "$w"; done
	watch_pids=
}
trap 'stop_all; rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
log () { echo "bench memcached: $*" >&2; }
now_ms () { date +%s%3N; }
figure () { # metric value unit [target]
	printf '{"bench":"memcached","metric":"%s","value":%s,"unit":"%s"%s}\n' "$1" "$2" "$3" "${4:+,\"target\":\"$4\"}"
}
# the operator's process tree: ours (the supervisor and its stages) or the peer's
procs () { tree_procs "${op_pid:-$peer_pid}"; }
cpu_ticks () { tree_ticks "${op_pid:-$peer_pid}"; }
sum_kb () { # FILE FIELD: the sum over the tree of a kB field of /proc/PID/FILE (tree_kb)
	tree_kb "${op_pid:-$peer_pid}" "$1" "$2"
	echo "$kb"
}
converged () { # N: every Deployment 3 ready replicas, every status.nodes 3 names
	curl -sS -f "$url/apis/apps/v1/namespaces/default/deployments" -o "$tmp/deps.json" &&
	curl -sS -f "$url/apis/cache.example.com/v1alpha1/namespaces/default/memcacheds" -o "$tmp/mcs.json" &&
	test "$(jq '[.items[] | select(.spec.replicas == 3 and .status.readyReplicas == 3)] | length' "$tmp/deps.json")" -ge "$1" &&
	test "$(jq '[.items[] | select((.status.nodes // []) | length == 3)] | length' "$tmp/mcs.json")" -ge "$1"
}

run () { # WHO N
	who=$1 n=$2
	d=$tmp/$who.n$n
	mkdir -p "$d"
	log "$who, N=$n: starting ksim and the operator"
	run_ksim "$d/kc" "$d/ksim.log" --port 0 --pod-start-delay 0 --history 100000 ||
		{ log "ksim did not start"; exit 111; }
	KUBECONFIG=$d/kc
	export KUBECONFIG
	kapply -f "$root/deploy/examples/memcached/crd.yaml" >"$d/setup.out" 2>&1 && ! grep -q '"ok":false' "$d/setup.out" ||
		{ log "unable to install the Memcached CRD:"; cat "$d/setup.out" >&2; exit 111; }
	if test "$who" = ours; then
		agent='^iot-operator'
		OPERATOR_NAME=default iot-operator --leader-elect=false --metrics-addr 127.0.0.1:0 \
			--program "$root/pipeline/memcached" >/dev/null 2>"$d/operator.log" </dev/null &
		op_pid=$!
		i=0
		until grep -q 'initial lists are in' "$d/operator.log" 2>/dev/null; do
			i=$((i + 1))
			if test $i -gt 600 || ! kill -0 "$op_pid" 2>/dev/null; then
				log "the operator did not start:"; tail -n 5 "$d/operator.log" >&2; exit 111
			fi
			sleep 0.05
		done
	else
		agent="^$PEER_AGENT"
		$PEER "$d/kc" >"$d/operator.log" 2>&1 </dev/null &
		peer_pid=$!
		# ready once it watches (its informers' first WATCH), then a moment for the caches
		i=0
		until curl -sS -f "$url/ksim/stats" -o "$d/s0.json" &&
		      test "$(agent_requests "$agent" "$d/s0.json" | jq '.WATCH // 0')" -gt 0; do
			i=$((i + 1))
			if test $i -gt 600 || ! kill -0 "$peer_pid" 2>/dev/null; then
				log "the peer did not start:"; tail -n 5 "$d/operator.log" >&2; exit 111
			fi
			sleep 0.1
		done
		sleep 2
	fi
	( pk=0 rk=0
	  while :; do
		tree_kb "${op_pid:-$peer_pid}" smaps_rollup Pss; p=$kb
		tree_kb "${op_pid:-$peer_pid}" status VmRSS; r=$kb
		test "$p" -gt "$pk" && pk=$p && echo "$pk" >"$d/pss.tmp" && mv "$d/pss.tmp" "$d/peak_pss"
		test "$r" -gt "$rk" && rk=$r && echo "$rk" >"$d/rss.tmp" && mv "$d/rss.tmp" "$d/peak_rss"
		sleep 0.5
	  done ) &
	sampler_pid=$!
	i=1
	while test $i -le "$n"; do
		printf 'url = "%s/apis/cache.example.com/v1alpha1/namespaces/default/memcacheds"\nrequest = "POST"\n' "$url"
		printf 'header = "Content-Type: application/json"\noutput = "/dev/null"\n'
		printf 'data = "{\\"apiVersion\\":\\"cache.example.com/v1alpha1\\",\\"kind\\":\\"Memcached\\",'
		printf '\\"metadata\\":{\\"name\\":\\"mc-%d\\"},\\"spec\\":{\\"size\\":3}}"\n' "$i"
		test $i -lt "$n" && echo next
		i=$((i + 1))
	done >"$d/create.cfg"
	# Convergence: both watches say "all" (count_watch, through one FIFO: nothing polled meanwhile),
	# then the lists agree; when a watch ends first, or the lists disagree, they are polled.
	rm -f "$d/done"
	mkfifo "$d/done"
	exec 3<>"$d/done"	# (read and write: opening it blocks neither the watches nor the timer)
	count_watch "$d/done" "$n" /apis/apps/v1/namespaces/default/deployments \
		'.spec.replicas == 3 and .status.readyReplicas == 3'
	watch_pids=$watch_pid
	count_watch "$d/done" "$n" /apis/cache.example.com/v1alpha1/namespaces/default/memcacheds \
		'(.status.nodes // []) | length == 3'
	watch_pids="$watch_pids $watch_pid"
	sleep 0.3	# (the watches open)
	curl -sS -f -X POST -d '{"reset":true}' "$url/ksim/stats" >/dev/null
	cpu0=$(cpu_ticks) kcpu0=$(ksim_ticks)
	proc_ticks "${op_pid:-$peer_pid}" >"$d/ticks0"
	log "$who, N=$n: creating $n Memcacheds"
	t0=$(now_ms)
	curl -sS -f --no-progress-meter --parallel --parallel-max 16 -K "$d/create.cfg"
	timeout_timer "$d/done" "$TIMEOUT" "$t0"
	watch_pids="$watch_pids $timer_pid"
	ok=0 said1= said2=
	read -r said1 <&3 || :
	test "$said1" = all && { read -r said2 <&3 || :; }
	if test "$said1" = all && test "$said2" = all && converged "$n"; then
		ok=1
	elif test "$said1" != timeout && test "$said2" != timeout; then
		while :; do
			if converged "$n"; then ok=1; break; fi
			test $(( ($(now_ms) - t0) / 1000 )) -lt "$TIMEOUT" || break
			sleep 0.5
		done
	fi
	test "$ok" = 1 || log "$who, N=$n: not converged after ${TIMEOUT}s"
	t1=$(now_ms)
	stop_watches
	exec 3<&-
	cpu1=$(cpu_ticks) kcpu1=$(ksim_ticks)
	proc_ticks "${op_pid:-$peer_pid}" >"$d/ticks1"
	curl -sS -f "$url/ksim/stats" -o "$d/stats.conv"
	agent_requests "$agent" "$d/stats.conv" >"$d/req.conv"
	log "$who, N=$n: converged=$ok after $((t1 - t0)) ms; requests $(cat "$d/req.conv")"
	p="${who}_n$n"
	figure "${p}_converged" "$ok" bool 1
	figure "${p}_time_to_converge_s" "$(awk -v t=$((t1 - t0)) 'BEGIN { printf "%.1f", t / 1000 }')" s
	figure "${p}_requests_per_instance" "$(jq --argjson n "$n" '.total / $n * 100 | round / 100' "$d/req.conv")" count
	figure "${p}_writes_per_instance" "$(jq --argjson n "$n" '.writes / $n * 100 | round / 100' "$d/req.conv")" count \
		"$(test "$who" = ours && echo "<= 2.0")"
	figure "${p}_writes_total" "$(jq .writes "$d/req.conv")" count
	figure "${p}_cpu_s" "$(secs $((cpu1 - cpu0)))" s
	# and process by process (a process that was not there at both ends is left out)
	join "$d/ticks0" "$d/ticks1" | while read -r pid comm a _ b; do
		figure "${p}_cpu_s_$comm" "$(secs $((b - a)))" s
	done
	figure "${p}_ksim_cpu_s" "$(secs $((kcpu1 - kcpu0)))" s
	echo "$(secs $((cpu1 - cpu0)))" >"$tmp/$p.cpu"
	echo "$(secs $((kcpu1 - kcpu0)))" >"$tmp/$p.kcpu"
	curl -sS -f -X POST -d '{"reset":true}' "$url/ksim/stats" >/dev/null
	sleep "$QUIET"
	curl -sS -f "$url/ksim/stats" -o "$d/stats.quiet"
	agent_requests "$agent" "$d/stats.quiet" >"$d/req.quiet"
	figure "${p}_quiet_writes" "$(jq .writes "$d/req.quiet")" count 0
	figure "${p}_quiet_requests" "$(jq .total "$d/req.quiet")" count
	kill "$sampler_pid" 2>/dev/null || :
	wait "$sampler_pid" 2>/dev/null || :
	sampler_pid=
	figure "${p}_peak_rss_kb_total" "$(cat "$d/peak_rss" 2>/dev/null || echo 0)" KB
	figure "${p}_peak_pss_kb_total" "$(cat "$d/peak_pss" 2>/dev/null || echo 0)" KB
	figure "${p}_steady_pss_kb_total" "$(sum_kb smaps_rollup Pss)" KB
	# where it goes, process by process: its own memory (heap, stacks: Pss_Anon) and its share of
	# the mapped files (its binary and the libraries: Pss_File, split among the processes mapping them)
	for pid in $(procs); do
		comm=$(cat "/proc/$pid/comm" 2>/dev/null) || continue
		for f in Pss_Anon Pss_File; do
			v=$(awk -v f="$f:" '$1 == f { print $2 }' "/proc/$pid/smaps_rollup" 2>/dev/null)
			figure "${p}_steady_$(echo "$f" | tr 'A-Z' 'a-z')_kb_$comm" "${v:-0}" KB
		done
	done
	cat "$d/peak_pss" >"$tmp/$p.pss" 2>/dev/null || echo 0 >"$tmp/$p.pss"
	stop_all
}

last=
for n in $NS_LIST; do
	run ours "$n"
	if test -n "$PEER"; then
		run peer "$n"
		for f in cpu pss; do
			figure "n${n}_peer_over_ours_$f" "$(awk -v a="$(cat "$tmp/peer_n$n.$f")" -v b="$(cat "$tmp/ours_n$n.$f")" \
				'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')" ratio "$(test "$f" = cpu && echo ">= 3" || echo ">= 5")"
		done
	fi
	last=$n
done
# ksim's own growth from the smallest N to the largest (its controllers must not grow with N squared)
first=$(echo "$NS_LIST" | awk '{ print $1 }')
if test "$first" != "$last"; then
	figure "ours_ksim_cpu_growth_n${first}_to_n$last" "$(awk -v a="$(cat "$tmp/ours_n$last.kcpu")" \
		-v b="$(cat "$tmp/ours_n$first.kcpu")" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')" ratio \
		"$(test "$first:$last" = 300:1000 && echo "<= 4")"
fi
