# A small TAP harness in the manner of git's t/test-lib.sh. Sourced by every
# t/tNNNN-*.sh after it sets test_description; never run directly.
#
#   test_expect_success 'title' 'commands && chained'
#   test_expect_code 100 kapply --bogus
#   test_cmp expect actual          byte comparison (diff -u)
#   test_cmp_json expect actual     JSON comparison after canonicalising (normalize.jq)
#   test_when_finished 'cleanup'    runs after the current test, pass or fail
#   test_skip_all 'reason'          the whole script is skipped
#   test_normal_pass_only 'reason'  skipped in the sanitizer pass
#
# Environment: KOP_BIN (the tools), KOP_TEST_TOOL (t/helper's binary),
# KOP_SANITIZE=1 (sanitizer build), UPDATE_GOLDEN=1, KOP_TEST_VERBOSE=1.

TEST_DIRECTORY=$(cd "$(dirname "$0")" && pwd)
TEST_NAME=$(basename "$0" .sh)
FIXTURES="$TEST_DIRECTORY/$TEST_NAME"
PROJECT_ROOT=$(cd "$TEST_DIRECTORY/.." && pwd)
TEST_DATA="$PROJECT_ROOT/t/data"
: "${KOP_BIN:=$PROJECT_ROOT/bin}"
: "${KOP_TEST_TOOL:=$PROJECT_ROOT/build/t/test-tool}"
# timeout is t/bin/timeout, the system's with --foreground (why: there)
KOP_REAL_TIMEOUT=${KOP_REAL_TIMEOUT:-$(command -v timeout)}
PATH="$KOP_BIN:$TEST_DIRECTORY/bin:$PATH"
LC_ALL=C
TZ=UTC
export PATH LC_ALL TZ KOP_BIN KOP_TEST_TOOL TEST_DATA PROJECT_ROOT KOP_REAL_TIMEOUT
# Logs as JSON, whatever the terminal, so tests can read them.
KOP_LOG_FORMAT=json
export KOP_LOG_FORMAT
unset KUBECONFIG OPERATOR_NAME POD_NAME KUBERNETES_SERVICE_HOST KUBERNETES_SERVICE_PORT
ASAN_OPTIONS="abort_on_error=0:detect_leaks=1:exitcode=99"
UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:exitcode=99"
export ASAN_OPTIONS UBSAN_OPTIONS

TRASH="$TEST_DIRECTORY/trash.$TEST_NAME"
rm -rf "$TRASH" && mkdir -p "$TRASH" && cd "$TRASH" || exit 1
HOME="$TRASH"
export HOME

test_count=0
test_failed=0
test_cleanup=:
exec 3>&1 4>&2

say () { echo "# $*" >&3; }

test_when_finished () {
	test_cleanup="{ $1
	} && (exit \"\$eval_ret\"); eval_ret=\$?; $test_cleanup"
}

test_run_ () {
	test_cleanup=:
	eval_ret=0
	eval "$1" || eval_ret=$?
	eval "$test_cleanup" || eval_ret=$?
	return $eval_ret
}

test_expect_success () {
	test_count=$((test_count + 1))
	if (test_run_ "$2") >"$TRASH/.out.$test_count" 2>&1 </dev/null; then
		echo "ok $test_count - $1" >&3
		test -n "$KOP_TEST_VERBOSE" && sed 's/^/#	/' "$TRASH/.out.$test_count" >&3
	else
		test_failed=$((test_failed + 1))
		echo "not ok $test_count - $1" >&3
		# on stderr, which prove shows without -v (a CI log then says why);
		# kept for t/failures.sh, which says it again after the summary
		tail -n 80 "$TRASH/.out.$test_count" | sed 's/^/#	/' >&4
		{ echo "$test_count - $1"; tail -n 80 "$TRASH/.out.$test_count"; } >"$TRASH/.failed.$test_count"
	fi
}

# Runs "$@" and fails unless it exits with the wanted code.
test_expect_code () {
	want=$1
	shift
	"$@"
	got=$?
	test "$got" = "$want" && return 0
	echo "want exit $want, got $got: $*"
	return 1
}

# Fails unless "$@" fails (exit 1-125), never on a crash or a sanitizer report.
test_must_fail () {
	"$@"
	got=$?
	if test "$got" -eq 0; then
		echo "succeeded unexpectedly: $*"
		return 1
	elif test "$got" -gt 125 || test "$got" -eq 99; then
		echo "died (exit $got): $*"
		return 1
	fi
	return 0
}

test_cmp () {
	diff -u "$1" "$2"
}

# JSON values (one per line or a whole document) compared after
# canonicalising with normalize.jq. A missing golden file or
# UPDATE_GOLDEN=1 writes it from the actual output and fails, so that a
# person reads every new golden file.
test_cmp_json () {
	if test -n "$UPDATE_GOLDEN" || ! test -f "$1"; then
		cp "$2" "$1"
		echo "golden file $1 written from the actual output: read it and commit it"
		return 1
	fi
	jq -S -c -f "$TEST_DIRECTORY/normalize.jq" <"$1" >expect.canon &&
	jq -S -c -f "$TEST_DIRECTORY/normalize.jq" <"$2" >actual.canon &&
	diff -u expect.canon actual.canon
}

# The same for plain-text golden files.
test_cmp_golden () {
	if test -n "$UPDATE_GOLDEN" || ! test -f "$1"; then
		cp "$2" "$1"
		echo "golden file $1 written from the actual output: read it and commit it"
		return 1
	fi
	diff -u "$1" "$2"
}

# Waits up to $1 seconds for the command "$2..." to succeed (polling every 0.1 s).
# A timeout is said on stderr: a writer feeding a FIFO keeps stdout for the stream.
test_wait_for () {
	tw_limit=$(( $1 * 10 ))
	shift
	tw_i=0
	while ! "$@" >/dev/null 2>&1; do
		tw_i=$((tw_i + 1))
		if test "$tw_i" -ge "$tw_limit"; then
			echo "timed out waiting for: $*" >&2
			return 1
		fi
		sleep 0.1
	done
}

# test_has_ops FILE OP N: FILE holds at least N lines of operation OP (the stage protocol).
test_has_ops () {
	test "$(grep -c "\"op\":\"$2\"" "$1" 2>/dev/null)" -ge "$3"
}

# test_reconciles FILE: how many reconciles ireconcile -v's log FILE records.
# A reconcile's line is logged once its output is written: a test that saw
# that output waits for the count too (test_has_reconciles) before counting on.
test_reconciles () {
	grep -c "\"msg\":\"reconciled " "$1" 2>/dev/null || :
}

# test_has_reconciles FILE N: FILE records at least N reconciles.
test_has_reconciles () {
	test "$(test_reconciles "$1")" -ge "$2"
}

test_skip_all () {
	echo "1..0 # SKIP $*" >&3
	cd "$TEST_DIRECTORY" && rm -rf "$TRASH"
	exit 0
}

# test_normal_pass_only 'reason': the script is skipped in the sanitizer pass
# (make check SANITIZE=1): what it checks is not our C code's memory (the
# docs, the chart, a timing), or that code runs there under other scripts.
test_normal_pass_only () {
	test -z "${KOP_SANITIZE:-}" || test_skip_all "normal pass only: $*"
}

# test_kubectl: the kubectl a script runs when any version will do: the newest
# installed by version (kubectl.1.NN), not the dispatcher, which runs a second
# kubectl for each command; else plain kubectl. Skips the script when none.
test_kubectl () {
	KUBECTL=$(ls /usr/lib/google-cloud-sdk/bin/kubectl.1.* 2>/dev/null | sort -t. -k3,3n | tail -n 1)
	test -n "$KUBECTL" || KUBECTL=$(command -v kubectl) || test_skip_all 'no kubectl'
}

# Fails when a sanitizer report or an "AddressSanitizer" line appears in a file.
test_no_sanitizer_report () {
	! grep -E 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$@"
}

# test_ireconcile_fifo NAME ARGS...: ireconcile -v ARGS reads NAME.fifo
# (written by a background job of the test) into NAME.out and NAME.err
# (60 s at most); the writer is waited for; no sanitizer report.
test_ireconcile_fifo () {
	tif_name=$1
	shift
	timeout 60 ireconcile -v "$@" <"$tif_name.fifo" >"$tif_name.out" 2>"$tif_name.err" || {
		tif_rc=$?
		echo "ireconcile exited with $tif_rc (124: still running after 60 s); its log ends:"
		tail -n 20 "$tif_name.err"
		return 1
	}
	wait &&
	test_no_sanitizer_report "$tif_name.err"
}

# test_reconciled FILE FIELD...: [.FIELD, ...] of each "reconciled" line of ireconcile -v's log FILE.
test_reconciled () {
	tr_file=$1
	shift
	tr_fields=$(printf '.%s, ' "$@")
	jq -c "select(.msg? // \"\" | startswith(\"reconciled \")) | [${tr_fields%, }]" "$tr_file"
}

test_done () {
	echo "1..$test_count" >&3
	if test "$test_failed" = 0; then
		cd "$TEST_DIRECTORY" && rm -rf "$TRASH"
		exit 0
	fi
	exit 1
}
