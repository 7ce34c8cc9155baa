#!/bin/sh
test_description='end to end, sharded (--shards): replicas share the instances and see only their share, none written by two replicas at once; a replica killed, its instances taken over; scale 3 -> 5 -> 2; with the server applying the shard selector and without'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"
. "$TEST_DIRECTORY/lib-e2e.sh"

# Short lease timings (lease > renew deadline > 1.2 x retry period); 8
# ranges: an instance's range is the top 3 bits of its namespace's hash.
R=8
LEASE_S=4
SHARDS="--shards $R --lease-duration ${LEASE_S}s --renew-deadline 3s --retry-period 1s"
N=12

# range X: the range of instance X (namespace O-X)
range () {
	sr_h=$("$KOP_TEST_TOOL" shard-hash "$O-$1") &&
	echo $(( 0x$(echo "$sr_h" | cut -c1) / 2 ))
}

# holder NN: who holds the Lease of range NN
holder () {
	k get lease -n $O "iot-operator-shard-0$1" -o jsonpath="{.spec.holderIdentity}"
}

# metric NAME SERIES: a series of NAME's /metrics
metric () {
	m_port=$(sed -n "s/.*\"port\":\([0-9]*\).*/\1/p" "$1.err" | head -n 1) &&
	curl -sS -m 5 -o "$1.metrics" "http://127.0.0.1:$m_port/metrics" &&
	awk -v s="$2" '$1 == s { print $2 }' "$1.metrics"
}

# every instance Available, about its current generation
all_available () {
	ksim_curl -o all.json "/apis/cp.iot.sap/v1/namespaces/$O/iotservices" &&
	jq -e --argjson n "$N" '[.items[] | select(.status.observedGeneration == .metadata.generation and
		.status.phase == "Available")] | length == $n' all.json >/dev/null
}

# create I..J: IoTServices xI-iot..xJ-iot from the example (FNV-1a mixes a character into the
# top bits, which pick the range, only when a few follow it: x1-iot, x2-iot ... spread, s1, s2 ... do not)
create () {
	for c_i in $(seq "$1" "$2"); do
		sed "s/^  name: example-iotservice\$/  name: x$c_i-iot/" "$PROJECT_ROOT/deploy/example-iotservice.yaml" || return 1
		echo ---
	done >create.yaml &&
	k apply -f create.yaml >create.out
}

# writers: no instance written by two replicas closer together than a Lease
# duration, but across a hand-over (ksim's request log)
writers () {
	"$PROJECT_ROOT/bench/shards-writers" --lease "$LEASE_S" "$KSIM_LOG" >writers.out 2>writers.err ||
	{ cat writers.out writers.err; return 1; }
	cat writers.out
	test "$(sed -n "s/^shards_double_writers //p" writers.out)" = 0
}

# held NAME: the ranges NAME holds, from its /metrics
held () {
	metric "$1" iot_operator_shard_ranges_held
}

# each replica of the arguments holds its share: R over them, and together all R
shares () {
	s_total=0
	for s_r in "$@"; do
		s_h=$(held "$s_r") && test -n "$s_h" || return 1
		test "$s_h" -ge $((R / $#)) && test "$s_h" -le $(( (R + $# - 1) / $# )) || return 1
		s_total=$((s_total + s_h))
	done
	test "$s_total" = "$R"
}

run () { # GATE (on or off)
	gate=$1
	if test "$gate" = on; then
		ksim_args="--feature-gates ShardedListAndWatch=true"
	else
		ksim_args=
	fi

	test_expect_success "gate $gate: setup: deploy-sharded/, replicas a, b and c, $N instances" '
		rm -f e2e.operators ./*.err ./*.code &&
		e2e_ksim_start -v $ksim_args &&
		e2e_install &&
		k apply -k "$PROJECT_ROOT/deploy-sharded" >>install.out &&
		for r in a b c; do
			e2e_operator_start $r $SHARDS || return 1
		done &&
		create 1 $N &&
		test_wait_for 60 all_available &&
		all_available
	'

	test_expect_success "gate $gate: each replica holds its share of the ranges, and the Leases say so" '
		test_wait_for 10 shares a b c &&
		shares a b c &&
		k get leases -n $O >leases.out &&
		for i in $(seq 0 $((R - 1))); do
			grep -E "^iot-operator-shard-0$i +[abc] " leases.out || return 1
		done &&
		grep -E "^iot-operator-member-a +a " leases.out
	'

	test_expect_success "gate $gate: each replica sees only its instances: ireconcile holds its primaries, kwatch its share" '
		total=0 &&
		for r in a b c; do
			p=$(metric $r ireconcile_primaries) && test -n "$p" &&
			mine=0 &&
			for i in $(seq 1 $N); do
				if test "$(holder "$(range x$i-iot)")" = "$r"; then
					mine=$((mine + 1))
				fi
			done &&
			say "replica $r: $p instances (its ranges hold $mine)" &&
			test "$p" = "$mine" &&
			total=$((total + p)) || return 1
		done &&
		test "$total" = "$N" &&
		if test "$gate" = on; then
			grep -q "the server applies the shard selector" a.err
		else
			grep -q "the server ignores the shard selector" a.err
		fi
	'

	test_expect_success "gate $gate: no instance written by two replicas at once" '
		writers
	'

	test_expect_success "gate $gate: a killed (-9): the others take its ranges and reconcile its instances, an edit made meanwhile applied" '
		victim= &&
		for i in $(seq 1 $N); do
			if test "$(holder "$(range x$i-iot)")" = a; then
				victim=x$i-iot
				break
			fi
		done &&
		test -n "$victim" &&
		kill -KILL "$(cat a.pid)" &&
		test_wait_for 5 test -f a.code &&
		rm -f a.pid &&
		date +%s >killed.at &&
		k patch iotservice -n $O $victim --type merge -p "{\"spec\":{\"cockpit\":{\"size\":2}}}" >patch.out &&
		cockpit_two () {
			ksim_curl -o cockpit.json "/apis/apps/v1/namespaces/$O-$victim/deployments/cockpit-$victim" &&
			jq -e ".spec.replicas == 2" cockpit.json >/dev/null
		} &&
		test_wait_for 20 cockpit_two &&
		cockpit_two &&
		say "the edit of $victim applied $(( $(date +%s) - $(cat killed.at) ))s after a was killed" &&
		test_wait_for 10 shares b c &&
		shares b c &&
		test_wait_for 30 all_available &&
		all_available &&
		writers
	'

	test_expect_success "gate $gate: scale to 5 (d, e) while instances change, then to 2 (c, d, e stopped)" '
		e2e_operator_start d $SHARDS &&
		e2e_operator_start e $SHARDS &&
		k patch iotservice -n $O x1-iot --type merge -p "{\"spec\":{\"cockpit\":{\"size\":3}}}" >patch.out &&
		N=$((N + 2)) && create $((N - 1)) $N &&
		test_wait_for 20 shares b c d e &&
		shares b c d e &&
		test_wait_for 60 all_available &&
		all_available &&
		writers &&
		for r in c d e; do
			e2e_operator_stop $r || return 1
		done &&
		k patch iotservice -n $O x2-iot --type merge -p "{\"spec\":{\"cockpit\":{\"size\":3}}}" >patch.out &&
		test_wait_for 10 shares b &&
		shares b &&
		test_wait_for 60 all_available &&
		all_available &&
		writers
	'

	test_expect_success "gate $gate: the last one stops cleanly, its Leases released; nothing forbidden" '
		e2e_operator_stop b &&
		k get leases -n $O -o json >leases.json &&
		jq -e "[.items[] | select(.metadata.name | startswith(\"iot-operator-shard-\")) |
			select(.spec.holderIdentity != \"\")] | length == 0" leases.json &&
		! grep -i forbidden a.err b.err c.err d.err e.err &&
		ksim_stop
	'
}

run on
N=12
run off

test_done
