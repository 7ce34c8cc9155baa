#!/bin/sh
# kapply: applies per second against ksim with 1, 4 and 16 requests in flight,
# and peak RSS after 10,000 and 100,000 operations (it must not grow with the
# number of operations). KAPPLY_BENCH_N (default 20000) operations per rate
# run; KAPPLY_BENCH_LONG (default 100000) for the long run.
set -eu
: "${KOP_BIN:?}"
n=${KAPPLY_BENCH_N:-20000}
long=${KAPPLY_BENCH_LONG:-100000}
tmp=$(mktemp -d)
pid=
cleanup () {
	test -n "$pid" && kill "$pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
command -v /usr/bin/time >/dev/null || { echo "kapply bench: /usr/bin/time is missing" >&2; exit 100; }

"$KOP_BIN/ksim" --port 0 --kubeconfig "$tmp/kubeconfig" 2>"$tmp/ksim.log" &
pid=$!
i=0
while ! test -s "$tmp/kubeconfig"; do
	i=$((i + 1)); test $i -lt 100 || { echo "ksim did not start" >&2; exit 111; }
	sleep 0.1
done
export KUBECONFIG="$tmp/kubeconfig"
printf 'apiVersion: v1\nkind: Namespace\nmetadata: {name: bench}\n' >"$tmp/ns.yaml"
"$KOP_BIN/kapply" -f "$tmp/ns.yaml" >/dev/null

# gen COUNT: COUNT apply lines over 1,000 ConfigMaps, each one a change
gen () {
	awk -v n="$1" 'BEGIN { for (i = 1; i <= n; i++)
		printf "{\"op\":\"apply\",\"primary\":\"bench/p%d\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"c%d\",\"namespace\":\"bench\"},\"data\":{\"i\":\"%d\"}}}\n", i % 100, i % 1000, i }'
}

# run COUNT CONCURRENCY: prints "seconds rss_kb"
run () {
	gen "$1" >"$tmp/in"
	/usr/bin/time -f "%e %M" -o "$tmp/time" "$KOP_BIN/kapply" --concurrency "$2" <"$tmp/in" >"$tmp/out" 2>"$tmp/err"
	ok=$(grep -c '"ok":true' "$tmp/out")
	test "$ok" = "$1" || { echo "only $ok of $1 applies succeeded" >&2; tail -n 5 "$tmp/err" >&2; exit 111; }
	cat "$tmp/time"
}

for c in 1 4 16; do
	set -- $(run "$n" "$c")
	echo "concurrency $c: $n applies in $1 s, peak RSS $2 KB" >&2
	awk -v n="$n" -v s="$1" -v c="$c" 'BEGIN { printf "{\"bench\":\"kapply\",\"metric\":\"applies_per_s_c%d\",\"value\":%d,\"unit\":\"1/s\",\"target\":\">= 500\"}\n", c, n / (s > 0 ? s : 0.01) }'
done
set -- $(run 10000 16)
short_rss=$2
set -- $(run "$long" 16)
echo "long run: $long applies in $1 s, peak RSS $2 KB (10,000: $short_rss KB)" >&2
echo "{\"bench\":\"kapply\",\"metric\":\"peak_rss_10k_ops\",\"value\":$short_rss,\"unit\":\"KB\"}"
echo "{\"bench\":\"kapply\",\"metric\":\"peak_rss_${long}_ops\",\"value\":$2,\"unit\":\"KB\",\"target\":\"flat (= 10k figure)\"}"
