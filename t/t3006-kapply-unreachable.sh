#!/bin/sh
test_description='kapply when the server cannot be reached: -f gives up after a short retry (exit 111,
naming the server and the reason); on stdin it keeps retrying and succeeds once the server is there'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"

# A server that cannot be reached ($server), and a kubeconfig naming it.
ksim_unreachable kc

test_expect_success 'setup: nothing listens on the port' '
	test_expect_code 7 curl -sS -m 10 -o /dev/null "$server/api"
'

test_expect_success '-f: a short retry, then exit 111 naming the server and the reason; every object has its result' '
	cat >three.yaml <<-\EOF &&
	apiVersion: v1
	kind: Namespace
	metadata: {name: far}
	---
	apiVersion: v1
	kind: ConfigMap
	metadata: {name: a, namespace: far}
	---
	apiVersion: v1
	kind: ConfigMap
	metadata: {name: b, namespace: far}
	EOF
	# docs/kapply.md: at most 3 retries, waits drawn from [200, 400), [400, 800) and [800, 1600) ms
	# (1.4 to 2.8 s in all), refused connections taking no time of their own: the bound, plus 2 s
	# for starting and stopping (timeout 60 only keeps a hang from stalling the suite)
	start=$(now_ms) &&
	test_expect_code 111 timeout 60 kapply --kubeconfig kc -f three.yaml >out 2>err &&
	elapsed=$(($(now_ms) - start)) &&
	echo "elapsed $elapsed ms" &&
	test $elapsed -ge 1400 &&
	test $elapsed -lt 4800 &&
	# the retries: three, each wait from its range
	sed -n "s/.*\"msg\":\"retrying apply of [^ ]* in \([0-9]*\) ms after .*/\1/p" err >delays &&
	test "$(wc -l <delays)" = 3 &&
	{ read d1 && read d2 && read d3; } <delays &&
	test $d1 -ge 200 && test $d1 -lt 400 &&
	test $d2 -ge 400 && test $d2 -lt 800 &&
	test $d3 -ge 800 && test $d3 -lt 1600 &&
	# the error says how often and how long it tried: 4 times, within the bound (0.1 s rounding)
	jq -r "select(.level == \"error\") | .msg" err >msg &&
	sed -n "s/^unable to reach .* (tried 4 times in \([0-9]*\)[.]\([0-9]\) s)\$/\1\2/p" msg >tenths &&
	test "$(wc -l <tenths)" = 1 &&
	test $(cat tenths) -ge 14 && test $(cat tenths) -le 29 &&
	jq -e -s "length == 3 and all(.op == \"result\" and .ok == false and .code == 0 and
		.reason == \"CouldNotConnect\" and .transient == true) and
		([.[].ref.name] | sort) == [\"a\", \"b\", \"far\"]" out &&
	# one error, naming the server and the reason; retried before that
	jq -e -s "[.[] | select(.level == \"error\")] | length == 1 and
		(.[0].msg | startswith(\"unable to reach '"'"'$server'"'"': Connection refused (\"))" err &&
	grep -q "retrying apply of .* after no response from '"'"'$server'"'"': Connection refused" err &&
	# no response is never shown as a status 0
	! grep -q "after 0 [A-Z]" err &&
	! jq -e -s "any(.code == 0)" err
'

test_expect_success '-f: --max-retries 0 gives up at the first failure' '
	test_expect_code 111 timeout 60 kapply --kubeconfig kc --max-retries 0 -f three.yaml >out 2>err &&
	jq -e -s "length == 3 and all(.ok == false)" out &&
	! grep -q "retrying" err &&
	grep -q "unable to reach .* (tried 1 time in 0.0 s)" err
'

test_expect_success 'stdin: no response is retried with the backoff (started now, the server comes later)' '
	printf "%s\n" "{\"op\":\"apply\",\"primary\":\"default/p\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"later\"}}}" >in &&
	rm -f rc &&
	{ timeout 300 kapply --kubeconfig kc <in >stream.out 2>stream.err; echo $? >rc; } &
	test_wait_for 30 grep -q "retrying apply of .Namespace/later. in [0-9]* ms after no response from .$server.: Connection refused" stream.err &&
	! test -f rc
'

# the server comes up on that port (kapply is retrying meanwhile)
ksim_start --port "$port"

test_expect_success 'stdin: once the server is there the apply succeeds; exit 0' '
	test "$KSIM_URL" = "$server" &&
	test_wait_for 240 test -s rc &&
	test "$(cat rc)" = 0 &&
	jq -e -s "length == 1 and .[0].ok == true and .[0].code == 201 and .[0].ref.name == \"later\"" stream.out &&
	! grep -q "after 0 [A-Z]" stream.err &&
	! grep -q "unable to reach" stream.err &&
	timeout 30 kubectl get ns later
'

test_expect_success 'ksim stops cleanly' '
	ksim_stop
'

test_done
