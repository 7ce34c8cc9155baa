#!/bin/sh
test_description='bench/shards-writers: instances written for by two replicas at once, from a hand-made ksim request log'
. "${0%/*}/test-lib.sh"
test_normal_pass_only 'bench/shards-writers is a shell script; lib/shard, which it is checked against, runs sanitized under t0717, t1009 and t2005'

W="$PROJECT_ROOT/bench/shards-writers"
O=devawsk8s
I=$O-bench-1

# req SECOND METHOD PATH CODE POD [NAME]: a ksim -v request line at 12:00:SECOND (POD "-": no replica)
req () {
	if test "$5" = -; then rq_ua=curl/8.5.0; else rq_ua="iot-operator/kapply ($5)"; fi
	jq -n -c --arg t "$1" --arg m "$2" --arg p "$3" --argjson c "$4" --arg ua "$rq_ua" --arg n "${6:-}" \
		'{time: "2026-11-25T12:00:\($t)Z", level: "debug", prog: "ksim", msg: "request", method: $m, path: $p,
		  code: $c, userAgent: $ua, watch: false} + (if $n == "" then {} else {name: $n} end)'
}
# lease SECOND POD RANGE [CODE]: a replica's PUT of the shard Lease of RANGE
lease () {
	req "$1" PUT "/apis/coordination.k8s.io/v1/namespaces/$O/leases/iot-operator-shard-$(printf %02d "$3")" "${4:-200}" "$2"
}
# writers [ARGS] LOG: the figure on stdout (in out), the pairs on stderr (in err); 16 ranges
writers () {
	"$W" --ranges 16 "$@" >out 2>err
}

test_expect_success 'the range of a key (--keys) is the one lib/shard.c gives, for 1, 3, 7, 16 and 64 ranges' '
	{ i=1; while test $i -le 200; do echo "$O-bench-$i"; i=$((i + 1)); done; echo; echo a; echo "$O-example-iotservice"; } >keys &&
	jq -R -c "{metadata: {namespace: .}}" keys >objects &&
	for n in 1 3 7 16 64; do
		: >ranges &&
		i=0 &&
		while test $i -lt $n; do
			"$KOP_TEST_TOOL" shard-match "$("$KOP_TEST_TOOL" shard-split namespace $i $n)" <objects >match.$i &&
			test "$(wc -l <match.$i)" = "$(wc -l <keys)" &&
			sed "s/^0\$//; s/^1\$/$i/" match.$i | paste -d " " ranges - | sed "s/^ *//; s/ *\$//" >ranges.new &&
			mv ranges.new ranges &&
			i=$((i + 1)) || return 1
		done &&
		paste -d " " keys ranges >expect &&
		"$W" --keys --ranges $n <keys >actual &&
		test_cmp expect actual || return 1
	done
'

test_expect_success 'setup: the range of the instance of 16' '
	r=$(echo "$I" | "$W" --keys --ranges 16 | sed "s/.* //") &&
	test -n "$r" &&
	echo "$r" >range &&
	other=$(( (r + 1) % 16 )) &&
	echo "$other" >other
'

test_expect_success 'a write by a second replica while the first holds the range: 1' '
	r=$(cat range) &&
	{
		lease 00.000000 a $r &&
		req 01.000000 PATCH "/apis/apps/v1/namespaces/$I/deployments/cockpit-bench-1" 200 a &&
		lease 02.000000 a $r &&
		req 03.500000 PATCH "/apis/cp.iot.sap/v1/namespaces/$O/iotservices/bench-1/status" 200 b
	} >log &&
	writers log &&
	echo "shards_double_writers 1" >expect &&
	test_cmp expect out &&
	grep "^double write: $I (range $r): a at [0-9.]*, b at [0-9.]* (PATCH /apis/cp.iot.sap/v1/namespaces/$O/iotservices/bench-1/status)\$" err &&
	test "$(wc -l <err)" = 1
'

test_expect_success 'the same with the second replica taking the range between the two writes (a hand-over): 0, the ranges known from the Leases too' '
	r=$(cat range) &&
	{
		lease 00.000000 a $r &&
		req 01.000000 PATCH "/apis/apps/v1/namespaces/$I/deployments/cockpit-bench-1" 200 a &&
		lease 02.000000 a $r &&
		lease 02.500000 b $r 409 &&
		lease 03.000000 b $r &&
		req 03.500000 PATCH "/apis/cp.iot.sap/v1/namespaces/$O/iotservices/bench-1/status" 200 b &&
		lease 05.000000 b $r &&
		lease 05.500000 c 15
	} >log &&
	writers log &&
	echo "shards_double_writers 0" >expect &&
	test_cmp expect out &&
	! test -s err &&
	"$W" log >out 2>err &&
	test_cmp expect out &&
	! test -s err
'

test_expect_success 'a range handed back within a Lease duration (b, then a, then b again): a hand-over, 0' '
	r=$(cat range) &&
	{
		lease 00.000000 b $r &&
		lease 02.000000 b $r &&
		lease 03.000000 a $r &&
		req 05.000000 DELETE "/api/v1/namespaces/$I" 200 a &&
		lease 05.100000 a $r &&
		lease 05.300000 b $r &&
		req 05.400000 PATCH "/apis/cp.iot.sap/v1/namespaces/$O/iotservices/bench-1" 200 b
	} >log &&
	writers log &&
	echo "shards_double_writers 0" >expect &&
	test_cmp expect out &&
	! test -s err
'

test_expect_success 'no hand-over when the second replica held the range before the first wrote, or took another range: 1 each' '
	r=$(cat range) o=$(cat other) &&
	{
		lease 00.000000 b $r &&
		req 01.000000 DELETE "/api/v1/namespaces/$I/secrets/s" 200 a &&
		lease 02.000000 b $r &&
		req 03.000000 POST "/api/v1/namespaces/$I/secrets" 201 b
	} >log1 &&
	writers log1 &&
	echo "shards_double_writers 1" >expect &&
	test_cmp expect out &&
	{
		lease 00.000000 a $r &&
		req 01.000000 POST /api/v1/namespaces 201 a "$I" &&
		lease 02.000000 b $o &&
		req 03.000000 POST "/api/v1/namespaces/$O/events" 201 b bench-1.187a3f &&
		lease 04.000000 b $r
	} >log2 &&
	writers log2 &&
	test_cmp expect out &&
	grep "^double write: $I .* (POST /api/v1/namespaces/$O/events)\$" err
'

test_expect_success 'writes a Lease duration apart, by the same replica, by no replica, or for no instance: 0' '
	{
		req 00.000000 PATCH "/apis/apps/v1/namespaces/$I/deployments/d" 200 a &&
		req 15.000000 PATCH "/apis/apps/v1/namespaces/$I/deployments/d" 200 b &&
		req 16.000000 PATCH "/apis/apps/v1/namespaces/$I/deployments/d" 200 b &&
		req 17.000000 PATCH "/apis/cp.iot.sap/v1/namespaces/$O/iotservices/bench-1" 200 - &&
		req 17.500000 PATCH "/apis/apps/v1/namespaces/other-ns/deployments/d" 200 a &&
		req 18.000000 PATCH "/apis/apps/v1/namespaces/other-ns/deployments/d" 200 c &&
		req 18.500000 PUT "/apis/coordination.k8s.io/v1/namespaces/$O/leases/iot-operator-member-a" 200 a &&
		req 19.000000 PUT "/apis/coordination.k8s.io/v1/namespaces/$O/leases/iot-operator-member-b" 200 b &&
		echo "{\"time\":\"2026-11-25T12:00:19.500000Z\",\"level\":\"info\",\"prog\":\"ksim\",\"msg\":\"listening\"}"
	} >log &&
	writers log &&
	echo "shards_double_writers 0" >expect &&
	test_cmp expect out &&
	! test -s err &&
	writers --lease 16 log &&
	echo "shards_double_writers 1" >expect &&
	test_cmp expect out
'

test_expect_success 'bad usage is 100, an unreadable log 111, one that is not JSON lines too' '
	echo "shards-writers: see ..." >notjson &&
	test_expect_code 111 "$W" notjson &&
	test_expect_code 100 "$W" --ranges 0 log &&
	test_expect_code 100 "$W" --ranges 65 log &&
	test_expect_code 100 "$W" --lease x log &&
	test_expect_code 100 "$W" --lease &&
	test_expect_code 100 "$W" -x log &&
	test_expect_code 100 "$W" --keys <log &&
	test_expect_code 111 "$W" no-such-log
'

test_done
