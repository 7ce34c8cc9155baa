#!/bin/sh
test_description='kstatus when the server cannot be reached (docs/kstatus.md): each line retried with the
backoff, the retries naming the server and the reason, then its failed result; on to the next line; exit 0'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"

# A server that cannot be reached ($server), and a kubeconfig naming it.
ksim_unreachable kc

# status_line NAME: a status operation for ConfigMap ns/NAME
status_line () {
	printf '{"op":"status","primary":"ns/%s","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"%s","namespace":"ns"},"status":{"phase":"Ready"}}}\n' "$1" "$1"
}

test_expect_success 'setup: nothing listens on the port' '
	test_expect_code 7 curl -sS -m 10 -o /dev/null "$server/api"
'

test_expect_success 'a status and an event: retried, each retry naming the server and the reason; then a failed result each; exit 0' '
	{
		status_line a &&
		echo "{\"op\":\"event\",\"primary\":\"ns/a\",\"event\":{\"involvedObject\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"namespace\":\"ns\",\"name\":\"a\"},\"type\":\"Normal\",\"reason\":\"Tested\",\"message\":\"hello\"}}"
	} >in &&
	timeout 60 kstatus --kubeconfig kc --max-retries 2 <in >out 2>err &&
	# one failed result per line, in order, as kapply gives one without a response
	jq -c -s "map([.for, .ok, .code, .reason, .transient])" out >actual &&
	echo "[[\"status\",false,0,\"CouldNotConnect\",true],[\"event\",false,0,\"CouldNotConnect\",true]]" >expect &&
	test_cmp expect actual &&
	# --max-retries 2: two retries per line, each naming the server and the reason
	jq -r "select(.level == \"info\" and (.msg | startswith(\"retrying\"))) | .msg" err >retries &&
	test "$(wc -l <retries)" = 4 &&
	sed "s/^retrying in [0-9]* ms after //" retries | sort -u >why &&
	echo "no response from '"'"'$server'"'"': Connection refused" >expect &&
	test_cmp expect why &&
	# one error per line (a status names its object, an event the object it is about), the same words
	jq -r "select(.level == \"error\") | .msg" err >errors &&
	cat >expect <<-EOF &&
	unable to write status of '"'"'ConfigMap/ns/a'"'"': no response from '"'"'$server'"'"': Connection refused
	unable to write event of '"'"'a'"'"': no response from '"'"'$server'"'"': Connection refused
	EOF
	test_cmp expect errors &&
	# no response is never shown as a status 0
	! grep "after 0 [A-Z]" err
'

# docs/kstatus.md: with the defaults, 10 more tries, waiting 100 ms doubling to 5 s, each wait drawn
# from [d, 2d): between 26 and 53 s in all; refused connections take no time of their own.
test_expect_success 'with the defaults: 10 retries, 26 to 53 s of waiting, then the failed result; exit 0' '
	status_line b >in &&
	start=$(now_ms) &&
	timeout 120 kstatus --kubeconfig kc <in >out 2>err &&
	elapsed=$(($(now_ms) - start)) &&
	echo "elapsed $elapsed ms" &&
	test $elapsed -ge 26000 &&
	test $elapsed -le 63000 &&
	jq -e -s "length == 1 and .[0].ok == false and .[0].code == 0 and .[0].ref.name == \"b\"" out &&
	jq -r "select(.msg | startswith(\"retrying in \")) | .msg" err >retries &&
	test "$(wc -l <retries)" = 10 &&
	sed -n "s/^retrying in \([0-9]*\) ms after .*/\1/p" retries >delays &&
	# the first wait from [100, 200) ms, the last capped: from [5, 10) s
	test $(head -n 1 delays) -ge 100 && test $(head -n 1 delays) -lt 200 &&
	test $(tail -n 1 delays) -ge 5000 && test $(tail -n 1 delays) -lt 10000
'

test_expect_success 'kstatus needs no server to start: an empty input ends with 0, nothing sent' '
	timeout 30 kstatus --kubeconfig kc </dev/null >out 2>err &&
	test_cmp /dev/null out &&
	! grep -q "retrying\|unable" err
'

test_done
