#!/bin/sh
test_description='every tool: bad options and log settings are said as log lines, and exit 100'
. "${0%/*}/test-lib.sh"

# usage_error TOOL MESSAGE ARGS...: TOOL ARGS exits 100 with one JSON log line, MESSAGE in it
usage_error () {
	ue_tool=$1 ue_msg=$2
	shift 2
	test_expect_code 100 "$ue_tool" "$@" >out 2>err &&
	! test -s out &&
	test "$(wc -l <err)" = 1 &&
	jq -e --arg m "usage: $ue_msg; see '$ue_tool --help'" '.level == "error" and .msg == $m' err
}

for tool in kwatch ireconcile kapply kstatus iot-operator ksim
do
	test_expect_success "$tool: bad options are named, as a log line" '
		usage_error $tool "unknown option '"'"'--bogus'"'"'" --bogus &&
		usage_error $tool "unknown option '"'"'-Z'"'"'" -Z &&
		usage_error $tool "option '"'"'--log-level'"'"' needs an argument" --log-level &&
		usage_error $tool "unknown log level '"'"'loud'"'"' (error, warn, info, debug, trace)" --log-level loud
	'

	test_expect_success "$tool: unknown KOP_LOG_LEVEL and KOP_LOG_FORMAT are warned about" '
		KOP_LOG_LEVEL=loud KOP_LOG_FORMAT=xml $tool --help >out 2>err &&
		grep -q "^usage" out &&
		jq -r .msg err >msgs &&
		grep -q "^KOP_LOG_LEVEL: unknown log level '"'"'loud'"'"'" msgs &&
		grep -q "^KOP_LOG_FORMAT: unknown log format '"'"'xml'"'"'" msgs
	'
done

test_expect_success 'a short option without its argument' '
	usage_error kwatch "option '"'"'-n'"'"' needs an argument" -n &&
	usage_error kapply "option '"'"'-f'"'"' needs an argument" -f
'

test_expect_success 'empty or loose values are usage errors, not a default' '
	usage_error kwatch "-n needs a namespace name (-A for every namespace)" -n "" configmaps &&
	usage_error ksim "invalid port '"'"''"'"'" --port "" &&
	for d in 0x10 1e3 " 5s" 1. .5s inf 5x
	do
		usage_error kwatch "invalid --idle-timeout '"'"'$d'"'"'" --idle-timeout "$d" configmaps || return 1
	done &&
	usage_error ireconcile "--backoff-base (10000 ms) is above --backoff-cap (1000 ms)" --backoff-base 10s --backoff-cap 1s x &&
	kwatch --idle-timeout 1.5s --help >/dev/null &&
	kwatch --idle-timeout 300ms --help >/dev/null
'

test_expect_success 'text logs: PROG: LEVEL: message, as docs/architecture.md "Logs" shows them' '
	test_expect_code 100 kapply --log-format text -f ./no-such-file >out 2>err &&
	echo "kapply: error: unable to open '"'"'./no-such-file'"'"': No such file or directory" >expect &&
	test_cmp expect err
'

test_expect_success 'ireconcile finds a program by its bare name as iot-operator does' '
	mkdir elsewhere &&
	(cd elsewhere && ireconcile --print-watches "$PROJECT_ROOT/pipeline/memcached" >../expect) &&
	(cd elsewhere && ireconcile --print-watches memcached >../actual) &&
	test -s expect &&
	test_cmp expect actual &&
	(cd elsewhere && test_expect_code 100 ireconcile --print-watches no-such-program) 2>err &&
	jq -r .msg err >msg &&
	echo "unable to open '\''no-such-program'\'': No such file or directory" >expect &&
	test_cmp expect msg
'

test_done
