#!/bin/sh
test_description='the test harness itself'
. "${0%/*}/test-lib.sh"

test_expect_success 'test_expect_code sees the exit code' '
	test_expect_code 3 sh -c "exit 3" &&
	! test_expect_code 0 sh -c "exit 3"
'

test_expect_success 'test_must_fail refuses crashes' '
	test_must_fail sh -c "exit 1" &&
	! test_must_fail sh -c "exit 0" &&
	! test_must_fail sh -c "kill -SEGV \$\$"
'

test_expect_success 'test_cmp_json compares canonical JSON' '
	echo "{\"b\":1,\"a\":{\"uid\":\"x\",\"c\":2}}" >expect &&
	echo "{\"a\":{\"c\":2,\"uid\":\"y\"},\"b\":1}" >actual &&
	test_cmp_json expect actual &&
	echo "{\"a\":{\"c\":3},\"b\":1}" >actual &&
	! test_cmp_json expect actual
'

test_expect_success 'a missing golden file fails and is written' '
	echo "{}" >actual &&
	! test_cmp_json golden actual &&
	test -f golden
'

test_expect_success 'test_when_finished runs after a failure too' '
	(test_run_ "test_when_finished \"touch cleaned\"; false") ;
	test -f cleaned
'

test_expect_success 'a failing test: "not ok" on stdout, its output on stderr (prove shows it)' '
	cat >inner.sh <<-EOF &&
	test_description=inner
	. "$TEST_DIRECTORY/test-lib.sh"
	test_expect_success "passes" "echo quiet-when-passing"
	test_expect_success "fails" "echo why-it-failed; false"
	test_done
	EOF
	test_expect_code 1 sh inner.sh >inner.out 2>inner.err &&
	printf "ok 1 - passes\nnot ok 2 - fails\n1..2\n" >expect &&
	test_cmp expect inner.out &&
	printf "#\twhy-it-failed\n" >expect &&
	test_cmp expect inner.err
'

test_done
