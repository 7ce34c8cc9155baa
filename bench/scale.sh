#!/bin/sh
# Scale benchmark (issue 9): the whole operator (iot-operator and its
# stages) against ksim with instant readiness (--pod-start-delay 0
# --lb-delay 0). For each N in BENCH_SCALE_N (default "10 100 1000"), on a
# fresh ksim and a fresh operator:
#
#  converge: N IoTServices created at once (curl --parallel); time until
#    every one is Available for its current generation (seen on a watch
#    opened before, then checked by a list); API requests the
#    operator sent (ksim's GET /ksim/stats, user agents iot-operator/*) by
#    verb, per instance, writes per instance; peak RSS (VmHWM) of each
#    operator process and the peak of their sum (sampled every 0.5 s);
#    steady RSS (VmRSS after the quiet period) and PSS (smaps_rollup: pages
#    shared with other processes, the libraries, counted in shares, so the
#    sum of PSS is what the operator's processes add together); CPU seconds of the
#    supervisor and its stages (utime+stime, children reaped included), of
#    each process alone (cpu_s_converge_COMM), and ksim's own (the API
#    server and its simulated controllers).
#  quiet: after convergence, API writes and CPU over BENCH_QUIET_S seconds
#    (default 60; target zero writes).
#  restart (largest N only): the operator stopped and started again on the
#    converged cluster: time from its start until it is ready (/readyz) and
#    has reconciled every instance once (and until /readyz alone: its lists
#    in, every instance in its view), and the writes it made meanwhile and
#    in BENCH_RESTART_QUIET_S (default 5) seconds after (target zero: a
#    restart finds everything as it should be and says nothing); then the
#    PSS of its processes (the view, without what converging left in the heap).
#  latency (largest N only): BENCH_LATENCY_EDITS (default 5) spec edits of
#    one instance, one at a time: time from the PATCH of the IoTService to
#    the watch event of its cockpit Deployment carrying the new image
#    (a curl watch on that Deployment, timestamped as lines arrive).
#
# Figures go to stdout as JSON lines (bench/run), progress to stderr. An N
# that does not converge within BENCH_SCALE_TIMEOUT seconds (default 1200)
# is reported with converged=0 and the count reached; the figures are what
# was measured, nothing is extrapolated.
set -eu
NS_LIST=${BENCH_SCALE_N:-10 100 1000}
QUIET=${BENCH_QUIET_S:-60}
TIMEOUT=${BENCH_SCALE_TIMEOUT:-1200}
EDITS=${BENCH_LATENCY_EDITS:-5}
RESTART_QUIET=${BENCH_RESTART_QUIET_S:-5}
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/lib-run.sh"
sampler_pid=
watch_pid=
timer_pid=
stop_all () {
	stop_timer
	stop_watch
	test -n "$sampler_pid" && kill "$sampler_pid" 2>/dev/null || :
	stop_operator
	test -n "$ksim_pid" && kill "$ksim_pid" 2>/dev/null || :
	wait 2>/dev/null || :
	ksim_pid= op_pid= sampler_pid= watch_pid=
}
# stop_watch, stop_timer: the watch subshell (watch_pid) and its curl and jq; the convergence
# timeout's (timer_pid) and its sleep
stop_watch () { test -z "$watch_pid" || stop_tree "$watch_pid"; watch_pid=; }
stop_timer () { test -z "$timer_pid" || stop_tree "$timer_pid"; timer_pid=; }
trap 'stop_all; rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
log () { echo "bench scale: $*" >&2; }
now_ms () { date +%s%3N; }
figure () { # metric value unit [target]
	printf '{"bench":"scale","metric":"%s","value":%s,"unit":"%s"%s}\n' "$1" "$2" "$3" "${4:+,\"target\":\"$4\"}"
}
# the operator's CPU: the supervisor, its stages, and the stages that ended
cpu_ticks () { tree_ticks "$op_pid"; }
stats () { curl -sS -f "$url/ksim/stats" >"$1"; }
# operator requests from a /ksim/stats answer: {"GET":n,...,"total":n,"writes":n}
op_requests () { agent_requests '^iot-operator' "$1"; }
available () { # -> number of IoTServices Available for their current generation
	curl -sS -f "$url/apis/cp.iot.sap/v1/namespaces/devawsk8s/iotservices" -o "$tmp/list.json" &&
	jq '[.items[] | select(.status.phase == "Available" and
		.status.observedGeneration == .metadata.generation)] | length' "$tmp/list.json"
}

# The example IoTService as a JSON body, name and domain per instance.
example_body "$tmp/example.json"

run () { # N
	n=$1
	d=$tmp/n$n
	mkdir -p "$d"
	log "N=$n: starting ksim and the operator"
	run_ksim "$d/kc" "$d/ksim.log" --port 0 --pod-start-delay 0 --lb-delay 0 --history 100000 ||
		{ log "ksim did not start"; exit 111; }
	KUBECONFIG=$d/kc
	export KUBECONFIG
	run_operator "$d" || exit 111

	# Peak of the total RSS, sampled (tree_kb: no process started but sleep).
	( peak=0
	  while :; do
		tree_kb "$op_pid" status VmRSS
		if test "$kb" -gt "$peak"; then
			peak=$kb
			echo "$peak" >"$d/peak.tmp" && mv "$d/peak.tmp" "$d/peak"
		fi
		sleep 0.5
	  done ) &
	sampler_pid=$!

	jq -r --argjson n "$n" --arg url "$url" '. as $b | range(1; $n + 1) | . as $i
		| ($b | .metadata.name = "bench-\($i)" | .spec.domain_name = "bench-\($i).bench.example") as $o
		| "url = \"\($url)/apis/cp.iot.sap/v1/namespaces/devawsk8s/iotservices\"",
		  "request = \"POST\"", "header = \"Content-Type: application/json\"",
		  "data = \($o | tojson | tojson)", "output = \"/dev/null\"", "next"' "$tmp/example.json" |
		sed '$d' >"$d/create.cfg"
	# Convergence is seen on a watch of the IoTServices opened now, which says when all N are
	# Available for their generation (avail_watch, through a FIFO: nothing polled meanwhile), then
	# checked once by a list. (Polling lists instead cost the 2 cores a fifth of their time at
	# N = 1,000: 5 MB a list, served by ksim and parsed by jq.) When the watch ends first, or the
	# list disagrees, lists are polled every N/500 s (at least every 0.5 s).
	rm -f "$d/avail"
	mkfifo "$d/avail"
	exec 3<>"$d/avail"	# (read and write: opening it blocks neither the watch nor the timer)
	avail_watch "$d/avail" "$n"
	sleep 0.3	# (the watch opens)
	curl -sS -X POST -d '{"reset":true}' "$url/ksim/stats" >/dev/null
	cpu0=$(cpu_ticks) kcpu0=$(ksim_ticks)
	proc_ticks "$op_pid" >"$d/ticks0"
	log "N=$n: creating $n IoTServices"
	t0=$(now_ms)
	curl -sS -f --no-progress-meter --parallel --parallel-max 16 -K "$d/create.cfg"
	t_created=$(now_ms)
	timeout_timer "$d/avail" "$TIMEOUT" "$t0"
	converged=0 a=0 said=
	read -r said <&3 || :
	test "$said" = all || test "$said" = timeout && a=$(available || echo 0)
	if test "$a" -ge "$n"; then
		converged=1
	elif test "$said" != timeout; then
		log "N=$n: the watch said '$said'; polling lists"
		poll=$(awk -v n="$n" 'BEGIN { s = n / 500; printf "%.1f", s < 0.5 ? 0.5 : s }')
		while :; do
			a=$(available || echo 0)
			if test "$a" -ge "$n"; then converged=1; break; fi
			test $(( ($(now_ms) - t0) / 1000 )) -lt "$TIMEOUT" || break
			sleep "$poll"
		done
	fi
	test "$converged" = 1 || log "N=$n: not converged after ${TIMEOUT}s: $a of $n Available"
	t1=$(now_ms)
	stop_timer
	stop_watch
	exec 3<&-
	cpu1=$(cpu_ticks) kcpu1=$(ksim_ticks)
	proc_ticks "$op_pid" >"$d/ticks1"
	stats "$d/stats.conv"
	op_requests "$d/stats.conv" >"$d/req.conv"
	log "N=$n: $a of $n Available after $((t1 - t0)) ms; requests $(cat "$d/req.conv")"
	figure "n${n}_converged" "$converged" bool "1"
	figure "n${n}_available" "$a" count "$n"
	figure "n${n}_create_requests_ms" "$((t_created - t0))" ms
	figure "n${n}_time_to_available_s" "$(awk -v t=$((t1 - t0)) 'BEGIN { printf "%.1f", t / 1000 }')" s
	jq -c --argjson n "$n" '
		to_entries[] | select(.key != "total" and .key != "writes")
		| {bench: "scale", metric: "n\($n)_requests_\(.key)", value: .value, unit: "count"}' "$d/req.conv"
	figure "n${n}_requests_total" "$(jq .total "$d/req.conv")" count
	figure "n${n}_writes_total" "$(jq .writes "$d/req.conv")" count
	figure "n${n}_requests_per_instance" "$(jq --argjson n "$n" '.total / $n * 10 | floor / 10' "$d/req.conv")" count
	figure "n${n}_writes_per_instance" "$(jq --argjson n "$n" '.writes / $n * 10 | floor / 10' "$d/req.conv")" \
		count "<= 23"
	figure "n${n}_cpu_s_converge" "$(secs $((cpu1 - cpu0)))" s
	figure "n${n}_cpu_ms_per_instance" "$(awk -v t=$((cpu1 - cpu0)) -v hz="$(getconf CLK_TCK)" -v n="$n" \
		'BEGIN { printf "%.1f", t / hz * 1000 / n }')" ms "< 15"
	join "$d/ticks0" "$d/ticks1" | while read -r pid comm a _ b; do
		figure "n${n}_cpu_s_converge_$comm" "$(secs $((b - a)))" s
	done
	figure "n${n}_reconciles_per_instance" "$(reconciles | awk -v n="$n" '{ printf "%.1f", $1 / n }')" count
	figure "n${n}_ksim_cpu_s_converge" "$(secs $((kcpu1 - kcpu0)))" s

	# Quiet: nothing changes, nothing should be written.
	log "N=$n: quiet for ${QUIET}s"
	sleep "$QUIET"
	cpu2=$(cpu_ticks)
	stats "$d/stats.quiet"
	op_requests "$d/stats.quiet" >"$d/req.quiet"
	figure "n${n}_quiet_writes" "$(( $(jq .writes "$d/req.quiet") - $(jq .writes "$d/req.conv") ))" count "0"
	figure "n${n}_quiet_requests" "$(( $(jq .total "$d/req.quiet") - $(jq .total "$d/req.conv") ))" count
	figure "n${n}_quiet_cpu_s" "$(secs $((cpu2 - cpu1)))" s
	figure "n${n}_quiet_window_s" "$QUIET" s

	# Memory: per process (peak = VmHWM, steady = VmRSS now), and in total.
	total_hwm=0 total_rss=0 total_pss=0
	for p in $(op_procs); do
		name=$(cat "/proc/$p/comm" 2>/dev/null) || continue
		h=$(status_kb "$p" VmHWM) r=$(status_kb "$p" VmRSS)
		s=$(sed -n 's/^Pss:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$p/smaps_rollup" 2>/dev/null)
		figure "n${n}_peak_rss_kb_$name" "$h" KB
		figure "n${n}_steady_rss_kb_$name" "$r" KB
		figure "n${n}_steady_pss_kb_$name" "${s:-0}" KB
		total_hwm=$((total_hwm + h)) total_rss=$((total_rss + r)) total_pss=$((total_pss + ${s:-0}))
	done
	kill "$sampler_pid" 2>/dev/null || :
	wait "$sampler_pid" 2>/dev/null || :
	sampler_pid=
	if test "$n" -ge 1000; then tgt="< 65536 (original Go operator: 300 MiB requested)"
	elif test "$n" -le 10; then tgt="< 10240 (original Go operator: 300 MiB requested)"
	else tgt="(original Go operator: 300 MiB requested)"; fi
	figure "n${n}_peak_rss_kb_total_sampled" "$(cat "$d/peak" 2>/dev/null || echo 0)" KB "$tgt"
	figure "n${n}_sum_of_peak_rss_kb" "$total_hwm" KB "$tgt"
	figure "n${n}_steady_rss_kb_total" "$total_rss" KB "$tgt"
	if test "$n" -ge 1000; then figure "n${n}_steady_pss_kb_total" "$total_pss" KB "< 49152 (issue 31)"
	else figure "n${n}_steady_pss_kb_total" "$total_pss" KB "$tgt"; fi
	restarts=$(curl -s "http://127.0.0.1:$mport/metrics" |
		awk '/^iot_operator_stage_restarts_total/ { s += $2 } END { print s + 0 }')
	figure "n${n}_stage_restarts" "$restarts" count "0"

	if test "$n" = "$last" && test "$converged" = 1; then latency; restart; fi
	stop_all
}

# One edit at a time of bench-1's cockpit image; the watch on its cockpit
# Deployment timestamps the event that carries it.
latency () {
	I=devawsk8s-bench-1
	dep="$url/apis/apps/v1/namespaces/$I/deployments"
	D=cockpit-bench-1
	: >"$tmp/lat"
	e=1
	while test $e -le "$EDITS"; do
		img="iot-service-dev.docker.repositories.sap.ondemand.com/cockpit:4.33.0-edit$e"
		# the watch starts at the list's resourceVersion (now), as a client's
		# would: the Deployment's own one may be older than ksim's history
		# (--history) after N=1000, and such a watch only gets ERROR 410
		rv=$(curl -sS -f "$dep?fieldSelector=metadata.name%3D$D" | jq -r .metadata.resourceVersion)
		rm -f "$tmp/lat.t1"
		( curl -sS -N "$dep?watch=1&resourceVersion=$rv&fieldSelector=metadata.name%3D$D" 2>/dev/null |
			while IFS= read -r l; do
				case $l in *"$img"*) date +%s%3N >"$tmp/lat.t1"; break ;; esac
			done ) &
		watch_pid=$!
		sleep 0.3	# the watch is open
		t0=$(now_ms)
		curl -sS -f -X PATCH -H 'Content-Type: application/merge-patch+json' \
			-d "{\"spec\":{\"cockpit\":{\"image\":\"$img\"}}}" \
			"$url/apis/cp.iot.sap/v1/namespaces/devawsk8s/iotservices/bench-1" >/dev/null
		i=0
		while ! test -s "$tmp/lat.t1" && test $i -lt 600; do sleep 0.05; i=$((i + 1)); done
		if test -s "$tmp/lat.t1"; then
			echo $(( $(cat "$tmp/lat.t1") - t0 )) >>"$tmp/lat"
		else
			log "edit $e: the Deployment did not change within 30 s"
		fi
		stop_watch
		# let the rollout finish before the next edit
		i=0
		while test "$(available || echo 0)" -lt "$last" && test $i -lt 120; do sleep 0.5; i=$((i + 1)); done
		e=$((e + 1))
	done
	log "latencies (ms): $(tr '\n' ' ' <"$tmp/lat")"
	figure "n${last}_edit_latency_ms_median" "$(sort -n "$tmp/lat" | awk '{ a[NR] = $1 } END { print NR ? a[int((NR + 1) / 2)] : "null" }')" ms "< 100"
	figure "n${last}_edit_latency_ms_max" "$(sort -n "$tmp/lat" | tail -n 1 | grep . || echo null)" ms "< 100"
	figure "n${last}_edits_applied" "$(wc -l <"$tmp/lat" | tr -d ' ')" count "$EDITS"
}

# reconciles of the operator so far (its /metrics), or nothing when it does not answer
reconciles () {
	curl -sS -f -m 2 "http://127.0.0.1:$mport/metrics" 2>/dev/null |
		awk '/^controller_runtime_reconcile_total/ { s += $2 } END { print s + 0 }'
}

# The converged operator (of the largest N) stopped and started again.
restart () {
	stop_operator
	curl -sS -X POST -d '{"reset":true}' "$url/ksim/stats" >/dev/null
	log "N=$last: restarting the operator"
	t0=$(now_ms)
	if ! START_LIMIT_S=300 start_operator "$d"; then
		log "restart: the operator did not start again"
		figure "n${last}_restart_ready_s" null s "< 3"
		return 0
	fi
	i=0 t_ready=
	while :; do
		code=$(curl -s -o /dev/null -w '%{http_code}' -m 2 "http://127.0.0.1:$mport/readyz" || echo 0)
		test "$code" = 200 && test -z "$t_ready" && t_ready=$(now_ms)
		test "$code" = 200 && test "$(reconciles)" -ge "$last" && break
		i=$((i + 1))
		if test $i -ge 1200; then log "restart: not ready with every instance reconciled after 120 s"; break; fi
		sleep 0.1
	done
	t1=$(now_ms)
	sleep "$RESTART_QUIET"
	stats "$d/stats.restart"
	op_requests "$d/stats.restart" >"$d/req.restart"
	log "restart: ready in $((t1 - t0)) ms; requests $(cat "$d/req.restart")"
	figure "n${last}_restart_ready_s" "$(awk -v t=$((t1 - t0)) 'BEGIN { printf "%.2f", t / 1000 }')" s "< 3"
	# /readyz alone: the initial lists in, every instance in the view (reconciles still going on)
	if test -n "$t_ready"; then
		figure "n${last}_restart_readyz_s" "$(awk -v t=$((t_ready - t0)) 'BEGIN { printf "%.2f", t / 1000 }')" s
	fi
	figure "n${last}_restart_writes" "$(jq .writes "$d/req.restart")" count 0
	figure "n${last}_restart_requests" "$(jq .total "$d/req.restart")" count
	# what the view alone costs, beside the steady figure after convergence (which also holds
	# what the heap kept of the churn on the way)
	rs_total=0
	for p in $(op_procs); do
		s=$(sed -n 's/^Pss:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$p/smaps_rollup" 2>/dev/null)
		name=$(cat "/proc/$p/comm" 2>/dev/null) || continue
		figure "n${last}_restart_pss_kb_$name" "${s:-0}" KB
		rs_total=$((rs_total + ${s:-0}))
	done
	figure "n${last}_restart_pss_kb_total" "$rs_total" KB
}

last=
for n in $NS_LIST; do last=$n; done
for n in $NS_LIST; do run "$n"; done
