#!/bin/sh
# prove's interpreter for make check and make test (prove --exec):
#
#   t/watchdog.sh t/tNNNN-name.sh
#
# runs one test script under timeout(1), which puts it and everything it
# starts (ksim, operators) in a process group of their own: a script still
# running after TEST_TIMEOUT seconds (default 900) is killed with all of it
# and fails, named, instead of holding prove on a pipe nobody closes. That
# group no longer gets the terminal's ^C, so an interrupt (or a TERM or HUP
# to this wrapper) is passed on to the whole group.
limit=${TEST_TIMEOUT:-900}
timeout -k 10 "$limit" sh "$@" &
pid=$!
trap 'kill -TERM "-$pid" 2>/dev/null' INT TERM HUP
while :; do
	wait "$pid"
	rc=$?
	# a trapped signal ends wait early: wait again until timeout is gone
	kill -0 "$pid" 2>/dev/null || break
done
test "$rc" = 124 && echo "# watchdog: $* still running after ${limit}s: killed"
exit "$rc"
