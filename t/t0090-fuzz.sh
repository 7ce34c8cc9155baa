#!/bin/sh
test_description='short fuzzing runs of every libFuzzer target (FUZZ_SECONDS each, default 5)'
. "${0%/*}/test-lib.sh"

command -v clang >/dev/null || test_skip_all 'clang is not installed (make check installs it: scripts/deps.sh --test)'
# The fuzz targets carry their own sanitizers: the SANITIZE=1 pass need not run them twice.
test_normal_pass_only 'the fuzz targets are sanitized builds already'
: "${FUZZ_SECONDS:=5}"

for src in "$PROJECT_ROOT"/t/fuzz/fuzz-*.c; do
	name=$(basename "$src" .c)
	target=${name#fuzz-}
	test_expect_success "fuzz $target for ${FUZZ_SECONDS}s finds nothing" '
		make -s -C "$PROJECT_ROOT" "build/fuzz/$name" >build-$target.log 2>&1 &&
		mkdir -p corpus-$target &&
		"$PROJECT_ROOT/t/fuzz/seeds.sh" "$target" corpus-$target &&
		ASAN_OPTIONS=detect_leaks=1 "$PROJECT_ROOT/build/fuzz/$name" -max_total_time=$FUZZ_SECONDS \
			-rss_limit_mb=2048 -max_len=65536 -artifact_prefix=./ corpus-$target >fuzz-$target.log 2>&1 ||
		{ tail -n 40 fuzz-$target.log; ls crash-* leak-* timeout-* oom-* 2>/dev/null; return 1; }
	'
done

test_done
