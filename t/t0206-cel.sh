#!/bin/sh
test_description='lib/cel*.c: the CEL subset of ValidatingAdmissionPolicies, each operator, precedence, typed equality, the error semantics of && and ||, and the parse errors that name a position'
. "${0%/*}/test-lib.sh"

# t0206-cel/cases.txt: EXPRESSION <TAB> the expected line, with vars.json bound.
test_expect_success 'each case evaluates to what CEL gives' '
	grep -v "^#" "$FIXTURES/cases.txt" | cut -f1 >exprs &&
	grep -v "^#" "$FIXTURES/cases.txt" | cut -f2- >want &&
	test -s exprs &&
	"$KOP_TEST_TOOL" cel "$(cat "$FIXTURES/vars.json")" <exprs >got &&
	paste exprs want >expect &&
	paste exprs got >actual &&
	test_cmp expect actual
'

test_expect_success 'deep nesting is refused, not a stack overflow' '
	awk "BEGIN { for (i = 0; i < 5000; i++) printf \"(\"; print \"1\" }" >deep1 &&
	awk "BEGIN { for (i = 0; i < 5000; i++) printf \"1 + \"; print \"1\" }" >deep2 &&
	awk "BEGIN { for (i = 0; i < 5000; i++) printf \"!\"; print \"true\" }" >deep3 &&
	awk "BEGIN { printf \"o\"; for (i = 0; i < 5000; i++) printf \".a\"; print \"\" }" >deep4 &&
	cat deep1 deep2 deep3 deep4 | "$KOP_TEST_TOOL" cel >actual &&
	grep -c "^parse error: 1:[0-9]*: expression nested too deeply$" actual >n &&
	echo 4 >expect &&
	test_cmp expect n
'

test_expect_success 'a hundred levels are fine' '
	awk "BEGIN { for (i = 0; i < 90; i++) printf \"(\"; printf \"1\"; for (i = 0; i < 90; i++) printf \")\"; print \"\" }" >ok &&
	"$KOP_TEST_TOOL" cel <ok >actual &&
	echo 1 >expect &&
	test_cmp expect actual
'

test_done
