#!/bin/sh
test_description='kwatch against a canned loopback server: paged fallback, --once, --project, --record,
managedFields, resume without duplicates, 403, closed stdout, SIGTERM'
. "${0%/*}/test-lib.sh"

# JSON lines compared key-order-blind but byte-exact otherwise (resourceVersions included).
cmp_lines () {
	jq -S -c . <"$1" >expect.sorted && jq -S -c . <"$2" >actual.sorted && test_cmp expect.sorted actual.sorted
}

test_expect_success 'start the canned server' '
	for f in api api-v1 apis apis-apps-v1; do
		cp "$TEST_DATA/recordings/discovery/$f.json" . || return 1
	done &&
	cp "$FIXTURES"/routes.jsonl "$FIXTURES"/list.json "$FIXTURES"/watch.jsonl \
		"$FIXTURES"/pods-stream.jsonl "$FIXTURES"/empty.jsonl "$FIXTURES"/cut-list.json . &&
	{ timeout 300 "$KOP_TEST_TOOL" canned-server routes.jsonl . >server.log 2>&1 & echo $! >server.pid; } &&
	test_wait_for 10 test -s port &&
	cat >kubeconfig <<-EOC &&
	apiVersion: v1
	kind: Config
	clusters:
	- name: c
	  cluster: {server: "http://127.0.0.1:$(cat port)"}
	users:
	- name: u
	  user: {token: t0k3n}
	contexts:
	- name: x
	  context: {cluster: c, user: u, namespace: kw}
	current-context: x
	EOC
	echo "KUBECONFIG=$PWD/kubeconfig" >env
'
. ./env 2>/dev/null
export KUBECONFIG

test_expect_success '--once: a refused streaming list falls back to LIST; state, then the bookmark' '
	: >requests &&
	timeout 20 kwatch --once configmaps >out 2>err &&
	cmp_lines "$FIXTURES/once.expect" out &&
	grep "^GET /api/v1/namespaces/kw/configmaps?" requests >req &&
	sed -n 1p req | grep "sendInitialEvents=true" &&
	sed -n 1p req | grep "resourceVersionMatch=NotOlderThan" &&
	sed -n 1p req | grep "allowWatchBookmarks=true" &&
	sed -n 2p req | grep "limit=500" &&
	test $(wc -l <req) = 2 &&
	jq -r "[.level, .msg] | @tsv" err >msgs &&
	grep "^info	streaming list of .configmaps. refused (422: sendInitialEvents is forbidden" msgs &&
	test $(grep -c "sendInitialEvents is forbidden" msgs) = 1
'

test_expect_success '--no-strip-managed-fields keeps them' '
	timeout 20 kwatch --once --no-strip-managed-fields configmaps >out 2>err &&
	jq -s -e "map(select(.object.metadata.name == \"a\"))[0].object.metadata.managedFields[0].manager == \"kubectl\"" out &&
	timeout 20 kwatch --once configmaps >out 2>err &&
	! grep managedFields out
'

test_expect_success '--project and --record: the file holds exactly what was printed' '
	rm -f rec &&
	timeout 20 kwatch --once --project "{name: .metadata.name, rv: .metadata.resourceVersion}" \
		--record rec configmaps@kw >out 2>err &&
	cmp_lines "$FIXTURES/project.expect" out &&
	test_cmp out rec &&
	timeout 20 kwatch --once --record rec configmaps >out2 2>err &&
	cat out out2 >both &&
	test_cmp both rec
'

test_expect_success 'a bad --project is a usage error' '
	test_expect_code 100 kwatch --once --project "{" configmaps >out 2>err &&
	! test -s out
'

test_expect_success 'live: each change once, across many reconnects; SIGTERM ends with 0' '
	: >requests &&
	{ timeout 30 kwatch configmaps >out 2>err & echo $! >pid; } &&
	test_wait_for 10 grep -q "\"name\":\"c\"" out &&
	test_wait_for 10 sh -c "test \$(grep -c resourceVersion=14 requests) -ge 3" &&
	kill -TERM $(cat pid) &&
	{ wait $(cat pid); echo $? >rc; } &&
	echo 0 >rc.expect &&
	test_cmp rc.expect rc &&
	cmp_lines "$FIXTURES/live.expect" out &&
	grep "watch=true" requests | grep -v sendInitialEvents | sed -n 1p | grep "resourceVersion=10&"
'

# The resource as kubectl names it and its scope in words, not the argument ("secrets@o").
test_expect_success '403: reported at once with verb, resource and namespace; exit 100' '
	test_expect_code 100 timeout 20 kwatch configmaps secrets@o >out 2>err &&
	grep "\"level\":\"error\"" err >errors &&
	jq -e "select(.level == \"error\") | .verb == \"watch\" and .namespace == \"o\"" errors &&
	jq -r .msg errors >msgs &&
	test_expect_code 100 timeout 20 kwatch -A deployments.apps >out 2>err &&
	jq -r "select(.level == \"error\") | .msg" err >>msgs &&
	test_expect_code 100 timeout 20 kwatch namespaces >out 2>err &&
	jq -r "select(.level == \"error\") | .msg" err >>msgs &&
	test_cmp "$FIXTURES/forbidden.expect" msgs
'

test_expect_success '401: credentials refreshed (token file re-read) and retried, no exit' '
	echo old >token &&
	sed "s/token: t0k3n/tokenFile: token/" kubeconfig >kc401 &&
	grep tokenFile kc401 &&
	: >requests &&
	{ KUBECONFIG=$PWD/kc401 timeout 60 kwatch pods >out 2>err & echo $! >pid; } &&
	test_wait_for 20 grep -q "\"code\":401" err &&
	echo new >token &&
	test_wait_for 30 grep -q BOOKMARK out &&
	kill -TERM $(cat pid) &&
	{ wait $(cat pid); echo $? >rc; } &&
	echo 0 >rc.expect &&
	test_cmp rc.expect rc &&
	jq -r "[.type, .object.metadata.name] | join(\" \")" out >summary &&
	printf "ADDED p1\nBOOKMARK \n" >summary.expect &&
	test_cmp summary.expect summary &&
	test $(grep -c "namespaces/kw/pods?watch=true&sendInitialEvents" requests) -ge 2
'

test_expect_success 'a refused streaming list is said once its paged LIST is answered, not after a 503' '
	test_expect_code 124 timeout 3 kwatch -n busy configmaps >out 2>err &&
	test_cmp /dev/null out &&
	grep -q "503" err &&
	! grep "read with paged LISTs" err
'

# jq 1.6 quotes the whole text in a parse error, the Secrets' data with it
test_expect_success 'a list cut short is retried, and its body never logged' '
	test_expect_code 124 timeout 3 kwatch -n cut secrets >out 2>err &&
	test_cmp /dev/null out &&
	grep "unable to read the list of .secrets.: Unfinished JSON term" err &&
	! grep S3cretD4ta err
'

test_expect_success 'an unknown resource is a usage error' '
	test_expect_code 100 timeout 20 kwatch --once nosuchthings >out 2>err &&
	! test -s out
'

test_expect_success 'a closed stdout ends kwatch quietly, as SIGPIPE' '
	rm -f fifo && mkfifo fifo &&
	{ timeout 30 kwatch configmaps >fifo 2>err & echo $! >pid; } &&
	exec 5<fifo && read -r first <&5 && exec 5<&- &&
	{ wait $(cat pid); echo $? >rc; } &&
	echo 141 >rc.expect &&
	test_cmp rc.expect rc &&
	! grep "\"level\":\"error\"" err
'

test_expect_success 'bad usage' '
	test_expect_code 100 kwatch 2>err &&
	test_expect_code 100 kwatch -n a -A pods 2>err &&
	test_expect_code 100 kwatch "pods:x=1" 2>err &&
	test_expect_code 100 kwatch --idle-timeout never pods 2>err
'

test_expect_success 'stop the canned server' '
	kill $(cat server.pid)
'

test_done
