#!/bin/sh
# kwatch benchmark (issue 3): events per second from ksim to stdout, and
# kwatch's memory while streaming N objects (default 100,000), run by
# `make bench` (bench/run). Figures go to stdout as JSON lines, progress to
# stderr.
#
#  1. N configmaps are created in ksim (curl --parallel).
#  2. initial: `kwatch --once` lists them to stdout (a file); wall time and
#     peak RSS (VmHWM) -> initial_events_per_s, initial_peak_rss_kb.
#  3. live: `kwatch --no-initial` runs while every object is changed twice
#     (2 N MODIFIED events). RSS after the first N events and after the
#     second N must be the same: kwatch keeps per object a key and a
#     resourceVersion, nothing per event -> live_events_per_s,
#     live_rss_kb_after_n, live_rss_kb_after_2n, live_rss_growth_kb; and
#     kwatch's CPU (utime + stime) over those 2 N events, per event ->
#     live_cpu_us_per_event (a figure of kwatch alone, which the events per
#     second, bound by ksim on the same cores, are not).
set -eu
N=${BENCH_KWATCH_N:-100000}
: "${KOP_BIN:=$(cd "$(dirname "$0")/.." && pwd)/bin}"
PATH="$KOP_BIN:$PATH"
tmp=$(mktemp -d)
ksim_pid=
kw_pid=
cleanup () {
	test -n "$kw_pid" && kill "$kw_pid" 2>/dev/null
	test -n "$ksim_pid" && kill "$ksim_pid" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
log () { echo "bench kwatch: $*" >&2; }
now_ms () { date +%s%3N; }
figure () { # metric value unit [target]
	printf '{"bench":"kwatch","metric":"%s","value":%s,"unit":"%s"%s}\n' "$1" "$2" "$3" "${4:+,\"target\":\"$4\"}"
}
status_kb () { # PID FIELD
	sed -n "s/^$2:[[:space:]]*\([0-9]*\) kB/\1/p" "/proc/$1/status" 2>/dev/null
}
lines () { wc -l <"$1" | tr -d ' '; }
ticks () { sed 's/.*) //' "/proc/$1/stat" | awk '{ print $12 + $13 }'; }
wait_lines () { # FILE N LIMIT-S
	i=0
	while test "$(lines "$1")" -lt "$2"; do
		i=$((i + 1))
		if test $i -gt $(($3 * 20)); then
			log "timed out: $(lines "$1") of $2 lines in $1"
			exit 111
		fi
		sleep 0.05
	done
}
# Writes a curl config doing METHOD on N objects (body per object from $3, %d = index).
curl_config () { # METHOD SUFFIX-OF-URL CONTENT-TYPE BODY-PRINTF
	awk -v n="$N" -v url="$url" -v m="$1" -v suf="$2" -v ct="$3" -v body="$4" 'BEGIN {
		for (i = 1; i <= n; i++) {
			printf "url = \"%s/api/v1/namespaces/bench/configmaps%s\"\n", url, sprintf(suf, i)
			printf "request = \"%s\"\nheader = \"Content-Type: %s\"\n", m, ct
			b = sprintf(body, i, i); gsub(/"/, "\\\"", b)
			printf "data = \"%s\"\noutput = \"/dev/null\"\n", b
			if (i < n) print "next"
		}
	}' >"$tmp/curl.cfg"
}
run_curl () {
	curl -sS -f --no-progress-meter --parallel --parallel-max 16 -K "$tmp/curl.cfg"
}

ksim --port 0 --kubeconfig "$tmp/kc" --history 1000 >/dev/null 2>"$tmp/ksim.log" &
ksim_pid=$!
i=0
while ! test -s "$tmp/kc"; do
	i=$((i + 1)); test $i -lt 200 || { log "ksim did not start"; exit 111; }
	sleep 0.05
done
url=$(sed -n 's/.*"server": *"\([^"]*\)".*/\1/p' "$tmp/kc")
KUBECONFIG=$tmp/kc
export KUBECONFIG
curl -sS -f -X POST -H 'Content-Type: application/json' -d '{"metadata":{"name":"bench"}}' \
	"$url/api/v1/namespaces" >/dev/null

log "creating $N configmaps"
t0=$(now_ms)
curl_config POST "" application/json '{"metadata":{"name":"cm-%d","labels":{"app":"bench"}},"data":{"k":"v%d"}}'
run_curl
log "created in $(($(now_ms) - t0)) ms"

log "initial state: kwatch --once"
t0=$(now_ms)
kwatch --once -n bench configmaps >"$tmp/initial.jsonl" 2>"$tmp/kwatch1.err" &
kw_pid=$!
hwm=0
while kill -0 "$kw_pid" 2>/dev/null; do
	v=$(status_kb "$kw_pid" VmHWM)
	test -n "$v" && test "$v" -gt "$hwm" && hwm=$v
	sleep 0.02
done
wait "$kw_pid" || { log "kwatch --once failed"; cat "$tmp/kwatch1.err" >&2; exit 111; }
kw_pid=
t1=$(now_ms)
# (ksim, as kube-controller-manager does, puts kube-root-ca.crt in every namespace)
got=$(grep -c '"name":"cm-' "$tmp/initial.jsonl")
test "$got" = "$N" || { log "kwatch --once wrote $got of the $N configmaps"; exit 111; }
figure initial_events_per_s $((N * 1000 / (t1 - t0 + 1))) 1/s ">= 10000"
figure initial_peak_rss_kb "$hwm" kB

log "live: kwatch while every object changes twice"
kwatch --no-initial -n bench configmaps >"$tmp/live.jsonl" 2>"$tmp/kwatch2.err" &
kw_pid=$!
wait_lines "$tmp/live.jsonl" 1 60
rss0=$(status_kb "$kw_pid" VmRSS)
ticks0=$(ticks "$kw_pid")
curl_config PATCH "/cm-%d" application/merge-patch+json '{"data":{"k":"w%d"}}'
t0=$(now_ms)
run_curl
wait_lines "$tmp/live.jsonl" $((N + 1)) 600
t1=$(now_ms)
rss1=$(status_kb "$kw_pid" VmRSS)
curl_config PATCH "/cm-%d" application/merge-patch+json '{"data":{"k":"x%d"}}'
run_curl
wait_lines "$tmp/live.jsonl" $((2 * N + 1)) 600
rss2=$(status_kb "$kw_pid" VmRSS)
hwm=$(status_kb "$kw_pid" VmHWM)
ticks2=$(ticks "$kw_pid")
log "rss: at the bookmark ${rss0} kB, after $N events ${rss1} kB, after $((2 * N)) ${rss2} kB"
figure live_events_per_s $((N * 1000 / (t1 - t0 + 1))) 1/s
figure live_rss_kb_after_n "$rss1" kB
figure live_rss_kb_after_2n "$rss2" kB
figure live_rss_growth_kb $((rss2 - rss1)) kB "~0 (no growth with events)"
figure live_peak_rss_kb "$hwm" kB
figure live_cpu_us_per_event "$(awk -v t=$((ticks2 - ticks0)) -v hz="$(getconf CLK_TCK)" -v n=$((2 * N)) \
	'BEGIN { printf "%.1f", t * 1e6 / hz / n }')" us
