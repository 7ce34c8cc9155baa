#!/bin/sh
# Secrets watched per instance namespace (issue 32), run by `make bench` (bench/run): kwatch with
# `namespaces:l=SEL secrets@~:l=SEL` (one Secret watch per namespace, what the operator runs, since it
# may not read Secrets across namespaces) against `secrets@*:l=SEL` (one watch across namespaces,
# what it ran before), over N labelled namespaces (default 1000) holding 2 Secrets each. Figures:
# the time to the initial BOOKMARK, kwatch's peak RSS (VmHWM), ksim's threads (one per connection:
# ksim speaks HTTP/1.1 only, so each watch is a connection; on a server speaking HTTP/2 libcurl
# multiplexes them over one), and how long a Secret changed by hand takes to come out of kwatch.
set -eu
N=${BENCH_NSWATCH_N:-1000}
: "${KOP_BIN:=$(cd "$(dirname "$0")/.." && pwd)/bin}"
PATH="$KOP_BIN:$PATH"
SEL=cp.iot.sap/operator=bench
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
log () { echo "bench nswatch: $*" >&2; }
now_ms () { date +%s%3N; }
figure () { # metric value unit
	printf '{"bench":"nswatch","metric":"%s","value":%s,"unit":"%s"}\n' "$1" "$2" "$3"
}
status_kb () { sed -n "s/^$2:[[:space:]]*\([0-9]*\) kB/\1/p" "/proc/$1/status" 2>/dev/null; }
wait_grep () { # FILE PATTERN LIMIT-S
	i=0
	while ! grep -q "$2" "$1" 2>/dev/null; do
		i=$((i + 1))
		test $i -le $(($3 * 50)) || { log "timed out waiting for $2 in $1"; exit 111; }
		sleep 0.02
	done
}

ksim --port 0 --kubeconfig "$tmp/kc" --no-simulate >/dev/null 2>"$tmp/ksim.log" &
ksim_pid=$!
i=0
while ! test -s "$tmp/kc"; do
	i=$((i + 1)); test $i -lt 200 || { log "ksim did not start"; exit 111; }
	sleep 0.05
done
url=$(sed -n 's/.*"server": *"\([^"]*\)".*/\1/p' "$tmp/kc")
export KUBECONFIG="$tmp/kc"

log "creating $N namespaces with 2 Secrets each"
awk -v n="$N" -v url="$url" 'BEGIN {
	for (i = 1; i <= n; i++) {
		if (i > 1) print "next"
		printf "url = \"%s/api/v1/namespaces\"\nrequest = \"POST\"\nheader = \"Content-Type: application/json\"\n", url
		printf "data = \"{\\\"metadata\\\":{\\\"name\\\":\\\"ns-%d\\\",\\\"labels\\\":{\\\"cp.iot.sap/operator\\\":\\\"bench\\\"}}}\"\noutput = \"/dev/null\"\n", i
	}
}' >"$tmp/ns.cfg"
curl -sS --no-progress-meter --parallel --parallel-max 16 -K "$tmp/ns.cfg" || true
awk -v n="$N" -v url="$url" 'BEGIN {
	for (i = 1; i <= n; i++) for (j = 1; j <= 2; j++) {
		if (i > 1 || j > 1) print "next"
		printf "url = \"%s/api/v1/namespaces/ns-%d/secrets\"\nrequest = \"POST\"\nheader = \"Content-Type: application/json\"\n", url, i
		printf "data = \"{\\\"metadata\\\":{\\\"name\\\":\\\"s-%d\\\",\\\"labels\\\":{\\\"cp.iot.sap/operator\\\":\\\"bench\\\"}},\\\"data\\\":{\\\"k\\\":\\\"dg==\\\"}}\"\noutput = \"/dev/null\"\n", j
	}
}' >"$tmp/s.cfg"
curl -sS --no-progress-meter --parallel --parallel-max 16 -K "$tmp/s.cfg" || true

run () { # NAME kwatch-args...
	name=$1
	shift
	threads0=$(sed -n 's/^Threads:[[:space:]]*//p' "/proc/$ksim_pid/status")
	: >"$tmp/$name.out"
	t0=$(now_ms)
	kwatch "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
	kw_pid=$!
	wait_grep "$tmp/$name.out" '"BOOKMARK"' 120
	t1=$(now_ms)
	figure "${name}_initial_ms" $((t1 - t0)) ms
	n=$(grep -c '"kind":"Secret"' "$tmp/$name.out")
	test "$n" -eq $((2 * N)) || { log "$name: $n Secrets, not $((2 * N))"; exit 111; }
	sleep 1
	figure "${name}_kwatch_peak_rss_kb" "$(status_kb "$kw_pid" VmHWM)" kB
	figure "${name}_kwatch_rss_kb" "$(status_kb "$kw_pid" VmRSS)" kB
	threads=$(sed -n 's/^Threads:[[:space:]]*//p' "/proc/$ksim_pid/status")
	figure "${name}_ksim_threads_added" $((threads - threads0)) threads
	# a Secret changed by hand, in the last namespace: until kwatch writes it
	t0=$(now_ms)
	curl -s -o /dev/null -X PATCH -H "Content-Type: application/merge-patch+json" \
		-d "{\"data\":{\"k\":\"$name\"}}" "$url/api/v1/namespaces/ns-$N/secrets/s-1"
	wait_grep "$tmp/$name.out" "\"MODIFIED\".*\"k\":\"$name\"" 30
	figure "${name}_hand_edit_seen_ms" $(($(now_ms) - t0)) ms
	kill "$kw_pid"
	wait "$kw_pid" 2>/dev/null || true
	kw_pid=
	sleep 1
}

run per_namespace "namespaces:l=$SEL" "secrets@~:l=$SEL"
run all_namespaces "namespaces:l=$SEL" "secrets@*:l=$SEL"
