#!/bin/sh
test_description='kwatch on servers without streaming lists: ksim refusing them as kube-apiserver does
(--watch-list refuse-storage, gate-off), byte for byte as recorded; the same output as with streaming
(initial state, live changes, resume after a cut, relist after 410), the fallback said once;
--watch-list=always and never; a stalled streaming list; the recorded refusal replayed'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"

REFUSED="$TEST_DATA/recordings/watch/watchlist-refused-etcd34.http.txt"
GATE_OFF="$TEST_DATA/recordings/watch/watchlist-gate-off.http.txt"
STREAM_Q="watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"
REFUSED_MSG="a watch stream was requested by the client but the required storage feature RequestWatchProgress is disabled"
GATE_MSG="ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled"

api () { # METHOD PATH [BODY [CONTENT-TYPE]]: the answer on stdout; fails on HTTP errors
	if test $# -ge 3; then
		curl -sS -f -X "$1" -H "Content-Type: ${4:-application/json}" --data-binary "$3" "$KSIM_URL$2"
	else
		curl -sS -f -X "$1" "$KSIM_URL$2"
	fi
}
cm () { # NAMESPACE NAME
	api POST "/api/v1/namespaces/$1/configmaps" "{\"metadata\":{\"name\":\"$2\"},\"data\":{\"v\":\"1\"}}" >/dev/null
}
cm_patch () { # NAMESPACE NAME VALUE
	api PATCH "/api/v1/namespaces/$1/configmaps/$2" "{\"data\":{\"v\":\"$3\"}}" application/merge-patch+json >/dev/null
}
has () { # N FILE JQ-CONDITION: N lines of FILE match
	test "$(jq -s "map(select($3)) | length" "$2" 2>/dev/null)" = "$1"
}
# kwatch in the background, output in $1, its log in $1.err; $1.kwpid is kwatch itself
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
kw_stop () { # SIGTERM: kwatch must end with 0
	kill -TERM $(cat "$1.kwpid") && wait $(cat "$1.pid")
}
# "TYPE name v" per event: the initial state sorted, "--", the events after it
# in order, except the relist's (after the line "relist" is put in), sorted
summary () {
	jq -r "[.type, .object.metadata.name, (.object.data.v // \"-\")] | join(\" \")" "$1" >"$1.lines" &&
	sed "/^BOOKMARK /,\$d" "$1.lines" | sort &&
	echo -- &&
	sed "1,/^BOOKMARK /d" "$1.lines" | sed -n "1,4p" &&
	echo -- &&
	sed "1,/^BOOKMARK /d" "$1.lines" | sed "1,4d" | sort
}
no_duplicates () {
	jq -r "select(.type != \"BOOKMARK\") | [.type, .object.metadata.uid, .object.metadata.resourceVersion] | join(\" \")" \
		"$1" | sort | uniq -d >dups &&
	! test -s dups
}
# the body of a recorded answer (after the empty line ending its headers)
recorded_body () {
	sed "1,/^$(printf '\r')\$/d" "$1"
}
header () { # FILE NAME: the value of a header, without its CR
	sed -n "s/^$2: *//Ip" "$1" | tr -d "\r"
}

# The expected summary: what a streaming kwatch gives, and every mode must.
cat >summary.expect <<-\EOF
ADDED c1 1
ADDED c2 1
--
ADDED c3 1
MODIFIED c1 2
DELETED c2 1
ADDED c4 1
--
ADDED c5 1
DELETED c3 -
MODIFIED c4 2
EOF

# The lifecycle of one watch: initial state, live changes, a cut, a 410 and its relist.
lifecycle () {
	mode=$1
	api POST /api/v1/namespaces "{\"metadata\":{\"name\":\"w\"}}" >/dev/null &&
	cm w c1 && cm w c2 &&
	kw_start $mode.out -n w -v configmaps &&
	test_wait_for 20 has 1 $mode.out ".type == \"BOOKMARK\"" &&
	cm w c3 &&
	cm_patch w c1 2 &&
	api DELETE /api/v1/namespaces/w/configmaps/c2 >/dev/null &&
	test_wait_for 20 has 1 $mode.out ".type == \"DELETED\" and .object.metadata.name == \"c2\"" &&
	ksim_admin cut-watches &&
	cm w c4 &&
	test_wait_for 20 has 1 $mode.out ".object.metadata.name == \"c4\"" &&
	kill -STOP $(cat $mode.out.kwpid) &&
	ksim_admin cut-watches &&
	api DELETE /api/v1/namespaces/w/configmaps/c3 >/dev/null &&
	cm_patch w c4 2 &&
	cm w c5 &&
	ksim_admin compact &&
	kill -CONT $(cat $mode.out.kwpid) &&
	test_wait_for 20 has 1 $mode.out ".type == \"ADDED\" and .object.metadata.name == \"c5\"" &&
	test_wait_for 20 has 1 $mode.out ".type == \"DELETED\" and .object.metadata.name == \"c3\"" &&
	test_wait_for 20 has 1 $mode.out ".type == \"MODIFIED\" and .object.metadata.name == \"c4\"" &&
	kw_stop $mode.out &&
	summary $mode.out >$mode.summary &&
	test_cmp summary.expect $mode.summary &&
	no_duplicates $mode.out &&
	grep -q "expired" $mode.out.err &&
	grep -q "resuming at resourceVersion" $mode.out.err &&
	jq -r "select(.msg | startswith(\"GET \")) | .msg" $mode.out.err >$mode.requests
}

# ---- a server that serves streaming lists: the reference ------------------------------

# Every ksim here is a bare API server (--no-simulate): the simulated controllers would
# add objects (a kube-root-ca.crt ConfigMap in every namespace) to the streams compared.
ksim_start -v --no-simulate

test_expect_success 'serve: initial state, live changes, a cut, a 410; streaming lists only' '
	lifecycle serve &&
	test $(grep -c "sendInitialEvents=true" serve.requests) = 2 &&
	! grep "limit=500" serve.requests &&
	! grep "streaming list" serve.out.err
'

test_expect_success '--watch-list=never (and KOP_WATCH_LIST=never): paged LISTs, never sendInitialEvents' '
	timeout 20 kwatch -n w -v --once --watch-list=never configmaps >never.out 2>never.out.err &&
	KOP_WATCH_LIST=never timeout 20 kwatch -n w -v --once configmaps >never-env.out 2>never-env.err &&
	test_cmp never.out never-env.out &&
	jq -r "select(.msg | startswith(\"GET \")) | .msg" never.out.err never-env.err >never.requests &&
	test $(grep -c "limit=500" never.requests) = 2 &&
	! grep sendInitialEvents never.requests &&
	jq -r "[.type, .object.metadata.name] | join(\" \")" never.out >never.summary &&
	printf "ADDED c1\nADDED c4\nADDED c5\nBOOKMARK \n" >never.expect &&
	test_cmp never.expect never.summary &&
	test_expect_code 100 kwatch --watch-list sometimes configmaps 2>bad.err &&
	grep "invalid --watch-list .sometimes." bad.err &&
	test_expect_code 100 env KOP_WATCH_LIST=sometimes kwatch configmaps 2>bad.err &&
	grep "invalid KOP_WATCH_LIST .sometimes." bad.err
'

# ksim's stallWatches fault holds every watch without a byte: the streaming
# list never reaches its bookmark, the paged LIST is no watch.
test_expect_success 'a streaming list that stalls before its bookmark falls back once --request-timeout is up' '
	curl -sS -f -m 10 -X POST -d "{\"stallWatches\": true}" "$KSIM_URL/ksim/faults" >/dev/null &&
	test_when_finished "curl -sS -m 10 -X POST -d \"{\\\"stallWatches\\\": false}\" \"$KSIM_URL/ksim/faults\" >/dev/null" &&
	kw_start stall.out -n w -v --request-timeout 2s configmaps &&
	test_wait_for 20 has 1 stall.out ".type == \"BOOKMARK\"" &&
	curl -sS -f -m 10 -X POST -d "{\"stallWatches\": false}" "$KSIM_URL/ksim/faults" >/dev/null &&
	cm w c6 &&
	test_wait_for 20 has 1 stall.out ".object.metadata.name == \"c6\"" &&
	kw_stop stall.out &&
	jq -r "[.type, .object.metadata.name] | join(\" \")" stall.out >stall.summary &&
	printf "ADDED c1\nADDED c4\nADDED c5\nBOOKMARK \nADDED c6\n" >stall.expect &&
	test_cmp stall.expect stall.summary &&
	jq -r "select(.msg | contains(\"streaming list\")) | [.level, .msg] | @tsv" stall.out.err >stall.msgs &&
	printf "info\tstreaming list of %s failed before its initial state was complete (no initial-events-end bookmark within 2000 ms): read with paged LISTs and watches from now on\n" "'\''configmaps'\''" >stall.msgs.expect &&
	test_cmp stall.msgs.expect stall.msgs
'

# Custom resources: field selectors other than metadata.name and
# metadata.namespace need the CRD's selectableFields (1.31 beta, 1.32 GA);
# ksim refuses them as a server without them does. One refusal, one error.
test_expect_success 'a field selector refused on a custom resource (400): exit 100, said once' '
	kubectl=/usr/lib/google-cloud-sdk/bin/kubectl.1.27 &&
	{ test -x $kubectl || kubectl=$(command -v kubectl); } &&
	timeout 30 $kubectl apply -f "$PROJECT_ROOT/deploy/crd.yaml" >crd.out &&
	timeout 30 $kubectl wait --for=condition=Established crd/iotservices.cp.iot.sap --timeout=10s >/dev/null &&
	test_expect_code 100 timeout 30 kwatch -n w "iotservices:f=spec.core.image=x" >cr.out 2>cr.err &&
	test_cmp /dev/null cr.out &&
	jq -r "[.level, .msg] | @tsv" cr.err >cr.msgs &&
	printf "error\tunable to list %s: field label not supported: spec.core.image\n" \
		"'\''iotservices:f=spec.core.image=x'\''" >cr.msgs.expect &&
	test_cmp cr.msgs.expect cr.msgs &&
	timeout 30 kwatch -n w --once "iotservices:f=metadata.name=x" >cr-name.out 2>cr-name.err &&
	jq -r .type cr-name.out >cr-name.types &&
	echo BOOKMARK >cr-name.expect &&
	test_cmp cr-name.expect cr-name.types
'

test_expect_success 'stop ksim' '
	ksim_stop
'

# ---- servers that refuse them, each way ------------------------------------------------

for mode in refuse-storage gate-off; do
	ksim_start --no-simulate -v --watch-list $mode
	case $mode in
	refuse-storage) rec=$REFUSED code=500 msg=$REFUSED_MSG ;;
	gate-off) rec=$GATE_OFF code=422 msg=$GATE_MSG ;;
	esac

	# Modulo what must differ: Audit-Id, Date, the priority-and-fairness uids,
	# and the reason phrase, libmicrohttpd's (422 "Unprocessable Content").
	test_expect_success "$mode: ksim answers a streaming list as the recorded kube-apiserver" '
		api POST /api/v1/namespaces "{\"metadata\":{\"name\":\"r\"}}" >/dev/null &&
		curl -sS -m 10 -D $mode.headers -o $mode.body -A iot-operator-test \
			"$KSIM_URL/api/v1/namespaces/r/configmaps?$STREAM_Q" &&
		sed -n 1p "$rec" | cut -d" " -f1-2 >status.expect &&
		sed -n 1p $mode.headers | cut -d" " -f1-2 >status.actual &&
		test_cmp status.expect status.actual &&
		for h in Content-Type Cache-Control Transfer-Encoding Content-Length; do
			header "$rec" $h >h.expect &&
			header $mode.headers $h >h.actual &&
			test_cmp h.expect h.actual || return 1
		done &&
		recorded_body "$rec" >body.expect &&
		test_cmp body.expect $mode.body
	'

	test_expect_success "$mode: the same output as with streaming; the fallback said once, with the reason" '
		lifecycle $mode &&
		test $(grep -c "sendInitialEvents=true" $mode.requests) = 1 &&
		test $(grep -c "limit=500" $mode.requests) = 2 &&
		jq -r "select(.msg | contains(\"streaming list\")) | [.level, .code, .msg] | @tsv" $mode.out.err >$mode.msgs &&
		printf "info\t%s\tstreaming list of %s refused (%s: %s): read with paged LISTs and watches from now on\n" \
			$code "'\''configmaps'\''" $code "$msg" >$mode.msgs.expect &&
		test_cmp $mode.msgs.expect $mode.msgs
	'

	test_expect_success "$mode: --watch-list=always does not fall back: retries with backoff, says why each time" '
		kw_start always.out -n w --watch-list=always configmaps &&
		test_wait_for 20 eval "test \$(grep -c \"does not fall back\" always.out.err) -ge 3" &&
		kill -0 $(cat always.out.kwpid) &&
		kw_stop always.out &&
		test_cmp /dev/null always.out &&
		jq -r "select(.msg | contains(\"does not fall back\")) | [.level, .code] | @tsv" always.out.err | sort -u >always.levels &&
		printf "error\t%s\n" $code >always.levels.expect &&
		test_cmp always.levels.expect always.levels &&
		jq -r "select(.msg | contains(\"does not fall back\")) | .msg" always.out.err >always.msgs &&
		! grep -v -F "($code: $msg)" always.msgs &&
		sed -n "s/.*; again in \([0-9]*\) ms\$/\1/p" always.msgs >delays &&
		test $(wc -l <delays) = $(wc -l <always.msgs) &&
		awk "BEGIN { min = 800 } \$1 < min { bad = 1 } { min = min * 2 > 30000 ? 30000 : min * 2 } END { exit bad }" \
			delays || { cat delays; false; }
	'

	test_expect_success "$mode: stop ksim" '
		ksim_stop
	'
done

# The server log is the proof: gate-off answers a streaming list 422, and
# with never there is none to answer.
test_expect_success 'gate-off: one 422 for the fallback, none with --watch-list=never' '
	ksim_start --no-simulate -v --watch-list gate-off &&
	api POST /api/v1/namespaces "{\"metadata\":{\"name\":\"g\"}}" >/dev/null &&
	cm g c1 &&
	seen=$(wc -l <"$KSIM_LOG") &&
	timeout 20 kwatch -n g --once --watch-list=never configmaps >g-never.out 2>g-never.err &&
	tail -n +$((seen + 1)) "$KSIM_LOG" | jq -c "select(.msg == \"request\" and .code == 422)" >never.422 &&
	test_cmp /dev/null never.422 &&
	seen=$(wc -l <"$KSIM_LOG") &&
	timeout 20 kwatch -n g --once configmaps >g-auto.out 2>g-auto.err &&
	test_cmp g-never.out g-auto.out &&
	tail -n +$((seen + 1)) "$KSIM_LOG" | jq -r "select(.msg == \"request\" and .code == 422) | .path" >auto.422 &&
	echo /api/v1/namespaces/g/configmaps >auto.422.expect &&
	test_cmp auto.422.expect auto.422 &&
	ksim_stop
'

# ---- older servers: 1.19-1.26 refuse resourceVersionMatch on a watch; older
# ones (and aggregated API servers built on them) ignore both parameters and
# serve a plain watch: the initial state, but never the bookmark ending it.

test_expect_success 'old (1.19-1.26): 422 on resourceVersionMatch, the fallback said with it' '
	ksim_start --no-simulate --watch-list old &&
	api POST /api/v1/namespaces "{\"metadata\":{\"name\":\"o\"}}" >/dev/null &&
	cm o c1 && cm o c2 &&
	ksim_curl -o old.body -w "%{http_code}\n" "/api/v1/namespaces/o/configmaps?$STREAM_Q" >old.code &&
	echo 422 >old.code.expect &&
	test_cmp old.code.expect old.code &&
	jq -r .message old.body >old.msg &&
	echo "ListOptions.meta.k8s.io \"\" is invalid: [resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch, resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided]" >old.msg.expect &&
	test_cmp old.msg.expect old.msg &&
	kw_start old.out -n o configmaps &&
	test_wait_for 20 has 1 old.out ".type == \"BOOKMARK\"" &&
	cm o c3 &&
	test_wait_for 20 has 1 old.out ".object.metadata.name == \"c3\"" &&
	kw_stop old.out &&
	jq -r "[.type, .object.metadata.name] | join(\" \")" old.out >old.summary &&
	printf "ADDED c1\nADDED c2\nBOOKMARK \nADDED c3\n" >old.expect &&
	test_cmp old.expect old.summary &&
	jq -r "select(.msg | contains(\"streaming list\")) | .msg" old.out.err >old.msgs &&
	test $(wc -l <old.msgs) = 1 &&
	grep -F "refused (422: $(cat old.msg)): read with paged LISTs" old.msgs &&
	ksim_stop
'

test_expect_success 'ignore (older): a plain watch without the bookmark stalls, then falls back; nothing twice' '
	ksim_start --no-simulate --watch-list ignore &&
	api POST /api/v1/namespaces "{\"metadata\":{\"name\":\"i\"}}" >/dev/null &&
	cm i c1 && cm i c2 &&
	kw_start ignore.out -n i --request-timeout 2s configmaps &&
	test_wait_for 20 has 1 ignore.out ".type == \"BOOKMARK\"" &&
	cm i c3 &&
	test_wait_for 20 has 1 ignore.out ".object.metadata.name == \"c3\"" &&
	kw_stop ignore.out &&
	jq -r "[.type, .object.metadata.name] | join(\" \")" ignore.out >ignore.summary &&
	printf "ADDED c1\nADDED c2\nBOOKMARK \nADDED c3\n" >ignore.expect &&
	test_cmp ignore.expect ignore.summary &&
	jq -r "select(.msg | contains(\"streaming list\")) | .msg" ignore.out.err >ignore.msgs &&
	test $(wc -l <ignore.msgs) = 1 &&
	grep "failed before its initial state was complete (no initial-events-end bookmark within 2000 ms)" ignore.msgs &&
	ksim_stop
'

# ---- the recorded refusal itself, replayed ------------------------------------------------

test_expect_success 'the recorded refusal (HTTP 200, one ERROR event, the end) replayed: LIST, then the state' '
	for f in api api-v1 apis; do
		cp "$TEST_DATA/recordings/discovery/$f.json" . || return 1
	done &&
	recorded_body "$REFUSED" >refused.jsonl &&
	cat >list.json <<-\EOF &&
	{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"42"},"items":[{"metadata":{"name":"a","namespace":"kw","uid":"u-a","resourceVersion":"41"},"data":{"v":"1"}}]}
	EOF
	cat >routes.jsonl <<-\EOF &&
	{"path":"/api","file":"api.json"}
	{"path":"/apis","file":"apis.json"}
	{"path":"/api/v1","file":"api-v1.json"}
	{"path":"/api/v1/namespaces/kw/configmaps","query":"sendInitialEvents","file":"refused.jsonl"}
	{"path":"/api/v1/namespaces/kw/configmaps","query":"limit=500","file":"list.json"}
	EOF
	{ timeout 60 "$KOP_TEST_TOOL" canned-server routes.jsonl . >server.log 2>&1 & echo $! >server.pid; } &&
	test_when_finished "kill \$(cat server.pid)" &&
	test_wait_for 10 test -s port &&
	printf "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: \"http://127.0.0.1:%s\"}\nusers:\n- name: u\n  user: {token: t}\ncontexts:\n- name: x\n  context: {cluster: c, user: u, namespace: kw}\ncurrent-context: x\n" \
		$(cat port) >canned.kubeconfig &&
	KUBECONFIG=$PWD/canned.kubeconfig timeout 20 kwatch --once configmaps >canned.out 2>canned.err &&
	jq -r "[.type, .object.metadata.name, .object.metadata.resourceVersion] | join(\" \")" canned.out >canned.summary &&
	printf "ADDED a 41\nBOOKMARK  42\n" >canned.expect &&
	test_cmp canned.expect canned.summary &&
	grep "^GET /api/v1/namespaces/kw/configmaps?" requests >req &&
	test $(wc -l <req) = 2 &&
	sed -n 1p req | grep -q sendInitialEvents=true &&
	sed -n 2p req | grep -q limit=500 &&
	jq -r "select(.msg | contains(\"streaming list\")) | [.level, .msg] | @tsv" canned.err >canned.msgs &&
	printf "info\tstreaming list of %s refused (500: %s): read with paged LISTs and watches from now on\n" \
		"'\''configmaps'\''" "$REFUSED_MSG" >canned.msgs.expect &&
	test_cmp canned.msgs.expect canned.msgs
'

test_done
