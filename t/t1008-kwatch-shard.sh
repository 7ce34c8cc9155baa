#!/bin/sh
test_description='kwatch --shard-selector and :s=: asked of the server (KEP-5866) and applied by kwatch
when the server ignores it, the same objects either way'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"

command -v ksim >/dev/null || test_skip_all 'ksim not built'

half="shardRange(object.metadata.namespace, '0x0000000000000000', '0x8000000000000000')"

api () { # METHOD PATH BODY
	curl -sS -f -o /dev/null -X "$1" -H "Content-Type: application/json" --data-binary "$3" "$KSIM_URL$2"
}
# Namespace names whose hashes spread: FNV-1a keeps names that differ only
# in their last bytes (n1, n2...) close together in its high bits.
ns () {
	echo "n-$(echo "$1" | md5sum | cut -c1-6)"
}
made () { # FIRST LAST: the names of namespaces FIRST..LAST
	for i in $(seq "$1" "$2"); do ns "$i"; done
}
setup_objects () { # FIRST LAST
	for n in $(made "$1" "$2"); do
		api POST /api/v1/namespaces "{\"metadata\":{\"name\":\"$n\"}}" &&
		api POST /api/v1/namespaces/$n/configmaps "{\"metadata\":{\"name\":\"c\"}}" || return 1
	done
}
# the namespaces named whose FNV-1a hash is in the lower half
lower_half () {
	for n in "$@"; do
		h=$("$KOP_TEST_TOOL" shard-hash "$n") &&
		case $h in [0-7]*) echo "$n" ;; esac || return 1
	done
}
names () { # FILE: the namespaces of the ADDED ConfigMaps named c, sorted
	jq -r "select(.type == \"ADDED\" and .object.metadata.name == \"c\") | .object.metadata.namespace" "$1" | sort
}

test_expect_success 'a selector that does not parse is bad usage, named' '
	test_expect_code 100 kwatch --shard-selector "shardRange(object.metadata.name, '"'"'0x0000000000000000'"'"', '"'"'0x8000000000000000'"'"')" configmaps 2>err &&
	grep "invalid shard selector in '"'"'--shard-selector'"'"': unsupported field path" err &&
	test_expect_code 100 kwatch "configmaps:s=shardRange(" 2>err &&
	grep "invalid shard selector in '"'"'configmaps:s=shardRange('"'"': CEL parse error" err
'

ksim_start --no-simulate --feature-gates ShardedListAndWatch=true || exit 1

quarter="shardRange(object.metadata.namespace, '0x0000000000000000', '0x4000000000000000')"
# the namespaces named whose hash is in [0x4..., 0x8...)
second_quarter () {
	for n in "$@"; do
		h=$("$KOP_TEST_TOOL" shard-hash "$n") &&
		case $h in [4-7]*) echo "$n" ;; esac || return 1
	done
}
# shard_control GATE: kwatch told to drop ranges goes on with the rest, from where it was
shard_control () {
	mkfifo ctl &&
	{ timeout 120 kwatch -A --log-level debug --shard-control 5 "configmaps:s=$half" "secrets@~:s=$half" \
		namespaces >ctl.out 2>ctl.err 5<>ctl & echo $! >ctl.pid; } &&
	test_when_finished "kill $(cat ctl.pid) 2>/dev/null; :" &&
	test_wait_for 20 grep -q initial-events-end ctl.out &&
	names ctl.out >before &&
	lower_half $(made 0 19) | sort >expect &&
	test_cmp expect before &&
	echo "$quarter" >ctl &&
	test_wait_for 20 grep -q kwatch/shards-removed ctl.out &&
	test "$(jq -r "select(.type == \"BOOKMARK\") | .object.metadata.annotations[\"kwatch/shards-removed\"] // empty" ctl.out)" = "$quarter" &&
	grep "\"msg\":\"shard ranges removed: 1 watches narrowed, [0-9]* stopped\"" ctl.err &&
	: the configmaps watch goes on from its resourceVersion with the narrower selector, no list &&
	sed -n "/shard ranges removed/,\$p" ctl.err | jq -r "select(.msg | startswith(\"GET \")) | .msg" >gets &&
	grep "^GET /api/v1/configmaps?.*watch=" gets >cm.gets &&
	test $(wc -l <cm.gets) = 1 &&
	grep "resourceVersion=[0-9]" cm.gets && grep "0x4000000000000000" cm.gets && ! grep "0x0000000000000000" cm.gets &&
	for n in $(made 0 19); do
		api POST /api/v1/namespaces/$n/configmaps "{\"metadata\":{\"name\":\"after\"}}" &&
		api POST /api/v1/namespaces/$n/secrets "{\"metadata\":{\"name\":\"after\"}}" || return 1
	done &&
	second_quarter $(made 0 19) | sort >expect &&
	test $(wc -l <expect) -gt 0 &&
	last=$(tail -n 1 expect) &&
	test_wait_for 20 sh -c "grep \"\\\"name\\\":\\\"after\\\",\\\"namespace\\\":\\\"$last\\\"\" ctl.out | grep -q Secret" &&
	sed -n "/kwatch\\/shards-removed/,\$p" ctl.out >after.out &&
	jq -r "select(.type != \"BOOKMARK\" and .object.kind != \"Namespace\") | .object.metadata.namespace" after.out | sort -u >actual &&
	test_cmp expect actual &&
	jq -r "select(.object.kind == \"Secret\" and .object.metadata.name == \"after\") | .object.metadata.namespace" after.out | sort >actual &&
	test_cmp expect actual &&
	: a per-namespace watch of a namespace that left is stopped, with no DELETED said &&
	! jq -e "select(.type == \"DELETED\")" after.out &&
	kill $(cat ctl.pid) && rm -f ctl
}

test_expect_success 'gate on: the server filters, kwatch says so' '
	setup_objects 0 9 &&
	lower_half $(made 0 9) | sort >expect &&
	test $(wc -l <expect) -gt 0 && test $(wc -l <expect) -lt 10 &&
	kwatch --once --watch-list never -A --log-level debug --shard-selector "$half" configmaps >out 2>err &&
	names out >actual &&
	test_cmp expect actual &&
	grep "\"msg\":\"the server applies the shard selector of '"'"'configmaps'"'"' (metadata.shardInfo)\"" err &&
	jq -e "select(.msg | startswith(\"the server applies\")) | .level == \"info\" and .serverSharding == true" err &&
	KOP_STATS_FD=5 kwatch --once --watch-list always -A "configmaps:s=$half" >out 2>err 5>stats &&
	names out >actual &&
	test_cmp expect actual &&
	: a streaming list says no more than that nothing outside came &&
	grep "the server sent nothing outside the shard selector of '"'"'configmaps:s=shardRange(.*)'"'"' in its initial events" err &&
	! grep "the server ignores" err &&
	tail -n 1 stats | jq -e "[.metrics[] | select(.name == \"kwatch_shard_dropped_total\") | .value] == [0]"
'

test_expect_success 'gate on: --shard-control narrows the sharded watches where they were' '
	setup_objects 10 19 &&
	shard_control
'

test_expect_success 'gate on: stop' 'ksim_stop'

ksim_start --no-simulate || exit 1

test_expect_success 'gate off: kwatch filters what the server sends, and says so' '
	setup_objects 0 9 &&
	lower_half $(made 0 9) | sort >expect &&
	test $(wc -l <expect) -gt 0 && test $(wc -l <expect) -lt 10 &&
	kwatch --once --watch-list never -A --shard-selector "$half" configmaps >out 2>err &&
	names out >actual &&
	test_cmp expect actual &&
	grep "\"msg\":\"the server ignores the shard selector of '"'"'configmaps'"'"' (no metadata.shardInfo): kwatch applies it\"" err &&
	KOP_STATS_FD=5 kwatch --once -A "configmaps:s=$half" >out 2>err 5>stats &&
	names out >actual &&
	test_cmp expect actual &&
	: a streaming list: the objects outside the selector say it, and are counted &&
	grep "\"msg\":\"the server ignores the shard selector of '"'"'configmaps:s=shardRange(.*)'"'"' (it sent objects outside it): kwatch applies it\"" err &&
	! grep "the server sent nothing outside" err &&
	outside=$(($(made 0 9 | wc -l) - $(wc -l <expect))) &&
	tail -n 1 stats | jq -e --argjson n "$outside" "[.metrics[] | select(.name == \"kwatch_shard_dropped_total\") | .value] | length == 1 and .[0] >= \$n"
'

test_expect_success 'gate off: live events outside the ranges are dropped, those inside pass' '
	{ timeout 60 kwatch -A --shard-selector "$half" configmaps >live 2>live.err & echo $! >live.pid; } &&
	test_when_finished "kill $(cat live.pid) 2>/dev/null; :" &&
	test_wait_for 20 grep -q BOOKMARK live &&
	setup_objects 10 19 &&
	first=$(lower_half $(made 0 9) | head -n 1) &&
	api POST /api/v1/namespaces/$first/configmaps "{\"metadata\":{\"name\":\"end\"}}" &&
	test_wait_for 20 grep -q "\"name\":\"end\"" live &&
	lower_half $(made 0 19) | sort >expect &&
	names live >actual &&
	test_cmp expect actual &&
	test $(wc -l <expect) -lt 20
'

test_expect_success 'gate off: --shard-control narrows the sharded watches where they were' '
	shard_control
'

test_expect_success 'gate off: stop' 'ksim_stop'

test_done
