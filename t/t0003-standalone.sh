#!/bin/sh
test_description='the repository stands alone: no tracked file reads or links a folder beside the checkout'
. "${0%/*}/test-lib.sh"

# The reference folder's name is put together here, so that this file's
# own text does not match the pattern it checks every tracked file with.
ref=shar
ref=${ref}ed
PATTERN="\.\./$ref\b|\b$ref/(spec|recordings|guides)\b"

# outside_refs FILE...: the lines of FILEs that name the reference folder
# (the first test runs the same grep on every tracked file)
outside_refs () {
	grep -n -I -s -E "$PATTERN" "$@"
}

test_expect_success 'no tracked file reads or links the reference folder' '
	(cd "$PROJECT_ROOT" && git ls-files -z | xargs -0 grep -n -I -s -E "$PATTERN" --) >found;
	test_cmp /dev/null found
'

test_expect_success 'the check finds each kind of reference (a file made here)' '
	printf "%s\n" "R=\$PROJECT_ROOT/../$ref/recordings" >script.sh &&
	printf "%s\n" "see [the spec]($ref/spec/iotservice.md)" >doc.md &&
	printf "%s\n" "# after guides/kube-api.md in the $ref guides/" "cp ../$ref/x ." >other.txt &&
	printf "%s\n" "a $ref/ folder of our own" "un$ref/specs" >clean.txt &&
	outside_refs script.sh >found &&
	test "$(wc -l <found)" = 1 &&
	outside_refs doc.md >found &&
	test "$(wc -l <found)" = 1 &&
	outside_refs other.txt >found &&
	grep -q "^2:cp" found &&
	test "$(wc -l <found)" = 1 &&
	! outside_refs clean.txt
'

test_expect_success 'the check reads this very file and does not match it' '
	(cd "$PROJECT_ROOT" && git ls-files --error-unmatch t/t0003-standalone.sh) &&
	! outside_refs "$PROJECT_ROOT/t/t0003-standalone.sh"
'

test_expect_success 'tests read their data from inside the repository' '
	test -d "$TEST_DATA/recordings" && test -d "$TEST_DATA/vectors" &&
	case "$TEST_DATA" in "$PROJECT_ROOT"/*) ;; *) false ;; esac
'

test_done
