#!/bin/sh
test_description='kwatch when the server cannot be reached (docs/kwatch.md): at the start, exit 111 at once
with one error naming the path, the server and the reason; once watching, retried until the server is back'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"

# A server that cannot be reached ($server), and a kubeconfig naming it.
ksim_unreachable kc

test_expect_success 'setup: nothing listens on the port' '
	test_expect_code 7 curl -sS -m 10 -o /dev/null "$server/api"
'

for once in "" --once
do
	test_expect_success "at the start${once:+ ($once)}: exit 111 at once, one error naming the path, the server and the reason" '
		start=$(now_ms) &&
		test_expect_code 111 timeout 60 kwatch --kubeconfig kc $once namespaces configmaps >out 2>err &&
		elapsed=$(($(now_ms) - start)) &&
		echo "elapsed $elapsed ms" &&
		# discovery is read once, without retrying
		test $elapsed -lt 5000 &&
		test_cmp /dev/null out &&
		jq -r "select(.level == \"error\") | .msg" err >errors &&
		echo "unable to get '"'"'/api'"'"': no response from '"'"'$server'"'"': Connection refused" >expect &&
		test_cmp expect errors &&
		test "$(wc -l <err)" = 1 &&
		! grep "after 0 [A-Z]" err
	'
done

# The server comes up on that port, kwatch watches, the server goes away and comes back.
ksim_start --port "$port"

test_expect_success 'once watching: a server gone is retried, logged, nothing written, kwatch goes on' '
	test "$KSIM_URL" = "$server" &&
	rm -f kw.code &&
	{ timeout 120 sh -c "echo \$\$ >kw.pid && exec kwatch --kubeconfig kc configmaps@default" >kw.out 2>kw.err
	  echo $? >kw.code.tmp && mv kw.code.tmp kw.code; } &
	test_wait_for 10 grep -q "k8s.io/initial-events-end" kw.out &&
	lines=$(wc -l <kw.out) &&
	ksim_stop &&
	# at warn once the initial state was written, naming the server (host and port) and the reason,
	# with the next wait; again and again
	warned () {
		test "$(jq -c --arg port "$port" "select(.level == \"warn\" and (.msg | test(\"^watch of .configmaps@default. ended: \"
			+ \"Failed to connect to 127[.]0[.]0[.]1 port \" + \$port + \" after [0-9]+ ms: Couldn.t connect to server; again in [0-9]+ ms\$\")))" \
			kw.err | wc -l)" -ge 2
	} &&
	test_wait_for 30 warned &&
	warned &&
	! test -f kw.code &&
	test "$(wc -l <kw.out)" = "$lines"
'

ksim_start --port "$port"

test_expect_success 'once the server is back, kwatch watches it again' '
	ksim_curl -o /dev/null -f -X POST -H "Content-Type: application/json" \
		-d "{\"metadata\":{\"name\":\"after\"}}" /api/v1/namespaces/default/configmaps &&
	test_wait_for 60 grep -q "\"name\":\"after\"" kw.out &&
	! test -f kw.code &&
	kill -TERM "$(cat kw.pid)" &&
	test_wait_for 10 test -f kw.code &&
	test "$(cat kw.code)" = 0
'

test_expect_success 'ksim stops cleanly' '
	ksim_stop
'

test_done
