#!/bin/sh
test_description='iot-operator starts the built-in stages through its spawner: children of the supervisor, nothing of its own leaked, exec when the spawner is gone'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"
. "$TEST_DIRECTORY/lib-e2e.sh"

e2e_ksim_start

exe_is () { # PID PATH: the process runs that executable
	test "$(readlink -f "/proc/$1/exe")" = "$(readlink -f "$2")"
}

# spawner NAME: the pid of operator NAME's spawner
spawner () {
	e2e_stage_pid "$1" iot-spawner
}

# cockpit_is GEN: the cockpit Deployment runs image registry.example/cockpit:GEN
cockpit_is () {
	ksim_curl -o cockpit.json "/apis/apps/v1/namespaces/$I/deployments/cockpit-$X" &&
	jq -e ".spec.template.spec.containers[0].image == \"registry.example/cockpit:$1\"" cockpit.json >/dev/null
}

# execd_and_working NAME GEN: operator NAME's four stages run from their executables, and a spec
# edit to cockpit image GEN reaches its Deployment and the instance is Available again
execd_and_working () {
	for s in kwatch ireconcile kapply kstatus; do
		test_wait_for 10 e2e_stage_pid "$1" $s >/dev/null &&
		exe_is "$(e2e_stage_pid "$1" $s)" "$KOP_BIN/$s" || return 1
	done &&
	k patch iotservice -n $O $X --type merge -p "{\"spec\":{\"cockpit\":{\"image\":\"registry.example/cockpit:$2\"}}}" >patch.out &&
	test_wait_for 30 status_is Available &&
	cockpit_is "$2"
}

# none_left PID...: none of them runs (a zombie waiting for whoever adopted it counts as gone)
none_left () {
	for p in "$@"; do
		st=$(sed "s/.*) //" "/proc/$p/stat" 2>/dev/null | cut -d " " -f 1)
		test -z "$st" || test "$st" = Z || return 1
	done
}

# fd_targets PID: what each of its fds is (socket:[N], pipe:[N], anon_inode:[signalfd], paths)
fd_targets () {
	for f in /proc/"$1"/fd/*; do
		readlink "$f"
	done
}

test_expect_success 'setup: deploy/, the operator under its ServiceAccount, the example Available' '
	e2e_install &&
	e2e_operator_start op --log-level debug &&
	k apply -f "$PROJECT_ROOT/deploy/example-iotservice.yaml" >example.out &&
	test_wait_for 30 status_is Available
'

test_expect_success 'the stages are built in: children of the supervisor, named, each in a group of its own' '
	sup=$(cat op.pid) &&
	sp=$(spawner op) &&
	exe_is "$sp" "$KOP_BIN/iot-operator" &&
	test "$(ps -o pgid= -p "$sp")" = "$(ps -o pgid= -p "$sup")" &&
	for s in kwatch ireconcile kapply kstatus; do
		pid=$(e2e_stage_pid op $s) &&
		exe_is "$pid" "$KOP_BIN/iot-operator" &&
		test "$(ps -o ppid= -p "$pid" | tr -d " ")" = "$sup" &&
		test "$(ps -o pgid= -p "$pid" | tr -d " ")" = "$pid" &&
		tr "\0" "\n" <"/proc/$pid/cmdline" | head -n 1 >arg0 &&
		echo $s >expect && test_cmp expect arg0 || return 1
	done &&
	: its arguments, as far as the arguments of the supervisor left room &&
	pid=$(e2e_stage_pid op ireconcile) &&
	tr "\0" "\n" <"/proc/$pid/cmdline" | sed -n 2p >arg1 &&
	echo --feedback >expect && test_cmp expect arg1 &&
	grep -q "\"msg\":\"started stage .kapply.\".*\"builtin\":true" op.err
'

test_expect_success 'a built-in stage holds nothing of the supervisor'"'"'s or the spawner'"'"'s: no signalfd, no listening socket, no spawner socket' '
	sup=$(cat op.pid) &&
	sp=$(spawner op) &&
	fd_targets "$sup" >sup.fds &&
	grep -q "anon_inode:\[signalfd\]" sup.fds &&
	: the spawner: stdin, stdout, stderr and its socket &&
	ls /proc/"$sp"/fd | sort -n >sp.fdnums &&
	test "$(wc -l <sp.fdnums)" = 4 &&
	fd_targets "$sp" | grep "^socket:" >sp.sock &&
	test "$(wc -l <sp.sock)" = 1 &&
	: the listening socket of /metrics: its inode in /proc/net/tcp &&
	port=$(sed -n "s/.*\"port\":\([0-9]*\).*/\1/p" op.err | head -n 1) &&
	hex=$(printf "%04X" "$port") &&
	lino=$(awk -v p=":$hex" "\$2 ~ p\"\$\" && \$4 == \"0A\" { print \$10 }" /proc/net/tcp | head -n 1) &&
	test -n "$lino" &&
	grep -qx "socket:\[$lino\]" sup.fds &&
	for s in kwatch ireconcile kapply kstatus; do
		pid=$(e2e_stage_pid op $s) &&
		fd_targets "$pid" >$s.fds &&
		! grep -q "signalfd" $s.fds &&
		! grep -qx "socket:\[$lino\]" $s.fds &&
		! grep -qxF "$(cat sp.sock)" $s.fds || { echo "$s holds:"; cat $s.fds; return 1; }
	done &&
	: ireconcile reads the results on fd 3, every stage writes its metrics on fd 4 &&
	readlink /proc/"$(e2e_stage_pid op ireconcile)"/fd/3 | grep -q "^pipe:" &&
	for s in kwatch ireconcile kapply kstatus; do
		readlink /proc/"$(e2e_stage_pid op $s)"/fd/4 | grep -q "^socket:" || return 1
	done
'

test_expect_success 'a built-in stage gets the environment the setup of the supervisor left' '
	: POD_NAME, from the start: in the User-Agent of kapply &&
	curl -sS -m 10 -k -o stats.json "$KSIM_URL/ksim/stats" &&
	jq -e ".byAgent | has(\"iot-operator/kapply (op)\")" stats.json &&
	: KOP_LOG_LEVEL, set by the supervisor after it started: kapply logs at debug level &&
	grep -q "\"level\":\"debug\",\"prog\":\"kapply\"" op.err &&
	: KOP_STATS_FD: the metrics of kapply reach /metrics &&
	port=$(sed -n "s/.*\"port\":\([0-9]*\).*/\1/p" op.err | head -n 1) &&
	curl -sS -m 5 -o metrics "http://127.0.0.1:$port/metrics" &&
	grep -q "^kapply_" metrics
'

test_expect_success 'the spawner killed: said once, the stages run on; after a restart they are exec'"'"'d, and the operator works' '
	sp=$(spawner op) &&
	kill -KILL "$sp" &&
	test_wait_for 10 grep -q "the spawner was killed by signal 9.*: stages are started from their executables from now on" op.err &&
	e2e_stage_pid op kapply >/dev/null &&
	status_is Available &&
	kill -KILL "$(e2e_stage_pid op kapply)" &&
	test_wait_for 10 grep -q "stage .kapply. .*; restarting the pipeline" op.err &&
	test_wait_for 20 grep -q "\"msg\":\"started stage .kstatus.\".*\"builtin\":false" op.err &&
	execd_and_working op 2 &&
	test "$(grep -c "stages are started from their executables" op.err)" = 1 &&
	e2e_operator_stop op
'

test_expect_success '--stage-dir: a stage found there is run from there, the others are built in' '
	mkdir stages &&
	printf "#!/bin/sh\nexec \"%s/kapply\" \"\$@\"\n" "$KOP_BIN" >stages/kapply &&
	chmod +x stages/kapply &&
	e2e_operator_start op2 --stage-dir "$TRASH/stages" &&
	test_wait_for 20 grep -q "initial lists are in" op2.err &&
	exe_is "$(e2e_stage_pid op2 kapply)" "$KOP_BIN/kapply" &&
	exe_is "$(e2e_stage_pid op2 kwatch)" "$KOP_BIN/iot-operator" &&
	exe_is "$(e2e_stage_pid op2 kstatus)" "$KOP_BIN/iot-operator" &&
	k patch iotservice -n $O $X --type merge -p "{\"spec\":{\"cockpit\":{\"image\":\"registry.example/cockpit:3\"}}}" >patch.out &&
	test_wait_for 30 status_is Available &&
	cockpit_is 3
'

test_expect_success 'the supervisor killed (-9): the spawner and every stage go with it' '
	sup=$(cat op2.pid) &&
	pids="$(spawner op2) $(e2e_stage_pid op2 kwatch) $(e2e_stage_pid op2 ireconcile) $(e2e_stage_pid op2 kapply) $(e2e_stage_pid op2 kstatus)" &&
	test "$(echo $pids | wc -w)" = 5 &&
	kill -KILL "$sup" &&
	test_wait_for 10 none_left $pids &&
	rm -f op2.pid
'

test_expect_success 'the spawner stopped: a start waits for its answer 2 s at most, then runs the executable, and the spawner goes' '
	e2e_operator_start op3 &&
	test_wait_for 20 grep -q "initial lists are in" op3.err &&
	sp=$(spawner op3) &&
	kill -STOP "$sp" &&
	kill -KILL "$(e2e_stage_pid op3 kwatch)" &&
	test_wait_for 20 grep -q "the spawner did not answer when asked to start .[a-z]*.: stages are started from their executables from now on" op3.err &&
	test_wait_for 10 none_left $sp &&
	execd_and_working op3 4 &&
	e2e_operator_stop op3
'

test_done
