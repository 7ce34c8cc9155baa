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

test_expect_success 'gate off: stop' 'ksim_stop'

test_done
