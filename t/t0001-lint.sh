#!/bin/sh
test_description='source rules: banned functions, lib/ never prints or exits'
. "${0%/*}/test-lib.sh"
test_normal_pass_only 'it reads the sources, the same for either build'

cd "$PROJECT_ROOT" || exit 1

test_expect_success 'every .c includes banned.h last' '
	for f in $(git ls-files "lib/*.c" "cmd/*.c" "cmd/*/*.c" "t/helper/*.c" 2>/dev/null || ls lib/*.c cmd/*.c cmd/*/*.c); do
		last=$(grep "^#include" "$f" | tail -n 1) &&
		test "$last" = "#include \"banned.h\"" || { echo "$f: last include is $last"; return 1; }
	done
'

# _exit() is allowed: it is how a forked child that failed to exec ends.
test_expect_success 'lib/ never prints and never exits' '
	! grep -nE "\b(printf|fprintf|puts|perror|exit)\s*\(" lib/*.c |
		grep -vE "^\S+:[0-9]+:\s*(/\*|\*)" | grep -v "snprintf\|vsnprintf\|fprintf(f,\|fprintf(out," 
'

test_expect_success 'no banned functions anywhere' '
	! grep -nE "\b(strcpy|strcat|sprintf|vsprintf|strtok|gmtime|localtime)\s*\(" lib/*.c cmd/*.c cmd/*/*.c 2>/dev/null
'

test_done
