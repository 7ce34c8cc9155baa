#!/bin/sh
test_description='end to end, sharded (--shards): replicas share the instances and each sees only its
share, none written for by two replicas at once; a replica killed (-9), its instances reconciled by the
others within a Lease duration and 5 s (10 s in the sanitizer build); scale 3 -> 5 -> 2 while instances are created, edited and
deleted, the same checks at every step (ranges gained and dropped change the running pipelines; one
whose barrier never comes back is stopped at the renew deadline); with the server applying the shard
selector and without'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"
. "$TEST_DIRECTORY/lib-e2e.sh"

# Short lease timings (lease > renew deadline > 1.2 x retry period); 8 ranges. The sanitizer
# build's ksim answers a Lease's renewal in up to 2 s on a loaded node: twice as long there, or a
# replica would lose ranges it holds for want of a renewal in time.
R=8
LEASE_S=4 RENEW_S=3 RETRY_S=1
test -n "$KOP_SANITIZE" && LEASE_S=8 RENEW_S=6 RETRY_S=2
SHARDS="--shards $R --lease-duration ${LEASE_S}s --renew-deadline ${RENEW_S}s --retry-period ${RETRY_S}s"
# The issue's bound on a takeover is 20 s after the kill with 15 s Leases: a Lease duration and 5 s.
# Those 5 s hold a round of the replicas that take over, the kwatch they start for the ranges gained
# listing them, and the reconciles of the instances gained (two replicas at once here, on the test's
# node); the sanitizer build starts every process slower (and checks for leaks as each ends): 10 s there.
TAKEOVER_S=$((LEASE_S + 5))
test -n "$KOP_SANITIZE" && TAKEOVER_S=$((LEASE_S + 10))

# The instances are named in files, test bodies being subshells: alive (one
# name a line), gone (deleted), sizes ("NAME SIZE": the cockpit size its spec
# asks for). Instances xI-iot: FNV-1a mixes a character into the top bits, which
# pick the range, only when a few follow it: x1-iot, x2-iot ... spread.

# settle SECONDS CMD...: CMD polled every second (the checks are many: more
# often would load the node that runs the replicas) for at most SECONDS, then
# once more, which gives the verdict (and says why it fails).
settle () {
	st_end=$(($(date +%s) + $1))
	shift
	while ! "$@" >/dev/null 2>&1 && test "$(date +%s)" -lt "$st_end"; do
		sleep 1
	done
	"$@"
}

# ranges_of FILE: "NAME RANGE" for each instance named in FILE (lib/shard.c's ranges, as
# bench/shards-writers computes them)
ranges_of () {
	sed "s/^/$O-/" "$1" | "$PROJECT_ROOT/bench/shards-writers" --keys --ranges "$R" | sed "s/^$O-//"
}

# holders: holders.txt, "RANGE HOLDER" for each range by its Lease ("-": none)
holders () {
	ksim_curl -o leases.json "/apis/coordination.k8s.io/v1/namespaces/$O/leases" &&
	jq -r --argjson r "$R" '[.items[] | {key: .metadata.name, value: (.spec.holderIdentity // "")}] | from_entries as $h
		| range($r) | . as $i | ($h["iot-operator-shard-" + (if $i < 10 then "0" else "" end) + ($i | tostring)] // "")
		| "\($i) \(if . == "" then "-" else . end)"' leases.json >holders.txt &&
	test "$(wc -l <holders.txt)" = "$R"
}

# scrape NAME: NAME's /metrics into NAME.metrics
scrape () {
	sc_port=$(sed -n "s/.*\"port\":\([0-9]*\).*/\1/p" "$1.err" | head -n 1) &&
	test -n "$sc_port" &&
	curl -sS -m 5 -o "$1.metrics" "http://127.0.0.1:$sc_port/metrics"
}

# create I J: IoTServices xI-iot .. xJ-iot from the example
create () {
	for c_i in $(seq "$1" "$2"); do
		sed "s/^  name: example-iotservice\$/  name: x$c_i-iot/" "$PROJECT_ROOT/deploy/example-iotservice.yaml" || return 1
		echo ---
	done >create.yaml &&
	k apply -f create.yaml >create.out &&
	for c_i in $(seq "$1" "$2"); do
		echo "x$c_i-iot" >>alive &&
		echo "x$c_i-iot 1" >>sizes || return 1
	done
}

# edit NAME SIZE: its cockpit size (curl, lighter than kubectl, while replicas take over)
edit () {
	ksim_curl -f -o patch.out -X PATCH -H "Content-Type: application/merge-patch+json" \
		-d "{\"spec\":{\"cockpit\":{\"size\":$2}}}" "/apis/cp.iot.sap/v1/namespaces/$O/iotservices/$1" &&
	grep -v "^$1 " sizes >sizes.new; echo "$1 $2" >>sizes.new && mv sizes.new sizes
}

# delete NAME
delete () {
	k delete iotservice -n $O "$1" --wait=false >delete.out &&
	grep -v "^$1\$" alive >alive.new; mv alive.new alive && echo "$1" >>gone &&
	grep -v "^$1 " sizes >sizes.new; mv sizes.new sizes
}

# edits_applied [FILE]: the cockpit Deployment of every instance of FILE (alive) has the size its spec asks for
edits_applied () {
	ksim_curl -o deploys.json "/apis/apps/v1/deployments?labelSelector=component%3Dcockpit" &&
	jq -r '.items[] | "\(.metadata.name | ltrimstr("cockpit-")) \(.spec.replicas)"' deploys.json | sort >cockpits &&
	awk "NR == FNR { w[\$1]; next } \$1 in w" "${1:-alive}" sizes | sort >want.sizes &&
	test "$(wc -l <want.sizes)" = "$(wc -l <"${1:-alive}")" &&
	join want.sizes cockpits >have.sizes &&
	if ! awk '$2 != $3 { print "cockpit of " $1 ": " $3 " replicas, its spec asks for " $2; bad = 1 } END { exit bad }' have.sizes ||
	   test "$(wc -l <have.sizes)" != "$(wc -l <want.sizes)"; then
		echo "the cockpit sizes of the instances are not what their specs ask for:" &&
		join -a 1 want.sizes cockpits
		return 1
	fi
}

# all_available: every instance alive Available about its current generation, those gone gone with their namespace
all_available () {
	ksim_curl -o all.json "/apis/cp.iot.sap/v1/namespaces/$O/iotservices" &&
	ksim_curl -o nss.json "/api/v1/namespaces" &&
	jq -r '.items[] | select(.status.observedGeneration == .metadata.generation and .status.phase == "Available")
		| .metadata.name' all.json | sort >available &&
	sort alive >alive.sorted &&
	if ! test_cmp alive.sorted available >available.diff; then
		echo "not every instance Available about its generation (- alive, + Available):" && cat available.diff
		return 1
	fi &&
	if test -s gone; then
		jq -r '.items[].metadata.name' all.json >names &&
		jq -r '.items[].metadata.name' nss.json >>names &&
		sed "p; s/^/$O-/" gone | grep -F -x -f - names >still && {
			echo "deleted, still there:" && cat still
			return 1
		}
	fi
	return 0
}

# steady REPLICA...: the state of a step once settled. The replicas (and no
# other) hold the ranges, each its share, as their Leases say and their /metrics
# (ranges held, members seen, iot_operator_shard_range_held{range} per range);
# each ireconcile holds exactly the instances of its ranges, together all; each
# kwatch received nothing outside its ranges (the server applies the selector:
# kwatch_shard_dropped_total 0) or did drop what it received outside them (the
# gate off); every instance Available, every edit applied, the deleted gone.
steady () {
	holders &&
	ranges_of alive >alive.ranges &&
	for sd_r in "$@"; do
		scrape "$sd_r" || return 1
	done &&
	awk -v R="$R" -v n="$#" -v gate="$gate" -v reps="$*" '
		FILENAME == "holders.txt" { holder[$1] = $2; next }
		FILENAME == "alive.ranges" { mine[holder[$2]]++; next }
		{ r = FILENAME; sub(/[.]metrics$/, "", r); m[r, $1] = $2 }
		function v(r, s) { return ((r, s) in m) ? m[r, s] : "absent" }
		function bad(msg) { print msg; failed = 1 }
		END {
			k = split(reps, rep, " ")
			for (j = 1; j <= k; j++) {
				r = rep[j]
				h = v(r, "iot_operator_shard_ranges_held")
				if (h == "absent" || h + 0 < int(R / n) || h + 0 > int((R + n - 1) / n))
					bad("replica " r " holds " h " ranges: not its share of " R " over " n " replicas")
				total += h
				if (v(r, "iot_operator_shard_members") != n)
					bad("replica " r " sees " v(r, "iot_operator_shard_members") " members, not " n)
				for (i = 0; i < R; i++) {
					s = sprintf("iot_operator_shard_range_held{range=\"%02d\"}", i)
					if (v(r, s) != (holder[i] == r ? 1 : 0))
						bad("replica " r ": " s " is " v(r, s) "; the Lease is held by " holder[i])
				}
				if (v(r, "ireconcile_primaries") != mine[r] + 0)
					bad("replica " r ": its ireconcile holds " v(r, "ireconcile_primaries") " instances, its ranges " mine[r] + 0)
				d = v(r, "kwatch_shard_dropped_total")
				if (gate == "on" && d != 0)
					bad("replica " r ": the server applies the shard selector, yet its kwatch dropped " d " objects outside it")
				if (gate == "off" && (d == "absent" || !(d + 0 > 0)))
					bad("replica " r ": the server ignores the shard selector, yet its kwatch dropped " d " objects")
			}
			if (total != R)
				bad("the replicas " reps " hold " total " ranges together, not " R)
			exit failed
		}' holders.txt alive.ranges $(printf "%s.metrics " "$@") &&
	all_available &&
	edits_applied
}

# writers: no instance written for by two replicas closer together than a
# Lease duration, but across a hand-over (this ksim's request log)
writers () {
	"$PROJECT_ROOT/bench/shards-writers" --lease "$LEASE_S" --ranges "$R" "$KSIM_LOG" >writers.out 2>writers.err ||
	{ cat writers.out writers.err; return 1; }
	cat writers.out writers.err
	test "$(sed -n "s/^shards_double_writers //p" writers.out)" = 0
}

# after MS NAME MSG: milliseconds from MS (epoch) to the first line of NAME's log
# at or after it whose msg starts with MSG ("-" when none)
after () {
	grep "\"msg\":\"$3" "$2.err" | jq -r --argjson t "$1" '(.time | (.[0:19] + "Z" | fromdate) * 1000
		+ (.[20:23] | tonumber)) - $t | select(. >= 0)' | head -n 1 | grep . || echo -
}

# what_kwatch_said NAME...: each said the server ignores the shard selector (gate off) or
# not, and that the initial events held nothing outside it (gate on)
what_kwatch_said () {
	for ks_r in "$@"; do
		if test "$gate" = on; then
			grep -q "the server sent nothing outside the shard selector of '[^']*:s=shardRange(" "$ks_r.err" &&
			! grep "the server ignores the shard selector" "$ks_r.err" || {
				echo "kwatch of $ks_r: not what a server applying the shard selector makes it say"
				return 1
			}
		else
			grep -q "the server ignores the shard selector of '[^']*:s=shardRange(.*)' (it sent objects outside it)" "$ks_r.err" || {
				echo "kwatch of $ks_r never said the server ignores the shard selector"
				return 1
			}
		fi
	done
}

run () { # GATE (on or off)
	gate=$1
	if test "$gate" = on; then
		ksim_args="--feature-gates ShardedListAndWatch=true"
	else
		ksim_args=
	fi
	# A fresh ksim (at the top level: ksim_start's variables and its EXIT trap
	# must outlive the test bodies, which run in subshells), its request log its own.
	: >alive && : >gone && : >sizes
	KSIM_LOG="$TRASH/ksim-$gate.log"
	e2e_ksim_start -v $ksim_args

	test_expect_success "gate $gate: setup: deploy-sharded/, replicas a, b and c, 12 instances, all Available" '
		e2e_install &&
		k apply -k "$PROJECT_ROOT/deploy-sharded" >>install.out &&
		for r in a b c; do
			e2e_operator_start $r $SHARDS || return 1
		done &&
		create 1 12 &&
		settle 60 steady a b c
	'

	test_expect_success "gate $gate: the Leases name the ranges of each replica; kwatch says what it knows of the server's sharding" '
		k get leases -n $O >leases.out &&
		for i in $(seq 0 $((R - 1))); do
			grep -E "^iot-operator-shard-0$i +[abc] " leases.out || return 1
		done &&
		for r in a b c; do
			grep -E "^iot-operator-member-$r +$r " leases.out || return 1
		done &&
		what_kwatch_said a b c &&
		writers
	'

	test_expect_success "gate $gate: a killed (-9): its instances, edited meanwhile, reconciled by b and c within a Lease duration and $((TAKEOVER_S - LEASE_S)) s" '
		holders &&
		ranges_of alive >alive.ranges &&
		awk "NR == FNR { h[\$1] = \$2; next } h[\$2] == \"a\" { print \$1 }" holders.txt alive.ranges >victims &&
		test -s victims &&
		for r in b c; do
			grep -c "\"msg\":\"pipeline started\"" $r.err >$r.starts || return 1
		done &&
		kill -KILL "$(cat a.pid)" &&
		killed=$(date +%s%3N) &&
		test_wait_for 5 test -f a.code &&
		rm -f a.pid &&
		size=2 &&
		for v in $(cat victims); do
			edit $v $size || return 1
		done &&
		awk "NR == FNR { w[\$1]; next } \$1 in w { print \"cockpit-\" \$1, \$2 }" victims sizes | sort >victims.want &&
		: two processes a poll: the replicas taking over need the CPU &&
		taken_over () {
			ksim_curl -o vdeploys.json "/apis/apps/v1/deployments?labelSelector=component%3Dcockpit" &&
			jq -r ".items[] | \"\(.metadata.name) \(.spec.replicas)\"" vdeploys.json | sort | join - victims.want |
				awk "\$2 == \$3 { n++ } END { exit n != $(wc -l <victims) }"
		} &&
		until taken_over || test $(($(date +%s%3N) - killed)) -gt $(((TAKEOVER_S + 20) * 1000)); do
			sleep 0.25
		done &&
		took=$(($(date +%s%3N) - killed)) &&
		edits_applied victims &&
		say "gate $gate: the $(wc -l <victims) instances of a reconciled, with their edits, $took ms after the kill (bound: $TAKEOVER_S s)" &&
		for r in b c; do
			say "  $r: ranges held +$(after $killed $r "ranges held") ms, added to its pipeline +$(after $killed $r "ranges gained") ms, their lists in +$(after $killed $r "the lists of the ranges gained are in") ms"
		done &&
		test "$took" -le $((TAKEOVER_S * 1000)) &&
		: the ranges gained were added to the running pipelines, not restarted for &&
		for r in b c; do
			grep -c "\"msg\":\"pipeline started\"" $r.err >$r.starts2 &&
			test_cmp $r.starts $r.starts2 &&
			grep "\"msg\":\"ranges gained: [0-9,]* added to the running pipeline" $r.err >/dev/null &&
			grep "\"msg\":\"the lists of the ranges gained are in\"" $r.err >/dev/null || return 1
		done &&
		settle 30 steady b c &&
		writers
	'

	test_expect_success "gate $gate: 3 replicas again (a2 joins) while instances are created, edited and deleted" '
		e2e_operator_start a2 $SHARDS &&
		create 13 14 &&
		edit x1-iot 3 &&
		delete x2-iot &&
		settle 60 steady a2 b c &&
		what_kwatch_said a2 &&
		writers
	'

	test_expect_success "gate $gate: scale to 5 (d and e join) while instances are created, edited and deleted" '
		for r in a2 b c; do
			grep -c "\"msg\":\"pipeline started\"" $r.err >$r.starts || return 1
		done &&
		e2e_operator_start d $SHARDS &&
		e2e_operator_start e $SHARDS &&
		create 15 16 &&
		edit x3-iot 2 &&
		edit x13-iot 2 &&
		delete x4-iot &&
		settle 60 steady a2 b c d e &&
		what_kwatch_said d e &&
		writers &&
		: the ranges the three dropped left their running pipelines, handed over once written for &&
		for r in a2 b c; do
			grep -c "\"msg\":\"pipeline started\"" $r.err >$r.starts2 &&
			test_cmp $r.starts $r.starts2 &&
			grep "\"msg\":\"ranges dropped: [0-9,]* leave the running pipeline" $r.err >/dev/null &&
			grep "\"msg\":\"ranges [0-9,]*: what was written for them is done; handing them over\"" $r.err >/dev/null &&
			grep "\"msg\":\"handed over ranges" $r.err >/dev/null &&
			: and their kwatch let them go, on from where they were &&
			grep "\"msg\":\"ranges [0-9,]*: no kwatch reads them any more\"" $r.err >/dev/null &&
			grep -E "\"msg\":\"shard ranges removed: ([1-9][0-9]* watches narrowed|[0-9]+ watches narrowed, [1-9][0-9]* stopped)" \
				$r.err >/dev/null || return 1
		done
	'

	test_expect_success "gate $gate: scale to 2 (c, d and e stopped) while instances are created, edited and deleted" '
		for r in a2 b; do
			grep -c "\"msg\":\"pipeline started\"" $r.err >$r.starts || return 1
		done &&
		e2e_operator_stop c &&
		create 17 17 &&
		edit x5-iot 3 &&
		e2e_operator_stop d &&
		edit x15-iot 3 &&
		delete x6-iot &&
		e2e_operator_stop e &&
		settle 60 steady a2 b &&
		writers &&
		: the ranges gained, some dropped before, were added to the running pipelines, not restarted for &&
		for r in a2 b; do
			grep -c "\"msg\":\"pipeline started\"" $r.err >$r.starts2 &&
			test_cmp $r.starts $r.starts2 &&
			! grep "ranges gained that the pipeline read before" $r.err || return 1
		done
	'

	test "$gate" = on &&
	test_expect_success "gate $gate: a replica whose barrier never comes back is stopped at the renew deadline, then starts again for what it keeps" '
		: a3 runs a kapply that never passes a barrier on, so ranges it drops never finish winding down;
		: by its name, the second of three, it holds 3 of the 8 ranges, and 2 once g joins &&
		mkdir -p swallow &&
		printf "%s\n" "#!/bin/sh" "grep --line-buffered -v \"^{\\\"barrier\\\"\" | exec \"\$KOP_BIN/kapply\" \"\$@\"" >swallow/kapply &&
		chmod +x swallow/kapply &&
		e2e_operator_start a3 $SHARDS --stage-dir "$TRASH/swallow" &&
		settle 60 steady a2 a3 b &&
		grep -c "\"msg\":\"pipeline started\"" a3.err >a3.starts &&
		: g joins: a3 drops a range, its barrier never comes back &&
		e2e_operator_start g $SHARDS &&
		create 18 18 &&
		settle 60 steady a2 a3 b g &&
		grep "\"msg\":\"ranges dropped: [0-9,]* leave the running pipeline" a3.err >/dev/null &&
		grep "\"msg\":\"ranges [0-9,]* no longer held: stopping the pipeline before their Leases can expire\"" a3.err >/dev/null &&
		! grep "what was written for them is done; handing them over" a3.err &&
		test $(grep -c "\"msg\":\"pipeline started\"" a3.err) -gt $(cat a3.starts) &&
		writers &&
		e2e_operator_stop a3 &&
		e2e_operator_stop g &&
		settle 60 steady a2 b
	'

	test_expect_success "gate $gate: the last two stop cleanly, every Lease released; nothing forbidden" '
		e2e_operator_stop a2 &&
		e2e_operator_stop b &&
		ksim_curl -o leases.json "/apis/coordination.k8s.io/v1/namespaces/$O/leases" &&
		jq -e "[.items[] | select(.metadata.name | startswith(\"iot-operator-shard-\") or startswith(\"iot-operator-member-\"))
			| select((.spec.holderIdentity // \"\") != \"\")] | length == 0" leases.json &&
		! grep -i forbidden a.err a2.err b.err c.err d.err e.err &&
		test_no_sanitizer_report a.err &&
		writers &&
		ksim_stop
	'

	# Whatever failed: nothing of this run left running; its files aside (a look when a test failed).
	e2e_teardown
	mkdir "gate-$gate" && mv ./*.err ./*.code ./*.metrics ./*.json alive gone sizes holders.txt "gate-$gate/" 2>/dev/null
}

# The sanitizer pass runs the gate off alone: the same C code as the gate on, but for kwatch's check
# of the echo (t1008 runs both, sanitized) and with kwatch applying the hash itself besides.
test -n "${KOP_SANITIZE:-}" || run on
run off

test_done
