#!/bin/sh
test_description='valgrind: the unit-level test-tool commands and ireconcile on recorded files, no error, no definite leak'
. "${0%/*}/test-lib.sh"

command -v valgrind >/dev/null || test_skip_all 'valgrind is not installed (make check installs it: scripts/deps.sh --test)'
# valgrind and ASan cannot share a process: the normal pass runs this.
test_normal_pass_only 'valgrind checks the normal build (the sanitizer build has its own checks)'

T=$TEST_DIRECTORY

# vg CODE NAME COMMAND...: COMMAND exits CODE under valgrind, and valgrind
# saw no memory error and no definitely lost block (vg-NAME.log says which).
vg () {
	vg_code=$1 vg_name=$2
	shift 2
	vg_rc=0
	valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite \
		--show-leak-kinds=definite --track-origins=no --log-file="vg-$vg_name.log" "$@" >"$vg_name.out" 2>"$vg_name.err" ||
		vg_rc=$?
	if test -s "vg-$vg_name.log" || test "$vg_rc" = 99; then
		echo "valgrind: $vg_name ($*):"
		head -n 60 "vg-$vg_name.log"
		return 1
	fi
	if test "$vg_rc" != "$vg_code"; then
		echo "$vg_name: exit code $vg_rc, expected $vg_code ($*)"
		tail -n 5 "$vg_name.err"
		return 1
	fi
}

test_expect_success 'jsonl: a recorded watch stream and malformed lines' '
	vg 0 jsonl-rec "$KOP_TEST_TOOL" jsonl <"$T/t2104-iotservice-ireconcile/03-ready.in.jsonl" &&
	printf "{\"a\":1}\n\n[1,2]\n{\"b\":\n\"x\"}\n" >bad.jsonl &&
	vg 1 jsonl-bad "$KOP_TEST_TOOL" jsonl <bad.jsonl
'

test_expect_success 'cel: every case of t0206 and the deep-nesting refusals' '
	grep -v "^#" "$T/t0206-cel/cases.txt" | cut -f1 >cel-exprs &&
	awk "BEGIN { for (i = 0; i < 500; i++) printf \"(\"; print \"1\"; for (i = 0; i < 500; i++) printf \"1 + \"; print \"1\" }" >>cel-exprs &&
	vg 0 cel "$KOP_TEST_TOOL" cel "$(cat "$T/t0206-cel/vars.json")" <cel-exprs
'

test_expect_success 'kop_json_read on a thread that then exits: its shared strings go with it' '
	vg 0 json-read-thread "$KOP_TEST_TOOL" json-read-check --thread <"$T/t2104-iotservice-ireconcile/03-ready.in.jsonl"
'

test_expect_success 'yaml: anchors, several documents, a parse error' '
	vg 0 yaml-anchors "$KOP_TEST_TOOL" yaml "$T/t0101-yaml/anchors.yaml" &&
	vg 0 yaml-multi "$KOP_TEST_TOOL" yaml "$T/t0101-yaml/multi.yaml" &&
	vg 1 yaml-bad "$KOP_TEST_TOOL" yaml "$T/t0101-yaml/bad-indent.yaml"
'

test_expect_success 'kubeconfig and manifests' '
	vg 0 kubeconfig "$KOP_TEST_TOOL" kubeconfig --kubeconfig "$T/t0102-kubeconfig/a.yaml" &&
	vg 0 manifest "$KOP_TEST_TOOL" manifest "$T/t3000-kapply-manifest/dir" &&
	vg 1 manifest-bad "$KOP_TEST_TOOL" manifest "$T/t3000-kapply-manifest/broken.yaml"
'

# patch NAME TOOL FIXTURE KEY: the fixture's .target with its .KEY
patch_case () {
	jq .target "$3" >"$1.target.json" &&
	jq ".$4" "$3" >"$1.patch.json" &&
	vg 0 "$1" "$KOP_TEST_TOOL" "$2" "$1.target.json" "$1.patch.json"
}

test_expect_success 'merge, JSON and strategic merge patches' '
	patch_case merge merge-patch "$T/t0201-merge-patch/02-rfc-add-member.json" patch &&
	patch_case json json-patch "$T/t0202-json-patch/01-rfc-a1-add-member.json" ops &&
	f="$T/t0202-json-patch/09-rfc-a9-test-error.json" &&
	jq .target "$f" >err.target.json && jq .ops "$f" >err.ops.json &&
	vg 1 json-err "$KOP_TEST_TOOL" json-patch err.target.json err.ops.json &&
	patch_case smp smp "$T/t0203-strategic-merge-patch/02-env-merge-and-add.json" patch
'

test_expect_success 'server-side apply steps' '
	vg 0 ssa-create "$KOP_TEST_TOOL" ssa-steps "$T/t0204-server-side-apply/01-create-deployment.json" &&
	vg 0 ssa-conflict "$KOP_TEST_TOOL" ssa-steps "$T/t0204-server-side-apply/03-conflict-then-force.json"
'

test_expect_success 'schema: defaults, pruning, validation' '
	# one fixture per operation (default, prune, validate)
	for f in "$T"/t0205-schema/02-*.json "$T"/t0205-schema/05-*.json "$T"/t0205-schema/08-*.json; do
		name=schema-$(basename "$f" .json) &&
		op=$(jq -r .op "$f") &&
		jq .schema "$f" >"$name.schema.json" &&
		jq .object "$f" >"$name.object.json" &&
		vg 0 "$name" "$KOP_TEST_TOOL" schema-$op "$name.schema.json" "$name.object.json" || return 1
	done
'

test_expect_success 'render: yaml.v2 output and directives' '
	vg 0 yaml-render "$KOP_TEST_TOOL" yaml-render <"$T/t2101-iotservice-config/scalars.json" &&
	echo "{\"a\":{\"\$fn\":\"md5\",\"arg\":\"x\"},\"b\":{\"\$fn\":\"base64\",\"arg\":\"y\"},\"c\":{\"\$fn\":\"yaml\",\"arg\":{\"k\":[1,\"2\"]}}}" >fn.json &&
	vg 0 fn-resolve "$KOP_TEST_TOOL" fn-resolve <fn.json &&
	jq -nc "{a: (\"x\" * 200 | @base64), b: [(\"\\u00e9t\\u00e9 \" * 40 | @base64), (\"y\" * 200)]}" >pack.json &&
	vg 0 fn-resolve-pack "$KOP_TEST_TOOL" fn-resolve --pack <pack.json
'

test_expect_success 'the watch state machine: live stream, paged fallback, 410' '
	for name in 02-paged-fallback 03-expired-event; do
		vg 0 "watch-$name" "$KOP_TEST_TOOL" watch-sim pods /api/v1/namespaces/n/pods Pod v1 \
			<"$T/t1001-kwatch-machine/$name.in.jsonl" || return 1
	done
'

test_expect_success 'the watch state machine: a shard selector narrowed, then emptied' '
	vg 0 watch-narrowed "$KOP_TEST_TOOL" watch-sim --no-streaming \
		"--shard=shardRange(object.metadata.namespace, '"'"'0x0000000000000000'"'"', '"'"'0x10000000000000000'"'"')" \
		pods /api/v1/pods Pod v1 <"$T/t1001-kwatch-machine/18-shard-narrowed.in.jsonl" &&
	grep -x "= narrow none objects=0" watch-narrowed.out
'

test_expect_success 'shard Leases: replicas joining, leaving, dying and restarting on a flaky API server' '
	cat >shardset.script <<-\EOF &&
	seed 3
	latency 100
	timeout 2000
	flaky 15
	start r1
	start r2
	start r3
	run 30000
	start r4
	run 20000
	stop r1
	kill r2
	restart r3
	run 40000
	flaky 0
	until even 30000
	EOF
	vg 0 shardset "$KOP_TEST_TOOL" shardset-sim <shardset.script &&
	grep "^even after [0-9]* ms: r3=16 r4=16$" shardset.out
'

# pipeline/iotservice's jq costs about 17 s of CPU under valgrind: the
# recorded Deployment rollout (t/data/recordings) through t2003's program
# exercises the same engine in 5.
test_expect_success 'ireconcile: a recorded Deployment rollout' '
	vg 0 ireconcile-rollout ireconcile "$T/t2003-ireconcile-recorded/rollout" \
		<"$T/t2003-ireconcile-recorded/02-mid-rollout.in.jsonl" &&
	test -s ireconcile-rollout.out
'

# --shard with ranges added while running: the Deployment of the other half
# parked, its children dropped; a SHARDS line adds its half (out of the park,
# waiting), its children listed again, the bookmark: one reconcile, which
# writes what the unsharded run writes.
test_expect_success 'ireconcile --shard: ranges added, a primary parked, then waiting for its list' '
	F="$T/t2003-ireconcile-recorded/02-mid-rollout.in.jsonl" &&
	mkdir -p sharded && cp -R "$T/t2003-ireconcile-recorded/rollout" sharded/ &&
	sed -i "s|namespace: rec-deploy}|namespace: rec-deploy, shardKey: \"{name}\"}|" sharded/rollout/program.yml &&
	grep -F "shardKey" sharded/rollout/program.yml &&
	h0=$("$KOP_TEST_TOOL" shard-split namespace 0 2) && h1=$("$KOP_TEST_TOOL" shard-split namespace 1 2) &&
	case $("$KOP_TEST_TOOL" shard-hash web) in [0-7]*) ;; *) false ;; esac &&
	{
		cat "$F" &&
		jq -n -c --arg a "$h0" "{type: \"SHARDS\", add: \$a}" &&
		grep -v "\"kind\":\"Deployment\",\"apiVersion\":\"apps/v1\",\"metadata\":{\"name\":\"web\"" "$F" | grep -v BOOKMARK &&
		grep BOOKMARK "$F"
	} >gain.in &&
	vg 0 ireconcile-gain ireconcile --shard "$h1" sharded/rollout <gain.in &&
	grep "the initial lists of the ranges added are in: reconciling their 1 primaries" ireconcile-gain.err &&
	ireconcile "$T/t2003-ireconcile-recorded/rollout" <"$F" >plain.out &&
	test -s plain.out &&
	sort plain.out >expect && sort ireconcile-gain.out >actual && test_cmp expect actual
'

# A render program with projected children: fingerprinted, compressed
# children (a dictionary per kind), the render answer dropped once every
# child is held, then computed again when one changes (t2004's third test,
# each step sent once the one before is reconciled, so that each is its own
# reconcile: under valgrind ireconcile takes seconds to start; each status
# written in its own, --status-interval 0).
test_expect_success 'ireconcile: a render answer dropped and computed again' '
	S="$T/t2004-ireconcile-render" &&
	jq -c "if .object.kind == \"Shape\" then .object.spec.plain = true else . end" "$S/05-shape.jsonl" >plain.jsonl &&
	ireconcile --now 2026-11-22T10:00:00Z "$S/shapes" <plain.jsonl >first.out &&
	jq -c "select(.op == \"apply\") | {type: \"ADDED\", object: (.object
		| .metadata.uid = \"u-\(.metadata.name)\" | .metadata.resourceVersion = \"20\")}" first.out >live.jsonl &&
	test "$(wc -l <live.jsonl)" = 2 &&
	jq -c "select(.object.metadata.name == \"s1-0\") | .type = \"MODIFIED\"
		| .object.metadata.resourceVersion = \"21\" | .object.data.big |= sub(\"49\"; \"94\")" live.jsonl >drift.jsonl &&
	{
		cat plain.jsonl && test_wait_for 120 test_has_reconciles ireconcile-drift.err 1 >&2 &&
		cat live.jsonl && test_wait_for 120 test_has_reconciles ireconcile-drift.err 2 >&2 &&
		cat drift.jsonl && test_wait_for 120 test_has_reconciles ireconcile-drift.err 3 >&2
	} |
		vg 0 ireconcile-drift ireconcile -v --now 2026-11-22T10:00:00Z --status-interval 0 "$S/shapes" &&
	test_reconciled ireconcile-drift.err renderKept applies >actual &&
	printf "%s\n" "[true,2]" "[false,0]" "[true,1]" >expect &&
	test_cmp expect actual
'

# Statuses held: a burst of pods (--settle), then one that only lists more
# pods (--status-interval), written at the end of the input. Each step is
# sent once the one before is reconciled.
test_expect_success 'ireconcile: statuses held for a burst and for the interval, the last written at the end of the input' '
	L="$T/t2002-ireconcile-live" &&
	mkdir -p held && cp -R "$T/t2001-ireconcile-engine/widgets" held/ && cp -R "$PROJECT_ROOT/pipeline/lib" held/lib &&
	for n in a:40 b:41; do
		sed -n 1p "$L/pod.jsonl" | jq -c --arg n "w1-${n%:*}" --arg rv "${n#*:}" ".object.metadata.name = \$n
			| .object.metadata.uid = \"uid-\(\$n)\" | .object.metadata.resourceVersion = \$rv
			| .object.status.phase = \"Running\"" >pod-${n%:*}.jsonl || return 1
	done &&
	{
		cat "$L/create.jsonl" && test_wait_for 120 test_has_reconciles ireconcile-held.err 1 >&2 &&
		cat pod-a.jsonl && test_wait_for 120 test_has_reconciles ireconcile-held.err 2 >&2 &&
		cat pod-b.jsonl && test_wait_for 120 test_has_reconciles ireconcile-held.err 3 >&2
	} |
		WIDGET_TEAM=blue vg 0 ireconcile-held ireconcile -v --now 2026-11-22T10:00:00Z --status-interval 1m held/widgets &&
	test_reconciled ireconcile-held.err statuses >actual &&
	printf "%s\n" "[0]" "[1]" "[0]" "[1]" >expect &&
	test_cmp expect actual &&
	jq -c "select(.op == \"status\") | .object.status.pods" ireconcile-held.out >actual &&
	printf "%s\n" "[\"w1-a\"]" "[\"w1-a\",\"w1-b\"]" >expect &&
	test_cmp expect actual
'

test_done
