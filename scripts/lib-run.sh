# What the long runs share (bench/scale.sh, bench/memcached.sh, bench/shards.sh, scripts/chaos.sh,
# scripts/soak.sh):
# ksim, the whole operator against it, the example IoTService. Sourced with
# $root (the source tree) set; puts $KOP_BIN (default $root/bin) first on
# PATH and makes a run directory $tmp. Safe under set -eu.
#
#   run_ksim KUBECONFIG LOG ARGS...   starts ksim (ARGS added) writing its kubeconfig to KUBECONFIG and
#                                     its stderr to LOG (appended), waits for it (20 s at most); sets
#                                     ksim_pid and url; 1 when it does not come up
#   run_operator DIR                  applies deploy/'s CRD and namespace (KUBECONFIG), starts
#                                     iot-operator (no leader election, metrics on a free port) with its
#                                     stderr in DIR/operator.log, until its initial lists are in (30 s at
#                                     most); sets op_pid and mport; 1 (said on stderr) when it fails
#   start_operator DIR                run_operator without the CRD and namespace (they are there);
#                                     START_LIMIT_S (default 30) bounds the wait for its initial lists
#   stop_operator                     SIGTERM, SIGKILL after 15 s
#   op_procs                          the supervisor's pid and its stages' (and theirs), one a line
#   tree_procs PID                    PID and its descendants, one a line
#   stop_tree PID                     stops a background subshell PID and its children
#   tree_ticks PID                    utime+stime of PID and its descendants, and what each reaped
#                                     (cutime+cstime: stages that ended, ireconcile's render
#                                     worker once done), in clock ticks
#   proc_ticks PID                    "PID COMM TICKS" (utime+stime) of PID and each of its children,
#                                     sorted by PID (for join)
#   ksim_ticks                        utime+stime of ksim (its simulated controllers included)
#   secs TICKS                        TICKS in seconds, two decimals
#   agent_requests REGEX STATS        the requests of the user agents matching REGEX (jq) in a
#                                     /ksim/stats answer (file STATS): {"GET":n,…,"total":n,"writes":n}
#   status_kb PID FIELD               a kB field of /proc/PID/status (VmRSS, VmHWM)
#   tree_kb PID FILE FIELD            sets kb: the sum of a kB field of /proc/P/FILE (status VmRSS,
#                                     smaps_rollup Pss) over PID and its descendants, with shell
#                                     builtins alone (for samplers: see below)
#   avail_watch OUT N                 a watch of the IoTServices of devawsk8s from now on, in the
#                                     background (sets watch_pid); writes one line to OUT, "all" once
#                                     N are Available for their generation, "ended" if the watch ends
#                                     first or its jq fails
#   count_watch OUT N PATH FILTER     the same for any watch: "all" once N of PATH's objects pass
#                                     FILTER (jq)
#   timeout_timer OUT LIMIT_S T0_MS   in the background (sets timer_pid), "timeout" to OUT once
#                                     LIMIT_S seconds have passed since T0_MS (date +%s%3N), 1 s at least
#   example_body FILE                 the example IoTService (deploy/) as a JSON body

: "${KOP_BIN:=$root/bin}"
PATH="$KOP_BIN:$PATH"
tmp=$(mktemp -d)
ksim_pid=
op_pid=

run_ksim () {
	rk_kc=$1 rk_log=$2
	shift 2
	rm -f "$rk_kc"
	ksim --kubeconfig "$rk_kc" "$@" >/dev/null 2>>"$rk_log" &
	ksim_pid=$!
	rk_i=0
	while ! test -s "$rk_kc"; do
		rk_i=$((rk_i + 1))
		if test $rk_i -gt 400 || ! kill -0 "$ksim_pid" 2>/dev/null; then return 1; fi
		sleep 0.05
	done
	url=$(jq -r '.clusters[0].cluster.server' "$rk_kc")
}

run_operator () {
	if ! kapply -f "$root/deploy/crd.yaml" -f "$root/deploy/namespace.yaml" >"$1/setup.out" 2>&1 ||
	   grep -q '"ok":false' "$1/setup.out"; then
		echo "unable to install deploy/'s CRD and namespace:" >&2
		cat "$1/setup.out" >&2
		return 1
	fi
	start_operator "$1"
}

start_operator () {
	OPERATOR_NAME=devawsk8s iot-operator --leader-elect=false --metrics-addr 127.0.0.1:0 \
		--program "$root/pipeline/iotservice" >/dev/null 2>"$1/operator.log" </dev/null &
	op_pid=$!
	ro_i=0
	while ! grep -q 'initial lists are in' "$1/operator.log" 2>/dev/null; do
		ro_i=$((ro_i + 1))
		if test $ro_i -gt $(( ${START_LIMIT_S:-30} * 20 )) || ! kill -0 "$op_pid" 2>/dev/null; then
			echo "the operator did not start; its log ends:" >&2
			tail -n 5 "$1/operator.log" >&2
			return 1
		fi
		sleep 0.05
	done
	mport=$(sed -n 's/.*"port":\([0-9]*\).*/\1/p' "$1/operator.log" | head -n 1)
}

stop_operator () {
	test -n "${op_pid:-}" || return 0
	kill -TERM "$op_pid" 2>/dev/null || :
	so_i=0
	while kill -0 "$op_pid" 2>/dev/null && test $so_i -lt 150; do sleep 0.1; so_i=$((so_i + 1)); done
	kill -KILL "$op_pid" 2>/dev/null || :
	op_pid=
}

# stop_tree PID: a background subshell and its children (a watch's curl and jq, a timer's sleep)
stop_tree () {
	pkill -P "$1" 2>/dev/null || :
	kill "$1" 2>/dev/null || :
	wait "$1" 2>/dev/null || :
}

tree_procs () {
	echo "$1"
	for tp_c in $(cat /proc/"$1"/task/*/children 2>/dev/null); do
		tree_procs "$tp_c"	# (the list is expanded before: the call may set tp_c)
	done
}

op_procs () {
	tree_procs "$op_pid"
}

tree_ticks () {
	tt_t=0
	for tt_p in $(tree_procs "$1"); do
		# fields after the ")" of comm: state is $1, utime $12, stime $13, cutime $14, cstime $15
		# (a process that ended is counted once: by the one that reaped it, while that one is in the tree)
		tt_v=$(sed 's/.*) //' "/proc/$tt_p/stat" 2>/dev/null | awk '{ print $12 + $13 + $14 + $15 }') || tt_v=0
		tt_t=$((tt_t + ${tt_v:-0}))
	done
	echo "$tt_t"
}

proc_ticks () {
	for pt_p in $(tree_procs "$1"); do
		pt_c=$(cat "/proc/$pt_p/comm" 2>/dev/null) || continue
		pt_t=$(sed 's/.*) //' "/proc/$pt_p/stat" 2>/dev/null | awk '{ print $12 + $13 }') || continue
		echo "$pt_p $pt_c ${pt_t:-0}"
	done | sort -k1,1
}

ksim_ticks () {
	sed 's/.*) //' "/proc/$ksim_pid/stat" 2>/dev/null | awk '{ print $12 + $13 }'
}

secs () {
	awk -v t="$1" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.2f", t / hz }'
}

status_kb () {
	sed -n "s/^$2:[[:space:]]*\([0-9]*\) kB/\1/p" "/proc/$1/status" 2>/dev/null
}

# (A sampler that starts processes takes its part of the two cores from what it measures: forks
# are dear on a virtual machine. bench/scale.sh's sampler with pipelines and command substitutions,
# twice a second, and its poll of the watch's file five times a second took an eighth of the
# samples of a `perf record -a` while 1,000 IoTServices converged. Hence no process started in
# tree_kb, and a watch that says when, rather than a poll.)
tree_kb () {
	kb=0 tk_file=$2 tk_field=$3 tk_todo=$1
	while test -n "$tk_todo"; do
		tk_next=
		for tk_p in $tk_todo; do
			while read -r tk_n tk_v tk_u; do
				if test "$tk_n" = "$tk_field:"; then kb=$((kb + tk_v)); break; fi
			done 2>/dev/null <"/proc/$tk_p/$tk_file" || :
			for tk_f in /proc/"$tk_p"/task/*/children; do
				tk_k=
				read -r tk_k 2>/dev/null <"$tk_f" || :
				tk_next="$tk_next $tk_k"
			done
		done
		tk_todo=${tk_next# }
		case $tk_todo in *[0-9]*) ;; *) tk_todo= ;; esac
	done
}

# count_watch OUT N PATH FILTER: in the background (sets watch_pid), a watch of PATH from now on,
# "all" to OUT once N of its objects pass FILTER (jq, on the object; a deleted one does not),
# "ended" if the watch ends first or its jq fails
count_watch () {
	( curl -sS -N "$url$3?watch=1" 2>/dev/null |
		jq -n -r --unbuffered --argjson n "$2" "(first(foreach (inputs | select(.object.metadata.name))
			as \$e ({s: {}, c: 0};
				(\$e.type != \"DELETED\" and (\$e.object | $4)) as \$ok
				| .c += (if \$ok then 1 else 0 end) - (if .s[\$e.object.metadata.name] then 1 else 0 end)
				| .s[\$e.object.metadata.name] = \$ok;
				select(.c >= \$n))) | \"all\") // \"ended\"" || echo ended ) >"$1" &
	watch_pid=$!
}

avail_watch () {
	count_watch "$1" "$2" /apis/cp.iot.sap/v1/namespaces/devawsk8s/iotservices \
		'.status.phase == "Available" and .status.observedGeneration == .metadata.generation'
}

timeout_timer () {
	tt_left=$(($2 - ($(date +%s%3N) - $3) / 1000))
	test "$tt_left" -gt 0 || tt_left=1
	( sleep "$tt_left"; echo timeout >"$1" ) 2>/dev/null &	# (quiet when its sleep is killed)
	timer_pid=$!
}

example_body () {
	kapply --dry-run -f "$root/deploy/example-iotservice.yaml" | jq -c '.request.body' >"$1"
}

agent_requests () {
	jq -c --arg a "$1" '[.byAgent | to_entries[] | select(.key | test($a)) | .value]
		| reduce .[] as $x ({}; reduce ($x | to_entries[]) as $e (.; .[$e.key] += $e.value))
		| .total = ([.[]] | add // 0)
		| .writes = ((.POST // 0) + (.PUT // 0) + (.PATCH // 0) + (.DELETE // 0))' "$2"
}
