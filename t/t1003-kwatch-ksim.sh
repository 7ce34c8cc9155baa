#!/bin/sh
test_description='kwatch against ksim: initial state and live changes of several resources, cut
connections, expired resourceVersions, ERROR events, selectors, --once, idle restart, backpressure'
. "${0%/*}/test-lib.sh"

. "$TEST_DIRECTORY/lib-ksim.sh"
# a bare API server: the simulated controllers would add objects (a kube-root-ca.crt
# ConfigMap in every namespace) to the exact streams compared here
ksim_start --no-simulate || exit 1

# api METHOD PATH [BODY [CONTENT-TYPE]]: the answer on stdout; fails on HTTP errors.
api () {
	if test $# -ge 3; then
		curl -sS -f -X "$1" -H "Content-Type: ${4:-application/json}" --data-binary "$3" "$KSIM_URL$2"
	else
		curl -sS -f -X "$1" "$KSIM_URL$2"
	fi
}
cm () { # NAMESPACE NAME [LABELS-JSON]
	api POST "/api/v1/namespaces/$1/configmaps" \
		"{\"metadata\":{\"name\":\"$2\",\"labels\":${3:-{\}}},\"data\":{\"v\":\"1\"}}" >/dev/null
}
cm_patch () { # NAMESPACE NAME MERGE-PATCH
	api PATCH "/api/v1/namespaces/$1/configmaps/$2" "$3" application/merge-patch+json >/dev/null
}
# count FILE JQ-CONDITION: how many lines of FILE match
count () {
	jq -s "map(select($2)) | length" "$1" 2>/dev/null
}
has () { # N FILE JQ-CONDITION
	test "$(count "$2" "$3")" = "$1"
}
# kwatch in the background (this test's subshell), output in $1, logs in $1.err
# (under `timeout`, so that nothing outlives a broken test; $1.kwpid is kwatch itself)
kw_start () {
	kw_out=$1
	shift
	rm -f "$kw_out.kwpid" &&
	{ timeout 120 kwatch "$@" >"$kw_out" 2>"$kw_out.err" & echo $! >"$kw_out.pid"; } &&
	test_when_finished "kill $(cat "$kw_out.pid") 2>/dev/null; :" &&
	test_wait_for 10 kw_pid "$kw_out"
}
kw_pid () {
	pgrep -P "$(cat "$1.pid")" -x kwatch >"$1.kwpid" && test -s "$1.kwpid"
}
# SIGTERM: kwatch must end cleanly, with 0
kw_stop () {
	kill -TERM $(cat "$1.kwpid") && wait $(cat "$1.pid")
}
# "TYPE Kind name" per line, after (or before) the BOOKMARK line
summary_after () {
	jq -r "[.type, .object.kind, .object.metadata.name] | join(\" \")" "$1" | sed "1,/^BOOKMARK /d"
}
summary_before () {
	jq -r "[.type, .object.kind, .object.metadata.name] | join(\" \")" "$1" | sed "/^BOOKMARK /,\$d"
}
after_count () { # N FILE: N events after the bookmark
	test "$(summary_after "$2" | wc -l)" = "$1"
}
# no event twice: (type, uid, resourceVersion) unique
no_duplicates () {
	jq -r "select(.type != \"BOOKMARK\") | [.type, .object.metadata.uid, .object.metadata.resourceVersion] | join(\" \")" \
		"$1" | sort | uniq -d >dups &&
	! test -s dups
}

test_expect_success 'namespaces' '
	for ns in a b c d e f; do
		api POST /api/v1/namespaces "{\"metadata\":{\"name\":\"$ns\"}}" >/dev/null || return 1
	done
'

test_expect_success 'initial state, one bookmark, then live changes of several resources' '
	cm a c1 &&
	api POST /api/v1/namespaces/a/secrets "{\"metadata\":{\"name\":\"s1\"},\"data\":{\"k\":\"dg==\"}}" >/dev/null &&
	kw_start out -n a configmaps secrets namespaces &&
	test_wait_for 20 has 1 out ".type == \"BOOKMARK\"" &&
	cm a c2 &&
	cm_patch a c1 "{\"data\":{\"v\":\"2\"}}" &&
	api DELETE /api/v1/namespaces/a/secrets/s1 >/dev/null &&
	api POST /api/v1/namespaces "{\"metadata\":{\"name\":\"a2\"}}" >/dev/null &&
	test_wait_for 20 has 1 out ".type == \"DELETED\" and .object.kind == \"Secret\"" &&
	test_wait_for 20 has 1 out ".type == \"MODIFIED\" and .object.metadata.name == \"c1\"" &&
	test_wait_for 20 has 1 out ".object.metadata.name == \"a2\"" &&
	kw_stop out &&
	summary_before out | sort >before &&
	cat >before.expect <<-\EOF &&
	ADDED ConfigMap c1
	ADDED Namespace a
	ADDED Namespace b
	ADDED Namespace c
	ADDED Namespace d
	ADDED Namespace default
	ADDED Namespace e
	ADDED Namespace f
	ADDED Namespace kube-node-lease
	ADDED Namespace kube-public
	ADDED Namespace kube-system
	ADDED Secret s1
	EOF
	test_cmp before.expect before &&
	summary_after out | grep -v "^MODIFIED Namespace a2" >after &&
	grep ConfigMap after >after.cm &&
	printf "ADDED ConfigMap c2\nMODIFIED ConfigMap c1\n" >after.cm.expect &&
	test_cmp after.cm.expect after.cm &&
	grep -v ConfigMap after | sort >after.rest &&
	printf "ADDED Namespace a2\nDELETED Secret s1\n" >after.rest.expect &&
	test_cmp after.rest.expect after.rest &&
	has 1 out ".type == \"BOOKMARK\"" &&
	no_duplicates out &&
	! grep managedFields out
'

test_expect_success 'a connection cut mid-stream resumes: nothing missed, nothing repeated' '
	kw_start out -n b -v -v configmaps &&
	test_wait_for 20 has 1 out ".type == \"BOOKMARK\"" &&
	i=1 &&
	while test $i -le 40; do
		cm b x$i || return 1
		if test $i = 20; then ksim_admin cut-watches || return 1; fi
		i=$((i + 1))
	done &&
	test_wait_for 30 has 40 out ".type == \"ADDED\"" &&
	sleep 1 &&
	kw_stop out &&
	has 40 out ".type == \"ADDED\"" &&
	has 41 out "true" &&
	no_duplicates out &&
	grep "GET /api/v1/namespaces/b/configmaps?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true" out.err &&
	! grep "limit=500" out.err &&
	grep "resuming at resourceVersion" out.err &&
	grep "GET /api/v1/namespaces/b/configmaps?watch=true&allowWatchBookmarks=true&resourceVersion=[0-9]" out.err &&
	! grep "expired" out.err
'

test_expect_success 'an expired resourceVersion: exactly the difference, DELETED included' '
	cm c c1 && cm c c2 && cm c c3 &&
	uid1=$(api GET /api/v1/namespaces/c/configmaps/c1 | jq -r .metadata.uid) &&
	kw_start out -n c configmaps &&
	test_wait_for 20 has 1 out ".type == \"BOOKMARK\"" &&
	kill -STOP $(cat out.kwpid) &&
	ksim_admin cut-watches &&
	api DELETE /api/v1/namespaces/c/configmaps/c1 >/dev/null &&
	cm_patch c c2 "{\"data\":{\"v\":\"2\"}}" &&
	cm c c4 &&
	ksim_admin compact &&
	kill -CONT $(cat out.kwpid) &&
	test_wait_for 20 after_count 3 out &&
	sleep 1 &&
	kw_stop out &&
	summary_after out | sort >after &&
	printf "ADDED ConfigMap c4\nDELETED ConfigMap c1\nMODIFIED ConfigMap c2\n" >after.expect &&
	test_cmp after.expect after &&
	has 1 out ".type == \"DELETED\" and .object.metadata.uid == \"$uid1\" and .object.kind == \"ConfigMap\" and .object.apiVersion == \"v1\" and .object.metadata.namespace == \"c\"" &&
	has 1 out ".type == \"BOOKMARK\"" &&
	grep "expired" out.err
'

test_expect_success 'an ERROR 410 event: relist, nothing repeated, then live again' '
	kw_start out -n c configmaps &&
	test_wait_for 20 has 1 out ".type == \"BOOKMARK\"" &&
	ksim_admin error-watches &&
	test_wait_for 20 grep -q expired out.err &&
	cm c c5 &&
	test_wait_for 20 has 1 out ".object.metadata.name == \"c5\"" &&
	sleep 1 &&
	kw_stop out &&
	summary_after out >after &&
	echo "ADDED ConfigMap c5" >after.expect &&
	test_cmp after.expect after
'

test_expect_success 'label and field selectors, global and per resource' '
	cm d l1 "{\"app\":\"x\"}" && cm d l2 "{\"app\":\"y\"}" &&
	for s in s1 s2; do
		api POST /api/v1/namespaces/d/secrets \
			"{\"metadata\":{\"name\":\"$s\",\"labels\":{\"app\":\"x\"}},\"data\":{\"k\":\"dg==\"}}" >/dev/null || return 1
	done &&
	kw_start out -n d -l app=x configmaps "secrets:f=metadata.name=s2" "secrets@d:l=:f=metadata.name=s1" &&
	test_wait_for 20 has 1 out ".type == \"BOOKMARK\"" &&
	cm_patch d l2 "{\"metadata\":{\"labels\":{\"app\":\"x\"}}}" &&
	cm_patch d l1 "{\"metadata\":{\"labels\":{\"app\":\"z\"}}}" &&
	api PATCH /api/v1/namespaces/d/secrets/s2 "{\"data\":{\"k\":\"dzI=\"}}" application/merge-patch+json >/dev/null &&
	test_wait_for 20 has 1 out ".type == \"MODIFIED\" and .object.metadata.name == \"s2\"" &&
	test_wait_for 20 has 1 out ".type == \"DELETED\" and .object.metadata.name == \"l1\"" &&
	test_wait_for 20 has 1 out ".type == \"ADDED\" and .object.metadata.name == \"l2\"" &&
	sleep 0.5 &&
	kw_stop out &&
	summary_before out | sort >before &&
	printf "ADDED ConfigMap l1\nADDED Secret s1\nADDED Secret s2\n" >before.expect &&
	test_cmp before.expect before &&
	summary_after out | sort >after &&
	printf "ADDED ConfigMap l2\nDELETED ConfigMap l1\nMODIFIED Secret s2\n" >after.expect &&
	test_cmp after.expect after
'

# ksim refuses it in the streaming list, then in the paged LIST kwatch falls
# back to: one refusal, one line.
test_expect_success 'a selector the server refuses (400): exit 100, logged once' '
	test_expect_code 100 timeout 30 kwatch -n d "configmaps:l=a b" >out 2>out.err &&
	test_cmp /dev/null out &&
	jq -r "[.level, .msg] | @tsv" out.err >msgs &&
	test $(wc -l <msgs) = 1 &&
	grep "^error	unable to list .configmaps:l=a b.: unable to parse requirement" msgs &&
	test_expect_code 100 timeout 30 kwatch -n d --field-selector nosuch=1 secrets >out 2>out.err &&
	test_cmp /dev/null out &&
	jq -r "[.level, .msg] | @tsv" out.err >msgs &&
	test $(wc -l <msgs) = 1 &&
	grep "^error	unable to list .secrets.: field label not supported: nosuch" msgs
'

test_expect_success '--once: several resources and namespaces, one bookmark last, exit 0' '
	timeout 30 kwatch --once "configmaps@*" secrets@d namespaces >out 2>out.err &&
	api GET /api/v1/configmaps | jq -r ".items[].metadata | .namespace + \"/\" + .name" | sort >cm.expect &&
	jq -r "select(.type != \"BOOKMARK\" and .object.kind == \"ConfigMap\") | .object.metadata | .namespace + \"/\" + .name" out | sort >cm &&
	test_cmp cm.expect cm &&
	has 2 out ".object.kind == \"Secret\"" &&
	has 1 out ".type == \"BOOKMARK\"" &&
	tail -n 1 out | jq -e ".type == \"BOOKMARK\"" &&
	no_duplicates out
'

# Whole objects from a watch stream are written as the server sent them, their
# managedFields cut, never parsed; --project "." parses and writes each one.
test_expect_success 'objects passed on as their text: the bytes a parse and a write give, managedFields cut or kept' '
	timeout 30 kwatch --once "configmaps@*" secrets@d namespaces >text.out 2>text.err &&
	timeout 30 kwatch --once --project . "configmaps@*" secrets@d namespaces >parsed.out 2>parsed.err &&
	sort text.out >text.sorted && sort parsed.out >parsed.sorted &&
	test_cmp parsed.sorted text.sorted &&
	! grep managedFields text.out &&
	timeout 30 kwatch --once --no-strip-managed-fields "configmaps@*" >text.out 2>text.err &&
	timeout 30 kwatch --once --no-strip-managed-fields --project . "configmaps@*" >parsed.out 2>parsed.err &&
	sort text.out >text.sorted && sort parsed.out >parsed.sorted &&
	test_cmp parsed.sorted text.sorted &&
	grep -c managedFields text.out >n &&
	test $(cat n) -gt 0
'

test_expect_success '--keep reads the fields kept from the text: the bytes a parse gives' '
	for keep in metadata.labels,data metadata,data.v,metadata.name data.v.x,status.phase,metadata.annotations.a
	do
		KOP_STATS_FD=5 timeout 30 kwatch --once --watch-list always --keep "$keep" "configmaps@*" secrets@d \
			namespaces >text.out 2>text.err 5>text.stats &&
		KOP_STATS_FD=5 timeout 30 kwatch --once --watch-list always --keep "$keep" --project . "configmaps@*" \
			secrets@d namespaces >parsed.out 2>parsed.err 5>parsed.stats &&
		sort text.out >text.sorted && sort parsed.out >parsed.sorted &&
		test_cmp parsed.sorted text.sorted &&
		! grep managedFields text.out &&
		n=$(grep -c "^{\"type\":\"ADDED\"" text.out) && test $n -gt 3 &&
		: none read whole by the one, each by the other &&
		tail -n 1 text.stats | jq -e "[.metrics[] | select(.name == \"kwatch_objects_parsed_total\") | .value] == [0]" &&
		tail -n 1 parsed.stats | jq -e --argjson n $n \
			"[.metrics[] | select(.name == \"kwatch_objects_parsed_total\") | .value] == [\$n]" || return 1
	done
'

test_expect_success '--no-initial: only the bookmark, then changes' '
	kw_start out --no-initial -n c configmaps &&
	test_wait_for 20 has 1 out ".type == \"BOOKMARK\"" &&
	cm c c6 &&
	test_wait_for 20 has 1 out ".object.metadata.name == \"c6\"" &&
	kw_stop out &&
	has 2 out "true"
'

test_expect_success 'a silent watch is restarted after --idle-timeout, and loses nothing' '
	kw_start out --idle-timeout 1s -n e configmaps &&
	test_wait_for 20 has 1 out ".type == \"BOOKMARK\"" &&
	test_wait_for 20 grep -q "no news from" out.err &&
	cm e i1 &&
	test_wait_for 20 has 1 out ".object.metadata.name == \"i1\"" &&
	sleep 1 &&
	kw_stop out &&
	has 2 out "true"
'

test_expect_success 'backpressure: a stdout nobody reads blocks kwatch; then everything comes, once' '
	i=1 &&
	big=$(printf "%01000d" 0) &&
	while test $i -le 300; do
		api POST /api/v1/namespaces/f/configmaps \
			"{\"metadata\":{\"name\":\"p$i\"},\"data\":{\"v\":\"$big\"}}" >/dev/null || return 1
		i=$((i + 1))
	done &&
	rm -f fifo && mkfifo fifo &&
	{ timeout 60 kwatch -n f configmaps >fifo 2>bp.err & echo $! >bp.pid; } &&
	test_when_finished "kill $(cat bp.pid) 2>/dev/null; :" &&
	exec 5<fifo &&
	test_wait_for 10 kw_pid bp &&
	test_wait_for 10 grep -q pipe /proc/$(cat bp.kwpid)/wchan &&
	grep "^State:.*sleeping" /proc/$(cat bp.kwpid)/status &&
	timeout 20 head -n 301 <&5 >out &&
	exec 5<&- &&
	has 300 out ".type == \"ADDED\"" &&
	tail -n 1 out | jq -e ".type == \"BOOKMARK\"" &&
	no_duplicates out
'

test_expect_success '--keep: only the fields kept; a change that leaves them alone is not written, live or after a relist' '
	api POST /api/v1/namespaces "{\"metadata\":{\"name\":\"k\"}}" >/dev/null &&
	cm k k1 "{\"app\":\"x\"}" && cm k k2 &&
	kw_start kout -n k --keep metadata.labels,data configmaps &&
	test_wait_for 20 has 1 kout ".type == \"BOOKMARK\"" &&
	has 1 kout ".object == {metadata: {labels: {app: \"x\"}, name: \"k1\", namespace: \"k\"}, data: {v: \"1\"}, apiVersion: \"v1\", kind: \"ConfigMap\"}" &&
	has 1 kout ".object == {metadata: {labels: {}, name: \"k2\", namespace: \"k\"}, data: {v: \"1\"}, apiVersion: \"v1\", kind: \"ConfigMap\"}" &&
	cm_patch k k1 "{\"metadata\":{\"annotations\":{\"a\":\"1\"}}}" &&
	cm_patch k k1 "{\"data\":{\"v\":\"2\"}}" &&
	cm_patch k k2 "{\"metadata\":{\"annotations\":{\"a\":\"1\"}}}" &&
	api DELETE /api/v1/namespaces/k/configmaps/k2 >/dev/null &&
	test_wait_for 20 has 1 kout ".type == \"DELETED\"" &&
	summary_after kout >after &&
	printf "MODIFIED ConfigMap k1\nDELETED ConfigMap k2\n" >after.expect &&
	test_cmp after.expect after &&
	has 1 kout ".type == \"MODIFIED\" and .object == {metadata: {labels: {app: \"x\"}, name: \"k1\", namespace: \"k\"}, data: {v: \"2\"}, apiVersion: \"v1\", kind: \"ConfigMap\"}" &&
	has 1 kout ".type == \"DELETED\" and .object == {metadata: {labels: {}, name: \"k2\", namespace: \"k\"}, data: {v: \"1\"}, apiVersion: \"v1\", kind: \"ConfigMap\"}" &&
	kill -STOP $(cat kout.kwpid) &&
	ksim_admin cut-watches &&
	cm_patch k k1 "{\"metadata\":{\"annotations\":{\"a\":\"2\"}}}" &&
	cm k k3 &&
	ksim_admin compact &&
	kill -CONT $(cat kout.kwpid) &&
	test_wait_for 20 has 1 kout ".object.metadata.name == \"k3\"" &&
	test_wait_for 20 grep -q expired kout.err &&
	cm_patch k k1 "{\"data\":{\"v\":\"3\"}}" &&
	test_wait_for 20 has 1 kout ".object.data.v == \"3\"" &&
	kw_stop kout &&
	summary_after kout >after &&
	printf "MODIFIED ConfigMap k1\nDELETED ConfigMap k2\nADDED ConfigMap k3\nMODIFIED ConfigMap k1\n" >after.expect &&
	test_cmp after.expect after
'

test_expect_success 'RESOURCE:k=FIELDS: per resource (empty: whole objects); keys with dots; a bad list is a usage error' '
	cm k k4 "{\"app.kubernetes.io/name\":\"n\",\"other\":\"o\"}" &&
	timeout 20 kwatch --once --keep data "configmaps@k:f=metadata.name=k4:k=metadata.labels.app\.kubernetes\.io/name" \
		"configmaps@k:f=metadata.name=k4:k=" >out 2>err &&
	has 1 out ".object == {metadata: {labels: {\"app.kubernetes.io/name\": \"n\"}, name: \"k4\", namespace: \"k\"}, apiVersion: \"v1\", kind: \"ConfigMap\"}" &&
	has 1 out ".object.metadata.uid and .object.data.v == \"1\" and .object.metadata.labels.other == \"o\"" &&
	test_expect_code 100 kwatch --once --kubeconfig /nonexistent --keep "a..b" configmaps 2>err &&
	grep -q "invalid --keep: .a..b.: an empty key" err &&
	test_expect_code 100 kwatch --once --kubeconfig /nonexistent "configmaps:k=a," 2>err &&
	grep -q "invalid :k= in" err
'

test_expect_success 'a --project failing on a Secret: logged without what jq quoted of its data' '
	api POST /api/v1/namespaces/default/secrets \
		"{\"metadata\":{\"name\":\"s4\"},\"data\":{\"password\":\"UzNjcjN0\"}}" >/dev/null &&
	timeout 20 kwatch --once --project "error(.data)" "secrets@default:f=metadata.name=s4" >out 2>err &&
	grep -q "unable to project the ADDED event of Secret .default/s4.: the jq error on a Secret is not logged" err &&
	! grep -q UzNjcjN0 err &&
	cm default c4 &&
	timeout 20 kwatch --once --project "error(.data)" "configmaps@default:f=metadata.name=c4" >out 2>err &&
	grep -q "unable to project the ADDED event of ConfigMap .default/c4.: {" err
'

test_expect_success 'a namespace that is not one is a usage error, before any request' '
	for arg in cm@ "cm@default@x" cm@Default "cm@-x"
	do
		test_expect_code 100 kwatch --once --kubeconfig /nonexistent "$arg" 2>err &&
		grep -q "is not a namespace name" err || return 1
	done
'

test_expect_success 'stop ksim' '
	ksim_stop
'

test_done
