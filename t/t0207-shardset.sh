#!/bin/sh
test_description='shard Leases (lib/shardset): replicas share R ranges evenly, never two holders at once'
. "${0%/*}/test-lib.sh"

# The simulation (t/helper/test-shardset.c) checks at every 10 ms step that
# no range is usable by two replicas, that a usable range's Lease names its
# replica, and that no range Lease passes to another holder before the last
# one's write expired unless released; it prints "violation: ..." and exits
# 1 otherwise. Defaults: 32 ranges, Lease duration 15 s, renew deadline
# 10 s, a round every 2 s (+ up to 10 % jitter): a round is 2.2 s at most.

# sim SCRIPT: runs the simulation on SCRIPT into actual (its round log in log).
sim () {
	"$KOP_TEST_TOOL" shardset-sim <"$1" >actual 2>log
}

# after WHAT N MAX: the Nth "WHAT after X ms" of actual took at most MAX ms (and MIN, when given, at least).
after () {
	af_ms=$(sed -n "s/^$1 after \([0-9]*\) ms:.*/\1/p" actual | sed -n "$2p") &&
	test -n "$af_ms" &&
	test "$af_ms" -le "$3" &&
	test "$af_ms" -ge "${4:-0}" || { echo "$1 #$2 after '$af_ms' ms, want ${4:-0} .. $3"; return 1; }
}

test_expect_success '3 replicas started together converge to 11/11/10 of 32 within 3 rounds, each range taken once' '
	cat >script <<-\EOF &&
	start r1
	start r2
	start r3
	until even 6600
	EOF
	sim script &&
	grep "^even after [0-9]* ms: r1=11 r2=11 r3=10$" actual &&
	after even 1 6600 &&
	! grep "lost=[0-9]" log &&
	! grep violation actual
'

test_expect_success 'then each round of a replica makes 2 + (ranges held) requests, and nothing moves' '
	cat >script <<-\EOF &&
	start r1
	start r2
	start r3
	until even 6600
	run 1000
	requests
	run 20000
	show
	max
	requests
	EOF
	sim script &&
	grep "^t=[0-9]* r1=11 r2=11 r3=10 free=0$" actual &&
	grep "^max=11$" actual &&
	sed -n "/^t=/,\$s/^\(r[0-9]\) rounds=\([0-9]*\) requests=\([0-9]*\)$/\1 \2 \3/p" actual >counts &&
	test $(wc -l <counts) = 3 &&
	while read name rounds requests
	do
		held=$(sed -n "s/^t=.* $name=\([0-9]*\) .*/\1/p" actual) &&
		test "$rounds" -ge 9 &&
		test "$requests" = $((rounds * (2 + held))) || { echo "$name: $rounds rounds, $requests requests"; return 1; }
	done <counts &&
	test $(grep -c "lost=[0-9]" log) = 0 &&
	! grep violation actual
'

test_expect_success 'the Leases: iot-operator-shard-00 .. -31 and one member Lease per replica, held for 15 s' '
	cat >script <<-\EOF &&
	start r1
	start r2
	start r3
	until even 6600
	leases
	EOF
	sim script &&
	grep -v after actual >leases &&
	sed -n "s/^\(iot-operator-[a-z]*-[0-9a-z]*\) holder=[a-z0-9]* duration=15$/\1/p" leases >names &&
	{
		echo iot-operator-member-r1 && echo iot-operator-member-r2 && echo iot-operator-member-r3 &&
		for i in 00 01 02 03 04 05 06 07 08 09 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31
		do
			echo iot-operator-shard-$i
		done
	} >expect &&
	test_cmp expect names &&
	test "$(grep -c "^iot-operator-shard-.. holder=r1 " leases)" = 11 &&
	test "$(grep -c "^iot-operator-shard-.. holder=r2 " leases)" = 11 &&
	test "$(grep -c "^iot-operator-shard-.. holder=r3 " leases)" = 10
'

test_expect_success 'a 4th replica gets its share within 3 rounds; nobody holds more than ceil(32/4)' '
	cat >script <<-\EOF &&
	start r1
	start r2
	start r3
	until even 6600
	run 5000
	start r4
	until even 6600
	run 30000
	show
	max
	EOF
	sim script &&
	after even 2 6600 &&
	grep "^even after [0-9]* ms: r1=8 r2=8 r3=8 r4=8$" actual &&
	grep "^t=[0-9]* r1=8 r2=8 r3=8 r4=8 free=0$" actual &&
	grep "^max=8$" actual &&
	! grep violation actual
'

test_expect_success 'a replica that shuts down: its Leases released at once, its ranges taken at the next round' '
	cat >script <<-\EOF &&
	start r1
	start r2
	start r3
	until even 6600
	run 5000
	stop r2
	leases
	until taken 2210
	until even 2210
	EOF
	sim script &&
	! grep "holder=r2 " actual &&
	grep "^iot-operator-member-r2 holder= duration=1$" actual &&
	test "$(grep -c "^iot-operator-shard-.. holder= duration=1$" actual)" = 11 &&
	after taken 1 2210 &&
	grep "^even after [0-9]* ms: r1=16 r3=16$" actual &&
	! grep violation actual
'

# A replica that dies: its ranges are taken only after the Lease duration.
# The supervisor runs a round when the Lease of another replica expires
# (shardset_next_free: a member's, so the shares change, or a range's): the
# ranges are then taken at their expiry as observed (12.8 to 17.2 s after the
# kill here); without it (expirywake 0), up to a retry period later.
test_expect_success 'a replica that dies: its ranges are taken after the Lease duration, at the expiry with a round then' '
	for wake in 0 1
	do
		cat >script <<-EOF &&
		expirywake $wake
		start r1
		start r2
		start r3
		until even 6600
		run 5000
		kill r2
		until taken 20000
		until even 2210
		requests
		run 30000
		requests
		show
		EOF
		sim script &&
		sed -n "s/^taken after \([0-9]*\) ms:.*/\1/p" actual >taken.$wake &&
		after taken 1 $((17300 + 2100 * (1 - wake))) 12800 &&
		grep "^even after [0-9]* ms: r1=16 r3=16$" actual &&
		grep "^t=[0-9]* r1=16 r3=16 free=0$" actual &&
		! grep violation actual || return 1
	done &&
	test "$(cat taken.1)" -lt "$(cat taken.0)" &&
	: and no more rounds than one a retry period once they hold their share &&
	sed -n "/^t=/q; p" actual | grep "^r1 rounds=" | tail -n 1 | grep -E "^r1 rounds=1[45] "
'

test_expect_success 'a replica restarted (same identity) takes its ranges back at its second round' '
	cat >script <<-\EOF &&
	start r1
	start r2
	start r3
	until even 6600
	run 5000
	restart r2
	until even 4420
	EOF
	sim script &&
	after even 2 4420 &&
	grep "^even after [0-9]* ms: r1=11 r2=11 r3=10$" actual &&
	sed -n "s/^t=[0-9.]* r2: .* gained=\([0-9,]*\) lost=-$/\1/p" log >gained &&
	test $(wc -l <gained) = 2 &&
	sed -n 1p gained >first &&
	sed -n 2p gained >second &&
	test_cmp first second &&
	! grep violation actual
'

test_expect_success 'a replica cut off from the API server stops using its ranges before the others take them' '
	cat >script <<-\EOF &&
	start r1
	start r2
	start r3
	until even 6600
	run 5000
	cut r3
	run 10000
	show
	until taken 20000
	heal r3
	until even 6600
	EOF
	sim script &&
	grep "^t=[0-9]* r1=11 r2=11 r3=0 free=10$" actual &&
	grep "^even after [0-9]* ms: r1=11 r2=11 r3=10$" actual &&
	grep "r3: .* held=0 gained=- lost=22,23,24,25,26,27,28,29,30,31 error: unable to get lease .iot-system/iot-operator-member-r3.: Connection refused$" log &&
	! grep violation actual
'

test_expect_success 'scale 3 -> 5 -> 2: even at each step, at most ceil(R/n) each' '
	cat >script <<-\EOF &&
	start r1
	start r2
	start r3
	until even 6600
	start r4
	start r5
	until even 6600
	run 20000
	max
	stop r1
	stop r4
	stop r5
	until even 6600
	run 20000
	max
	show
	EOF
	sim script &&
	grep "^even after [0-9]* ms: r1=11 r2=11 r3=10$" actual &&
	grep "^even after [0-9]* ms: r1=7 r2=7 r3=6 r4=6 r5=6$" actual &&
	grep "^max=7$" actual &&
	grep "^even after [0-9]* ms: r2=16 r3=16$" actual &&
	grep "^max=16$" actual &&
	grep "^t=[0-9]* r2=16 r3=16 free=0$" actual &&
	! grep violation actual
'

test_expect_success 'more replicas than ranges: one range each, the last ones idle' '
	cat >script <<-\EOF &&
	ranges 4
	start r1
	start r2
	start r3
	start r4
	start r5
	until even 6600
	kill r2
	until even 22000
	EOF
	sim script &&
	grep "^even after [0-9]* ms: r1=1 r2=1 r3=1 r4=1 r5=0$" actual &&
	grep "^even after [0-9]* ms: r1=1 r3=1 r4=1 r5=1$" actual &&
	! grep violation actual
'

test_expect_success '64 ranges over 5 replicas: 13/13/13/13/12' '
	cat >script <<-\EOF &&
	ranges 64
	start r1
	start r2
	start r3
	start r4
	start r5
	until even 6600
	leases
	EOF
	sim script &&
	grep "^even after [0-9]* ms: r1=13 r2=13 r3=13 r4=13 r5=12$" actual &&
	test $(grep -c "^iot-operator-shard-[0-6][0-9] holder=r[1-5] duration=15$" actual) = 64 &&
	grep "^iot-operator-shard-63 holder=r[1-5] " actual &&
	! grep violation actual
'

test_expect_success 'other Leases of the namespace are neither counted nor touched' '
	cat >script <<-\EOF &&
	put iot-operator-lock x
	put iot-operator-shard-32 x
	put iot-operator-shard-5 x
	put iot-operator-shard-005 x
	put other-shard-05 x
	put other-member-y y
	start r1
	start r2
	start r3
	until even 6600
	run 20000
	put iot-operator-lock x
	show
	leases
	EOF
	sim script &&
	grep "^even after [0-9]* ms: r1=11 r2=11 r3=10$" actual &&
	grep "^t=[0-9]* r1=11 r2=11 r3=10 free=0$" actual &&
	grep -vE "^iot-operator-shard-([0-2][0-9]|3[01]) |^iot-operator-member-r[123] |after|^t=" actual >others &&
	cat >expect <<-\EOF &&
	iot-operator-lock holder=x duration=15
	iot-operator-shard-005 holder=x duration=15
	iot-operator-shard-32 holder=x duration=15
	iot-operator-shard-5 holder=x duration=15
	other-member-y holder=y duration=15
	other-shard-05 holder=x duration=15
	EOF
	test_cmp expect others &&
	! grep violation actual
'

test_expect_success 'requests failing for some rounds (no answer, 500): the invariant holds, the split comes back' '
	cat >script <<-\EOF &&
	start r1
	start r2
	start r3
	until even 6600
	fail r1 0 6
	fail r2 500 6
	run 10000
	show
	fail r3 0 40
	fail r1 500 40
	run 20000
	until even 6600
	EOF
	sim script &&
	grep "r1: .* error: .*Connection refused" log &&
	grep "r2: .* error: .*500 Internal error occurred: injected" log &&
	grep "^t=[0-9]* r1=11 r2=11 r3=10 free=0$" actual &&
	grep "^even after [0-9]* ms: r1=11 r2=11 r3=10$" actual &&
	! grep violation actual
'

test_expect_success 'a flaky API server (20 % of requests lost, failed, or applied unanswered), several seeds' '
	for seed in 1 2 3 4 5 6
	do
		cat >script <<-EOF &&
		seed $seed
		flaky 20
		start r1
		start r2
		start r3
		run 40000
		start r4
		start r5
		run 40000
		stop r1
		kill r4
		run 40000
		flaky 0
		until even 22000
		EOF
		sim script &&
		grep "^even after [0-9]* ms: r2=11 r3=11 r5=10$" actual &&
		grep "error: .*Operation timed out" log &&
		! grep violation actual || return 1
	done
'

# r1 reads r3's last renewal within a round, and deletes its Lease at a round
# once that is 2 Lease durations old.
# Requests take time: a read stamped with the time its request was sent would
# make a Lease expire early (the first run of this test found such a stamp
# in lease_release's re-read after a conflict).
test_expect_success 'a slow API server (100 ms a request, 5 s without an answer, 10 % failing), several seeds' '
	for seed in 1 2 3 4 5 6 7 8
	do
		cat >script <<-EOF &&
		seed $seed
		latency 100
		timeout 5000
		flaky 10
		start r1
		start r2
		start r3
		run 60000
		start r4
		start r5
		run 60000
		stop r1
		kill r4
		run 60000
		flaky 0
		until even 30000
		EOF
		sim script &&
		grep "^even after [0-9]* ms: r2=11 r3=11 r5=10$" actual &&
		! grep violation actual || return 1
	done
'

test_expect_success 'the member Leases of replicas gone are deleted a Lease duration after they expired' '
	cat >script <<-\EOF &&
	start r1
	start r2
	start r3
	until even 6600
	stop r2
	kill r3
	run 28000
	leases
	run 6800
	leases
	EOF
	sim script &&
	sed -n "/^iot-operator-member/p" actual >members &&
	cat >expect <<-\EOF &&
	iot-operator-member-r1 holder=r1 duration=15
	iot-operator-member-r3 holder=r3 duration=15
	iot-operator-member-r1 holder=r1 duration=15
	EOF
	test_cmp expect members
'

# The supervisor keeps writing for ranges a round dropped until those writes are
# done (the wind-down, shorter than the renew deadline): no round may release
# them meanwhile, or another replica could take them while the writes go on.
test_expect_success 'ranges dropped are handed over only once their wind-down is over, not by the rounds before' '
	cat >script <<-EOF &&
	ranges 8
	retry 1000
	winddown 3500
	start a
	until even 5000
	start b
	until even 20000
	show
	EOF
	sim script &&
	grep "^t=[0-9]* a=4 b=4 free=0$" actual &&
	! grep violation actual &&
	: b joined at its second round, a dropped 4 at its next, and released them 3.5 s later &&
	after even 2 9000 3500
'

test_expect_success 'the checks catch a range held by two: another writer takes a held Lease' '
	cat >script <<-\EOF &&
	start r1
	start r2
	until even 6600
	steal r2 3
	run 100
	EOF
	test_expect_code 1 "$KOP_TEST_TOOL" shardset-sim <script >actual 2>log &&
	grep "^violation: iot-operator-shard-03 passed from r1 to r2 at t=" actual
'

test_expect_success 'bad settings are refused with the reason' '
	echo "start R1" >script &&
	test_expect_code 2 "$KOP_TEST_TOOL" shardset-sim <script 2>err &&
	grep "^invalid lease name .iot-operator-member-R1.: not a DNS-1123 subdomain" err &&
	printf "ranges 65\nstart r1\n" >script &&
	test_expect_code 2 "$KOP_TEST_TOOL" shardset-sim <script 2>err &&
	grep "^invalid number of shard ranges 65: from 1 to 64$" err &&
	printf "deadline 15000\nstart r1\n" >script &&
	test_expect_code 2 "$KOP_TEST_TOOL" shardset-sim <script 2>err &&
	grep "^invalid renew deadline 15000 ms: it must be positive and below the lease duration (15 s)$" err &&
	printf "duration 0\nstart r1\n" >script &&
	test_expect_code 2 "$KOP_TEST_TOOL" shardset-sim <script 2>err &&
	grep "^invalid lease duration 0 s: at least 1 s$" err &&
	printf "start r1\nkill r1\nrestart r1\nbogus\n" >script &&
	test_expect_code 2 "$KOP_TEST_TOOL" shardset-sim <script 2>err &&
	grep "^bad line: bogus$" err
'

# The same module on an API server: ksim's leases (list, create, update,
# delete with a resourceVersion precondition), kubectl showing who holds what.
. "$TEST_DIRECTORY/lib-ksim.sh"
if command -v ksim >/dev/null
then
	ksim_start

	test_expect_success 'on ksim: two replicas split the ranges, one shuts down, the other takes them' '
		ksim_curl -o ns.json -H "Content-Type: application/json" -X POST \
			-d "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"iot-system\"}}" \
			/api/v1/namespaces &&
		printf "a round\nb round\na round\nb round\na round\nb round\na release\nb round\n" >script &&
		"$KOP_TEST_TOOL" shardset-kube iot-system <script >actual 2>err &&
		cat >expect <<-\EOF &&
		a round: OK live=1 rank=0 target=32 held=0 gained=- lost=-
		b round: OK live=2 rank=1 target=16 held=0 gained=- lost=-
		a round: OK live=2 rank=0 target=16 held=16 gained=0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15 lost=-
		b round: OK live=2 rank=1 target=16 held=16 gained=16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31 lost=-
		a round: OK live=2 rank=0 target=16 held=16 gained=- lost=-
		b round: OK live=2 rank=1 target=16 held=16 gained=- lost=-
		a release: OK live=2 rank=0 target=16 held=0 gained=- lost=0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15
		b round: OK live=1 rank=0 target=32 held=32 gained=0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15 lost=-
		EOF
		test_cmp expect actual &&
		for k in /usr/lib/google-cloud-sdk/bin/kubectl.1.27 /usr/lib/google-cloud-sdk/bin/kubectl.1.33
		do
			test -x $k || continue
			$k get leases -n iot-system >leases 2>err &&
			grep "^iot-operator-shard-00  *b  " leases &&
			grep "^iot-operator-shard-31  *b  " leases &&
			grep "^iot-operator-member-b  *b  " leases &&
			test $(grep -c "^iot-operator-shard-[0-3][0-9]  *b  " leases) = 32 || return 1
		done &&
		ksim_curl -o list.json /apis/coordination.k8s.io/v1/namespaces/iot-system/leases &&
		test "$(jq -r ".items[] | select(.metadata.name == \"iot-operator-member-a\") | .spec.holderIdentity" list.json)" = ""
	'

	test_expect_success 'on ksim: the member Lease of a replica gone is deleted' '
		ksim_curl -o ns.json -H "Content-Type: application/json" -X POST \
			-d "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"iot-gc\"}}" \
			/api/v1/namespaces &&
		printf "c round\nd round\nc release\nd round\nsleep 3500\nd round\n" >script &&
		"$KOP_TEST_TOOL" shardset-kube --ranges 4 --duration 2 --deadline 1000 iot-gc <script >actual 2>err &&
		test $(grep -c ": OK " actual) = 5 &&
		ksim_curl -o list.json /apis/coordination.k8s.io/v1/namespaces/iot-gc/leases &&
		jq -r ".items[].metadata.name" list.json | sort >names &&
		printf "%s\n" iot-operator-member-d iot-operator-shard-00 iot-operator-shard-01 iot-operator-shard-02 \
			iot-operator-shard-03 >expect &&
		test_cmp expect names
	'

	test_expect_success 'ksim stops cleanly' '
		ksim_stop
	'
fi

test_done
