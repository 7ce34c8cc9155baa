#!/bin/sh
test_description='ksim --data: a damaged log is refused with its bad lines named (exit 100), never a crash, never rewritten'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"

CM=/api/v1/namespaces/default/configmaps

# ksim on the log in dir $1: must refuse (exit 100) without serving; its log in $1.err.
refused () {
	cp "$1/wal.jsonl" "$1.before" &&
	test_expect_code 100 timeout 10 ksim --port 0 --kubeconfig "$1.kc" --data "$1" 2>"$1.err" </dev/null &&
	test_no_sanitizer_report "$1.err" &&
	! test -s "$1.kc" &&
	grep "refusing to start" "$1.err" &&
	# the log is left as it was, for the user to look at
	cmp "$1.before" "$1/wal.jsonl" &&
	# only printable ASCII in the log, whatever the file held
	! grep -q -P "[^\\x20-\\x7e]" "$1.err"
}

for rec in "{\"a\":1}" "[1]" "null" "{}" "\"x\"" "{\"rv\":-1,\"type\":\"ADDED\",\"gr\":\"configmaps\",\"object\":{}}" \
	"{\"rv\":1e300,\"type\":\"ADDED\",\"gr\":\"configmaps\",\"object\":{\"metadata\":{\"name\":\"x\"}}}" \
	"{\"rv\":5,\"type\":\"BOGUS\",\"gr\":\"configmaps\",\"object\":{\"metadata\":{\"name\":\"x\"}}}" \
	"{\"rv\":5,\"type\":\"DELETED\",\"gr\":\"configmaps\",\"object\":{\"metadata\":{\"name\":\"x\"}}}"; do
	test_expect_success "a log holding only $rec is refused, line 1 named" '
		rm -rf d && mkdir d &&
		printf "%s\n" "$rec" >d/wal.jsonl &&
		refused d &&
		grep "d/wal.jsonl.: line 1 is not a valid record" d.err &&
		grep "1 of its 1 lines are not valid records (0 replayed)" d.err
	'
done

test_expect_success 'random bytes: every bad line reported (at most 10), shown escaped, none counted as replayed' '
	rm -rf d && mkdir d &&
	printf "\\001\\377\\376abc\\\\\n\\200{\n\n\\033[31mred\n" >d/wal.jsonl &&
	i=0 && while test $i -lt 20; do printf "garbage\\t%d\n" $i >>d/wal.jsonl; i=$((i + 1)); done &&
	refused d &&
	grep "line 1, column 7: .*x01\\\\\\\\xff\\\\\\\\xfeabc" d.err &&
	grep "line 4, column 2: .*x1b\\[31mred" d.err &&
	test $(grep -c "wal.jsonl.: line [0-9]*[,:]" d.err) = 10 &&
	grep "24 of its 24 lines are not valid records (0 replayed)" d.err
'

test_expect_success 'a line that is not JSON is named by its line and column in the file, once' '
	rm -rf d && mkdir d &&
	printf "%s\n" "{\"rv\":1,\"type\":\"ADDED\",\"gr\":\"configmaps\",\"object\":{\"metadata\":{\"name\":\"a\"}}}" \
		"{\"rv\":2,\"type\":ADDED}" "[1,2" >d/wal.jsonl &&
	refused d &&
	grep "d/wal.jsonl.: line 2, column 21: Invalid numeric literal: " d.err &&
	grep "d/wal.jsonl.: line 3, column 4: Unfinished JSON term at EOF: " d.err &&
	! grep "at line" d.err &&
	grep "2 of its 3 lines are not valid records (1 replayed)" d.err
'

ksim_start --data "$TRASH/real" --pod-start-delay 0

test_expect_success 'a real log with one record line repeated is refused, that line named, the others counted' '
	for n in a b c; do
		ksim_curl -f -o /dev/null -X POST -H "Content-Type: application/json" \
			-d "{\"metadata\":{\"name\":\"$n\"}}" $CM || return 1
	done &&
	ksim_stop &&
	lines=$(wc -l <real/wal.jsonl) &&
	grep "\"name\":\"b\"" real/wal.jsonl >b.line &&
	cp real/wal.jsonl good.jsonl &&
	cat good.jsonl b.line >real/wal.jsonl &&
	refused real &&
	grep "line $((lines + 1)) is not a valid record: its resourceVersion is not after" real.err &&
	grep "1 of its $((lines + 1)) lines are not valid records ($lines replayed)" real.err &&
	cp good.jsonl real/wal.jsonl
'

ksim_start --data "$TRASH/real" --pod-start-delay 0

test_expect_success '... and with the line removed it starts, every object there' '
	ksim_curl -f -o l.json $CM &&
	jq -r ".items[].metadata.name" l.json >names &&
	printf "a\nb\nc\nkube-root-ca.crt\n" >expect &&	# (and what kube-controller-manager puts there)
	test_cmp expect names &&
	grep "replayed .* writes" ksim.log &&
	ksim_stop
'

test_done
