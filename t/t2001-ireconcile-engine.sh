#!/bin/sh
test_description='ireconcile: the engine on recorded-style event files (a tiny test program)'
. "${0%/*}/test-lib.sh"

NOW=2026-11-22T10:00:00Z

# The program sits beside a copy of pipeline/lib, as programs under pipeline/ do.
test_expect_success 'setup' '
	mkdir prog &&
	cp -R "$FIXTURES/widgets" prog/ &&
	cp -R "$PROJECT_ROOT/pipeline/lib" prog/lib
'

for in in "$FIXTURES"/*.in.jsonl
do
	name=$(basename "$in" .in.jsonl)
	test_expect_success "golden: $name" '
		WIDGET_TEAM=blue ireconcile --now $NOW prog/widgets <"$in" >$name.out 2>$name.err &&
		test_no_sanitizer_report $name.err &&
		test_cmp_json "$FIXTURES/$name.expect.jsonl" $name.out &&
		jq -c "{level, msg}" <$name.err >$name.log &&
		test_cmp_json "$FIXTURES/$name.expect.log" $name.log
	'
done

test_expect_success 'steady state: a replayed stream writes nothing' '
	test_must_be_empty () { test -f "$1" && ! test -s "$1"; } &&
	test_must_be_empty 02-steady.out &&
	test_must_be_empty 03-steady-replayed.out &&
	test_must_be_empty 07-extra-fields.out
'

# An object is kept as its event line's text (kwatch passes the server's
# bytes), its managedFields cut: the same object again with its managedFields
# elsewhere, or others, is the same text, and nothing new to reconcile for.
test_expect_success 'a child seen again with its managedFields moved or changed: nothing new' '
	sed -n 3p "$FIXTURES/02-steady.in.jsonl" >cm.line &&
	grep "\"managedFields\":\[{\"manager\":\"kubectl\"" cm.line &&
	sed "s/\"managedFields\":\[[^]]*\],//; s/\"metadata\":{/\"metadata\":{\"managedFields\":[{\"manager\":\"x\"}],/" \
		cm.line >cm.moved &&
	! cmp cm.line cm.moved &&
	test $(grep -o managedFields cm.moved | wc -l) = 1 &&
	sed "s/\"palette\":\"none\"/\"palette\":\"some\"/" cm.moved >cm.changed &&
	mkfifo moved.fifo &&
	{ ( cat "$FIXTURES/02-steady.in.jsonl"
	    test_wait_for 30 test_has_reconciles moved.err 1
	    cat cm.moved cm.line cm.moved
	    sleep 1
	    cat cm.changed
	    test_wait_for 30 test_has_reconciles moved.err 2
	  ) >moved.fifo & } &&
	WIDGET_TEAM=blue timeout 60 ireconcile -v --now $NOW prog/widgets <moved.fifo >moved.out 2>moved.err &&
	wait &&
	test_no_sanitizer_report moved.err &&
	test_reconciled moved.err primary applies >actual &&
	printf "[\"blue/w1\",0]\n[\"blue/w1\",1]\n" >expect &&
	test_cmp expect actual &&
	jq -r ".object.data.palette" moved.out >palette &&
	echo none >expect &&
	test_cmp expect palette
'

test_expect_success 'a field the program no longer sets: the object applied again, without it' '
	jq -r "[.op, .object.kind, .object.metadata.name, (.object.data | has(\"old\")),
		.object.metadata.annotations[\"iot-operator/applied\"]] | @tsv" 17-dropped-field.out >actual &&
	jq -r "select(.object.metadata.name == \"color\") | .object.metadata.annotations[\"iot-operator/applied\"]" \
		"$FIXTURES/17-dropped-field.in.jsonl" >was &&
	printf "apply\tConfigMap\tcolor\tfalse\t%s\n" "$(jq -r ".object.metadata.annotations[\"iot-operator/applied\"]" \
		"$FIXTURES/06-drift.expect.jsonl")" >expect &&
	test_cmp expect actual &&
	! grep -qx "$(cut -f5 actual)" was
'

# The stamp is left out of the digest: a program that copies the live
# child's annotations (the stamp among them) into the desired one settles.
test_expect_success 'a program that copies the live annotations: applied once, then steady' '
	cp -R prog/widgets prog/copyann &&
	sed "s|metadata: {name: \"color\", namespace: \$ns}|metadata: {name: \"color\", namespace: \$ns, annotations: (.children[\"ConfigMap.v1\"].color.metadata.annotations // {})}|" \
		prog/widgets/sync.jq >prog/copyann/sync.jq &&
	! cmp prog/widgets/sync.jq prog/copyann/sync.jq &&
	WIDGET_TEAM=blue ireconcile --now $NOW prog/copyann <"$FIXTURES/02-steady.in.jsonl" >copy1.out 2>copy1.err &&
	jq -r "[.op, .object.metadata.name] | @tsv" copy1.out >actual &&
	printf "apply\tcolor\n" >expect && test_cmp expect actual &&
	{
		sed "\$d" "$FIXTURES/02-steady.in.jsonl" &&
		jq -c "{type: \"MODIFIED\", object: (.object | .metadata.uid = \"uid-cm-w1-color\"
			| .metadata.resourceVersion = \"20\")}" copy1.out &&
		tail -n 1 "$FIXTURES/02-steady.in.jsonl"
	} >copy2.in &&
	WIDGET_TEAM=blue ireconcile --now $NOW prog/copyann <copy2.in >copy2.out 2>copy2.err &&
	test_no_sanitizer_report copy2.err &&
	test_cmp /dev/null copy2.out
'

test_expect_success 'a name with a NUL byte: the object skipped, a desired child with one a program error' '
	sed -n 1p "$FIXTURES/02-steady.in.jsonl" | jq -c ".object.metadata.name = \"w1\\u0000x\" | .object.metadata.uid = \"uid-nul\"" >nul.in &&
	cat "$FIXTURES/02-steady.in.jsonl" >>nul.in &&
	WIDGET_TEAM=blue ireconcile --now $NOW prog/widgets <nul.in >nul.out 2>nul.err &&
	test_no_sanitizer_report nul.err &&
	test_cmp /dev/null nul.out &&
	jq -r "select(.level == \"warn\") | .msg" nul.err >actual &&
	echo "line 1: an object whose metadata.name holds a NUL byte; skipped" >expect &&
	test_cmp expect actual &&
	cp -R prog/widgets prog/nul &&
	sed "s|metadata: {name: \"color\", namespace: \$ns}|metadata: {name: \"col\\\\u0000or\", namespace: \$ns}|" \
		prog/widgets/sync.jq >prog/nul/sync.jq &&
	! cmp prog/widgets/sync.jq prog/nul/sync.jq &&
	WIDGET_TEAM=blue ireconcile --now $NOW prog/nul <"$FIXTURES/02-steady.in.jsonl" >nulchild.out 2>nulchild.err &&
	test_cmp /dev/null nulchild.out &&
	grep "desired child 1: its metadata.name holds a NUL byte" nulchild.err
'

# skipped NAME: prog/widgets over NAME.in, which writes nothing (the lines
# that say something skipped), the messages of its warnings in actual
skipped () {
	WIDGET_TEAM=blue ireconcile --now $NOW prog/widgets <$1.in >$1.out 2>$1.err &&
	test_no_sanitizer_report $1.err &&
	test_cmp /dev/null $1.out &&
	jq -r "select(.level == \"warn\") | .msg" $1.err >actual
}

test_expect_success 'a line with a NUL byte is skipped whole, with its column' '
	{ sed -n 1p "$FIXTURES/02-steady.in.jsonl" | tr -d "\n" && printf "\0{\"type\":\"ADDED\"}\n" &&
	  cat "$FIXTURES/02-steady.in.jsonl"; } >nulline.in &&
	skipped nulline &&
	printf "line 1, column %d: a NUL byte, which JSON text cannot hold; skipped\n" \
		$(( $(sed -n 1p "$FIXTURES/02-steady.in.jsonl" | wc -c) )) >expect &&
	test_cmp expect actual
'

# jq counts from the first line it is given (one line, or one kubectl -o json
# value): the message names the line of the input, and the column once.
test_expect_success 'a malformed line is skipped, named by its line and column in the input' '
	{ printf "{\"type\":\"ADDED\",,}\n{\n  \"type\": \"ADDED\",\n  \"object\": x\n}\n" &&
	  cat "$FIXTURES/02-steady.in.jsonl"; } >bad.in &&
	skipped bad &&
	cat >expect <<-\EOF &&
	line 1, column 17: Expected value before ,; skipped
	line 4, column 14: Invalid numeric literal; skipped
	EOF
	tr -d "\047" <actual >actual.noquote &&
	test_cmp expect actual.noquote
'

test_expect_success 'an object without a name (of a kind with a related object of that name) is skipped, said' '
	{ printf "%s\n" "{\"type\":\"ADDED\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"namespace\":\"blue\"}}}" \
		"{\"type\":\"ADDED\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"namespace\":\"blue\",\"name\":7}}}" &&
	  cat "$FIXTURES/02-steady.in.jsonl"; } >noname.in &&
	skipped noname &&
	cat >expect <<-\EOF &&
	line 1: ADDED event with an object without metadata; skipped
	line 2: an object without metadata.name; skipped
	EOF
	test_cmp expect actual
'

test_expect_success 'events before the bookmark are reconciled once, with the latest state' '
	WIDGET_TEAM=blue ireconcile -v --now $NOW prog/widgets \
		<"$FIXTURES/04-collect.in.jsonl" >collect.out 2>collect.err &&
	jq -r "select(.msg | startswith(\"reconciled \")) | .primary" <collect.err >reconciled &&
	echo blue/w1 >expect &&
	test_cmp expect reconciled &&
	jq -r .object.data.color <collect.out >color &&
	echo blue >expect &&
	test_cmp expect color
'

# wait_lines FILE N: until FILE holds N lines (at most 30 s)
wait_lines () {
	wl_i=0
	while test "$(cat "$1" 2>/dev/null | wc -l)" -lt "$2" && test $wl_i -lt 300; do
		sleep 0.1
		wl_i=$((wl_i + 1))
	done
}

# .pending, step by step: the drifted ConfigMap of 06 applied, then a pod
# (the apply not seen yet), then someone else'"'"'s write to the ConfigMap and a
# second pod (not what was applied: applied again), then the ConfigMap as
# applied.
test_expect_success '.pending: an apply on its way until the live object holds it' '
	pod () {
		echo "{\"type\":\"ADDED\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"$1\",\"namespace\":\"blue\",\"uid\":\"uid-$1\",\"resourceVersion\":\"$2\",\"labels\":{\"widget\":\"w1\"}},\"status\":{\"phase\":\"Running\"}}}"
	} &&
	cm () {
		jq -c "select(.object.kind == \"ConfigMap\") | .type = \"MODIFIED\" | .object.metadata.resourceVersion = \"$1\" | $2" \
			"$FIXTURES/06-drift.in.jsonl"
	} &&
	mkfifo pending.fifo &&
	{ ( cat "$FIXTURES/06-drift.in.jsonl"
	    wait_lines pending.out 1
	    pod p1 20
	    wait_lines pending.out 3
	    cm 21 ".object.metadata.annotations = {\"someone\": \"else\"}"
	    pod p2 22
	    wait_lines pending.out 5
	    cm 23 ".object.data.color = \"red\" | del(.object.data.extra)"
	  ) >pending.fifo & } &&
	WIDGET_TEAM=blue timeout 60 ireconcile --now $NOW prog/widgets <pending.fifo >pending.out 2>pending.err &&
	wait &&
	test_no_sanitizer_report pending.err &&
	jq -c "select(.op != \"event\") | [.op, .object.kind, .object.status.pods, .object.status.pending]" pending.out >actual &&
	cat >expect <<-\EOT &&
	["apply","ConfigMap",null,null]
	["status","Widget",["p1"],{"ConfigMap.v1":{"color":true}}]
	["apply","ConfigMap",null,null]
	["status","Widget",["p1","p2"],{"ConfigMap.v1":{"color":true}}]
	["status","Widget",["p1","p2"],null]
	EOT
	test_cmp expect actual
'

# Children created together reconcile their primary once, when the last of
# them is seen, not once each as they land: a widget of size 2 (its finalizer
# on) gets its Namespace and two ConfigMaps; they come back one by one. A
# child it did not create (someone else's, labelled as its) reconciles it at
# once, and so does a create of its own seen while no other is on its way
# (the ConfigMap deleted, applied again). A create whose object never shows
# holds the reconcile LANDED_WAIT_MS (5 s) at most.
landed_widget () {
	jq -c "select(.object.kind == \"Widget\") | .object.spec.size = 2" "$FIXTURES/08-status.in.jsonl" &&
	echo "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Widget\",\"apiVersion\":\"test.example.org/v1\",\"metadata\":{\"resourceVersion\":\"100\",\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}}}}"
}
# landed OUT KIND NAME [TYPE]: the object OUT applied, as the API server sends it back
landed () {
	jq -c --arg k "$2" --arg n "$3" --arg t "${4:-ADDED}" \
		"select(.op == \"apply\" and .object.kind == \$k and .object.metadata.name == \$n)
		| {type: \$t, object: (.object | .metadata.uid = \"uid-\(\$n)\" | .metadata.resourceVersion = \"2\(input_line_number)\")}" \
		"$1" | tail -n 1
}

# landed_applies NAME N...: ireconcile -v reads NAME.fifo (a job of the
# test writes it) into NAME.out and NAME.err; its reconciles applied N...
landed_applies () {
	la_name=$1
	shift
	WIDGET_TEAM=blue timeout 60 ireconcile -v --now $NOW prog/widgets <"$la_name.fifo" >"$la_name.out" 2>"$la_name.err" &&
	wait &&
	test_no_sanitizer_report "$la_name.err" &&
	test_reconciled "$la_name.err" applies >actual &&
	printf "[%s]\n" "$@" >expect &&
	test_cmp expect actual
}

test_expect_success 'children created together: one reconcile, once the last is seen' '
	mkfifo landed.fifo &&
	{ ( landed_widget
	    wait_lines landed.out 3
	    landed landed.out Namespace blue-w1
	    landed landed.out ConfigMap color
	    landed landed.out ConfigMap size
	    sleep 1
	    # someone else'"'"'s, labelled as the widget'"'"'s: at once (pruned)
	    echo "{\"type\":\"ADDED\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"stray\",\"namespace\":\"blue-w1\",\"uid\":\"uid-stray\",\"resourceVersion\":\"300\",\"labels\":{\"test.example.org/widget\":\"w1\",\"test.example.org/team\":\"blue\"}}}}"
	    wait_lines landed.out 4
	    landed landed.out ConfigMap color DELETED
	    wait_lines landed.out 5
	    landed landed.out ConfigMap color
	    sleep 1
	  ) >landed.fifo & } &&
	WIDGET_TEAM=blue timeout 60 ireconcile -v --now $NOW prog/widgets <landed.fifo >landed.out 2>landed.err &&
	wait &&
	test_no_sanitizer_report landed.err &&
	jq -c "[.op, .object.kind, .object.metadata.name]" landed.out >actual &&
	cat >expect <<-\EOT &&
	["apply","Namespace","blue-w1"]
	["apply","ConfigMap","color"]
	["apply","ConfigMap","size"]
	["delete","ConfigMap","stray"]
	["apply","ConfigMap","color"]
	EOT
	test_cmp expect actual &&
	test_reconciled landed.err applies >actual &&
	printf "[3]\n[0]\n[0]\n[1]\n[0]\n" >expect &&
	test_cmp expect actual
'

# The statuses the controllers write as the objects come (here a status on
# a ConfigMap, which no reconcile has compared yet) wait with them for the
# last create: one reconcile still, once the last is seen.
test_expect_success 'a landed child'"'"'s status changing while the other creates are on their way: no reconcile of its own' '
	mkfifo status.fifo &&
	{ ( landed_widget
	    wait_lines status.out 3
	    landed status.out Namespace blue-w1 >ns.json
	    landed status.out ConfigMap color >color.json
	    jq -c ".type = \"MODIFIED\" | .object.metadata.resourceVersion = \"290\" | .object.status = {phase: \"Seen\"}" \
		color.json >color-status.json
	    landed status.out ConfigMap size >size.json
	    cat ns.json color.json
	    sleep 0.3
	    cat color-status.json
	    sleep 0.6
	    cat size.json
	    sleep 0.5
	  ) >status.fifo & } &&
	landed_applies status 3 0
'

# Once that wait is over (the primary reconciled), a child's status
# changing reconciles at once again, though the create is still counted as
# on its way.
test_expect_success 'a create whose object never shows holds the reconcile 5 s at most' '
	mkfifo never.fifo &&
	{ ( landed_widget
	    wait_lines never.out 3
	    landed never.out Namespace blue-w1
	    landed never.out ConfigMap color >color.json
	    cat color.json
	    # (size never comes)
	    test_wait_for 30 test_has_reconciles never.err 2
	    jq -c ".type = \"MODIFIED\" | .object.metadata.resourceVersion = \"290\" | .object.status = {phase: \"Seen\"}" \
		color.json
	  ) >never.fifo & } &&
	landed_applies never 3 0 0
'

test_expect_success 'the end of the input ends the wait for creates still on their way: one last reconcile' '
	mkfifo eof.fifo &&
	{ ( landed_widget
	    wait_lines eof.out 3
	    landed eof.out Namespace blue-w1
	  ) >eof.fifo & } &&
	landed_applies eof 3 0
'

test_expect_success 'the log of a reconcile has its key, duration and counts' '
	jq -c "select(.primary == \"blue/w1\") | [.applies, .deletes, .statuses, .events, (.ms | type)]" \
		<collect.err >counts &&
	echo "[1,0,0,0,\"number\"]" >expect &&
	test_cmp expect counts
'

test_expect_success 'prune deletes with the uid as precondition, nothing we did not create' '
	jq -r "select(.op == \"delete\") | .object.metadata | \"\(.namespace)/\(.name) \(.uid)\"" \
		<05-prune.out >deleted &&
	echo "blue-w1/size uid-cm-w1-size" >expect &&
	test_cmp expect deleted
'


# A program whose answer for w1 carries the children its spec.extra adds.
test_expect_success 'setup: a program with bad desired children' '
	cp -R prog/widgets prog/extra &&
	cat >>prog/extra/sync.jq <<-\EOF
	| .children += ($in.parent.spec.extra // [])
	EOF
'

# bad_child NAME EXTRA MESSAGE: w1 of 02-steady with spec.extra EXTRA: MESSAGE
# logged as an error, nothing written or deleted (the live ConfigMap stays)
bad_child () {
	jq -c --argjson x "$2" "if .object.kind == \"Widget\" then .object.spec.extra = \$x else . end" \
		<"$FIXTURES/02-steady.in.jsonl" >$1.in &&
	WIDGET_TEAM=blue ireconcile --now $NOW prog/extra <$1.in >$1.out 2>$1.err &&
	test_no_sanitizer_report $1.err &&
	! test -s $1.out &&
	jq -r "select(.level == \"error\") | .msg" <$1.err >$1.msg &&
	echo "$3" >expect && test_cmp expect $1.msg
}

test_expect_success 'a desired child without an identity is a program error: nothing pruned' '
	bad_child noav "[{\"kind\": \"ConfigMap\", \"metadata\": {\"name\": \"x\", \"namespace\": \"blue-w1\"}}]" \
		"unable to reconcile '"'"'blue/w1'"'"': desired child 2 has no apiVersion" &&
	bad_child noname "[{\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\", \"metadata\": {}}]" \
		"unable to reconcile '"'"'blue/w1'"'"': desired child 2 has no metadata.name" &&
	bad_child notobj "[7]" \
		"unable to reconcile '"'"'blue/w1'"'"': desired child 2 is number, not an object" &&
	bad_child notchild "[{\"apiVersion\": \"v1\", \"kind\": \"Secret\", \"metadata\": {\"name\": \"s\", \"namespace\": \"blue-w1\"}}]" \
		"unable to reconcile '"'"'blue/w1'"'"': desired Secret '"'"'s'"'"' (child 2) is not of a child kind of program '"'"'widgets'"'"'"
'

test_expect_success 'a desired child given twice is a program error' '
	bad_child twice "[{\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\", \"metadata\": {\"name\": \"color\", \"namespace\": \"blue-w1\"}, \"data\": {}}]" \
		"unable to reconcile '"'"'blue/w1'"'"': desired ConfigMap '"'"'blue-w1/color'"'"' is given twice (child 2)"
'
test_expect_success 'finalizer removal tests the index of our own entry' '
	jq -c "select(.op == \"patch\") | .patch" <10-finalized.out >patch &&
	echo "[{\"op\":\"test\",\"path\":\"/metadata/finalizers/1\",\"value\":\"test.example.org/cleanup\"},{\"op\":\"remove\",\"path\":\"/metadata/finalizers/1\"}]" >expect &&
	test_cmp expect patch
'

test_expect_success 'kubectl -o json (pretty-printed events) reads like compact lines' '
	jq . <"$FIXTURES/01-create.in.jsonl" >pretty.jsonl &&
	test $(wc -l <pretty.jsonl) -gt 10 &&
	WIDGET_TEAM=blue ireconcile --now $NOW prog/widgets <pretty.jsonl >pretty.out 2>pretty.err &&
	test_cmp 01-create.out pretty.out &&
	! test -s pretty.err
'

test_expect_success 'settings: integers from the environment, defaults otherwise' '
	jq -c "if .object.kind == \"Widget\" then .object.metadata.finalizers = [\"test.example.org/cleanup\"] else . end" \
		"$FIXTURES/01-create.in.jsonl" >finalized.in.jsonl &&
	WIDGET_TEAM=blue WIDGET_REPLICAS=7 ireconcile --now $NOW prog/widgets <finalized.in.jsonl >replicas.out &&
	jq -r "select(.object.kind == \"ConfigMap\") | .object.data.replicas" <replicas.out >replicas &&
	echo 7 >expect &&
	test_cmp expect replicas
'

test_expect_success 'a missing required setting stops ireconcile (100)' '
	test_expect_code 100 ireconcile prog/widgets </dev/null >out 2>err &&
	grep "missing setting .team.: set WIDGET_TEAM" err &&
	! test -s out
'

test_expect_success 'a setting of the wrong type stops ireconcile (100)' '
	WIDGET_TEAM=blue WIDGET_REPLICAS=many test_expect_code 100 ireconcile prog/widgets </dev/null 2>err &&
	grep "setting .replicas.: .many. (from WIDGET_REPLICAS) is not an integer" err &&
	WIDGET_TEAM=blue WIDGET_LOUD=perhaps test_expect_code 100 ireconcile prog/widgets </dev/null 2>err &&
	grep "is not a boolean" err &&
	WIDGET_TEAM=blue WIDGET_REPLICAS=0 test_expect_code 100 ireconcile prog/widgets </dev/null 2>err &&
	grep "setting .replicas.: 0 (from WIDGET_REPLICAS) is less than its minimum 1" err
'

test_expect_success 'a jq syntax error is reported with the file (100)' '
	cp -R prog/widgets prog/broken &&
	echo "{children: [" >prog/broken/sync.jq &&
	WIDGET_TEAM=blue test_expect_code 100 ireconcile prog/broken </dev/null 2>err &&
	grep "unable to compile .*broken/sync.jq" err
'

test_expect_success 'a program without a mapping for a kind is refused (100)' '
	mkdir prog/nomap &&
	cat >prog/nomap/program.json <<-\EOF &&
	{"primary": {"resource": "widgets.test.example.org", "apiVersion": "test.example.org/v1", "kind": "Widget"},
	 "children": [{"resource": "configmaps", "apiVersion": "v1", "kind": "ConfigMap"}]}
	EOF
	echo "{}" >prog/nomap/sync.jq &&
	test_expect_code 100 ireconcile prog/nomap </dev/null 2>err &&
	grep "kind .ConfigMap.v1.: no mapping" err
'

# typo EDIT WHAT: the widgets program with EDIT (on its JSON) is refused, saying WHAT
typo () {
	rm -rf prog/typo && mkdir prog/typo && cp prog/widgets/*.jq prog/typo/ &&
	"$KOP_TEST_TOOL" yaml prog/widgets/program.yml | jq -c "$1" >prog/typo/program.json &&
	WIDGET_TEAM=blue test_expect_code 100 ireconcile prog/typo </dev/null 2>err &&
	grep -q "$2" err
}

test_expect_success 'a key that program.yml does not know is refused, named (100)' '
	typo ".childern = .children" "'"'"'childern'"'"' is not a known key (name, settings," &&
	typo ".primary.namespce = \"x\"" "'"'"'primary.namespce'"'"' is not a known key" &&
	typo ".mapping.lables = {}" "'"'"'mapping.lables'"'"' is not a known key (ownerReference, labels)" &&
	typo ".mapping.labels.nmae = \"x\"" "'"'"'mapping.labels.nmae'"'"' is not a known key" &&
	typo ".children[1].labelselector = \"x\"" "'"'"'children\[1\].labelselector'"'"' is not a known key" &&
	typo ".observed[0].mapping.labels.match = {} | .observed[0].mapping.lables = {}" \
		"'"'"'observed\[0\].mapping.lables'"'"' is not a known key" &&
	typo ".settings[1].defualt = 2" "'"'"'settings\[1\].defualt'"'"' is not a known key" &&
	typo "del(.mapping.labels.name)" "'"'"'mapping.labels.name'"'"' is required"
'

test_expect_success 'adopt: a boolean, and on children only (100)' '
	typo ".children[1].adopt = \"no\"" "'"'"'children\[1\].adopt'"'"' must be true or false" &&
	typo ".observed[0].adopt = false" "'"'"'observed\[0\].adopt'"'"' is for children"
'

test_expect_success 'ignore: a list of fields, on children with a project only, none it keeps (100)' '
	typo ".children[1].project = [\"data\"] | .children[1].ignore = \"metadata.annotations\"" "'"'"'children\[1\].ignore'"'"' must be a list of fields" &&
	typo ".children[1].project = [\"data\"] | .children[1].ignore = []" "'"'"'children\[1\].ignore'"'"' must be a list of fields" &&
	typo ".children[1].project = [\"data\"] | .children[1].ignore = [\"metadata..x\"]" "'"'"'children\[1\].ignore\[0\]'"'"' must be a field such as spec.replicas" &&
	typo ".observed[0].ignore = [\"metadata.annotations\"]" "'"'"'observed\[0\].ignore'"'"' is for children" &&
	typo "del(.children[1].project) | .children[1].ignore = [\"metadata.annotations\"]" "'"'"'children\[1\].ignore'"'"' needs a project" &&
	typo ".children[1].project = \"{data}\" | .children[1].ignore = [\"spec.x\"]" "'"'"'children\[1\].ignore'"'"' needs a project that lists the fields kept" &&
	typo ".children[1].project = [\"metadata.annotations\"] | .children[1].ignore = [[\"metadata\", \"annotations\", \"a.b/c\"]]" \
		"'"'"'children\[1\].ignore\[0\]'"'"' is within or around a field its project keeps" &&
	typo ".children[1].project = [[\"metadata\", \"annotations\", \"a.b/c\"]] | .children[1].ignore = [\"metadata\"]" \
		"'"'"'children\[1\].ignore\[0\]'"'"' is within or around a field its project keeps" &&
	typo ".children[1].project = [\"data\"] | .children[1].ignore = [\"spec.a.b\", \"spec.a\"]" \
		"'"'"'children\[1\].ignore\[0\]'"'"' is within or around another field it ignores"
'

test_expect_success 'ignore: none of what the engine reads or writes itself (100)' '
	typo ".children[1].project = [\"data\"] | .children[1].ignore = [\"metadata.annotations\"]" \
		"kind .ConfigMap.v1.: .ignore\[0\]. is within or around metadata.annotations.iot-operator/applied, which the engine reads or writes itself" &&
	typo ".children[1].project = [\"data\"] | .children[1].ignore = [[\"metadata\", \"labels\", \"test.example.org/widget\"]]" \
		"is within or around metadata.labels.test.*widget, which the engine" &&
	typo ".children[1].project = [\"data\"] | .children[1].ignore = [\"metadata.name\"]" \
		"is within or around metadata.name, which the engine" &&
	typo ".children[1].project = [\"data\"] | .children[1].ignore = [\"status.phase\"]" \
		"is within or around status, which the engine" &&
	typo ".children[1].project = [\"data\"] | .children[1].ignore = [\"metadata.deletionTimestamp\"]" \
		"is within or around metadata.deletionTimestamp, which the engine" &&
	typo ".children[1].project = [\"data\"] | .children[1].labelSelector = \"tier in (a,b),!gone\" | .children[1].ignore = [[\"metadata\", \"labels\", \"gone\"]]" \
		"is within or around metadata.labels.gone, which the engine" &&
	typo ".children[1].project = [\"data\"] | .children[1].labelSelector = \"tier in (a,b),!gone\" | .children[1].ignore = [[\"metadata\", \"labels\", \"tier\"]]" \
		"is within or around metadata.labels.tier, which the engine"
'

test_expect_success 'a kind listed twice among the children is refused (100)' '
	typo ".children += [.children[1]]" "'"'"'children\[2\]'"'"': ConfigMap is listed twice in '"'"'children'"'"'"
'

test_expect_success 'a missing program is refused (100)' '
	test_expect_code 100 ireconcile prog/nothing </dev/null 2>err &&
	grep "unable to open .prog/nothing." err
'

test_expect_success '--print-watches derives the watches from program.yml' '
	WIDGET_TEAM=blue ireconcile --print-watches prog/widgets >watches &&
	test_cmp_json "$FIXTURES/print-watches.expect.jsonl" watches
'

# A copy of the widgets program with one jq text broken by sed: --print-watches
# refuses it as the engine does, with the same code and message.
broken () {
	rm -rf broken && cp -R prog/widgets broken && sed -i "$1" "broken/$2" &&
	WIDGET_TEAM=blue test_expect_code 100 ireconcile --print-watches broken >watches.out 2>pw.err &&
	! test -s watches.out &&
	WIDGET_TEAM=blue test_expect_code 100 ireconcile --once broken </dev/null >engine.out 2>engine.err &&
	jq -r .msg pw.err >pw.msg && jq -r .msg engine.err >engine.msg &&
	test_cmp engine.msg pw.msg &&
	grep -F "$3" pw.msg
}

test_expect_success '--print-watches compiles the jq as the engine does: a broken program is refused (100)' '
	mkdir -p lib && cp -R prog/lib/. lib/ &&
	broken "4s/\$/ )))/" sync.jq "unable to compile '"'"'broken/sync.jq'"'"'" &&
	grep "syntax error, .* at broken/sync.jq, line 4: " pw.msg &&
	! grep -e "<top-level>" -e "shell quoting" pw.msg &&
	broken "2s/def widget_ns/def widget_ns(/" widget.jq "unable to compile '"'"'broken/sync.jq'"'"'" &&
	grep "broken/widget.jq, line 2" pw.msg &&
	broken "s/big: .*/big: '"'"'.spec.size >=>= 3'"'"'/" program.yml "aggregates.big" &&
	broken "s/^sync: sync.jq/sync: nothere.jq/" program.yml "nothere.jq"
'

test_expect_success 'program.yml can be named directly' '
	WIDGET_TEAM=blue ireconcile --print-watches prog/widgets/program.yml >watches2 &&
	test_cmp watches watches2
'

test_expect_success '--help and bad usage' '
	ireconcile --help >help &&
	grep "^usage: ireconcile" help &&
	test_expect_code 100 ireconcile 2>err &&
	grep "want one PROGRAM" err &&
	test_expect_code 100 ireconcile --now yesterday prog/widgets 2>err &&
	grep "invalid --now" err
'

test_expect_success 'a resyncAfterSeconds under 1 counts as 1: no spinning' '
	{
		jq -c "if .object.kind == \"Widget\" then .object.spec.resync = 0.000001 else . end" \
			<"$FIXTURES/02-steady.in.jsonl" &&
		# the input stays open a second after the first resync
		test_wait_for 30 test_has_reconciles resync.err 2 &&
		sleep 1
	} | WIDGET_TEAM=blue ireconcile -v --now $NOW prog/widgets >resync.out 2>resync.err &&
	test_reconciled resync.err primary >reconciled &&
	test $(wc -l <reconciled) -ge 2 &&
	test $(wc -l <reconciled) -le 4
'

test_expect_success 'a program that never ends: the watchdog names the primary, again and again' '
	cp -R prog/widgets prog/loop &&
	echo "| if \$in.parent.spec.loop then last(range(infinite)) else . end" >>prog/loop/sync.jq &&
	jq -c "if .object.kind == \"Widget\" then .object.spec.loop = true else . end" \
		<"$FIXTURES/02-steady.in.jsonl" >loop.in &&
	{ cat loop.in; sleep 6; } | WIDGET_TEAM=blue test_expect_code 124 timeout 5 \
		ireconcile --watchdog 300ms prog/loop >loop.out 2>loop.err &&
	jq -r "select(.level == \"error\") | .primary" loop.err | sort -u >named &&
	echo blue/w1 >expect &&
	test_cmp expect named &&
	test $(grep -c "its reconcile has run for" loop.err) -ge 3 &&
	grep -q "its reconcile has run for 0.[3-9] s (a program that never ends?)" loop.err &&
	test_expect_code 100 ireconcile --watchdog 1ms prog/widgets 2>err &&
	grep -q "invalid --watchdog" err
'

test_expect_success 'a project failing on a Secret: logged without what jq quoted of its data' '
	rm -rf prog/sproj && mkdir prog/sproj && cp prog/widgets/*.jq prog/sproj/ &&
	"$KOP_TEST_TOOL" yaml prog/widgets/program.yml |
		jq -c ".children += [{resource: \"secrets\", apiVersion: \"v1\", kind: \"Secret\", project: \"error(.data)\"},
			{resource: \"configmaps\", apiVersion: \"v1\", kind: \"ConfigMap\", project: \"error(.data)\"}]
		    | .children |= [.[0], .[2], .[3]]" >prog/sproj/program.json &&
	{
		echo "{\"type\":\"ADDED\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":\"s\",\"namespace\":\"blue-w1\",\"labels\":{\"test.example.org/team\":\"blue\",\"test.example.org/widget\":\"w1\"}},\"data\":{\"password\":\"UzNjcjN0\"}}}" &&
		grep ConfigMap "$FIXTURES/02-steady.in.jsonl"
	} >sproj.in &&
	WIDGET_TEAM=blue ireconcile --now $NOW prog/sproj <sproj.in >sproj.out 2>sproj.err &&
	grep -q "unable to project Secret .s.: (the jq error on a Secret is not logged: it may quote its data)" sproj.err &&
	! grep -q UzNjcjN0 sproj.err &&
	grep -q "unable to project ConfigMap .color.: {" sproj.err
'

test_expect_success 'project as a list of fields: those there and not null, in the order listed' '
	rm -rf prog/keep && mkdir prog/keep &&
	cat >prog/keep/program.yml <<-\EOF &&
	name: keep
	primary: {resource: widgets.test.example.org, apiVersion: test.example.org/v1, kind: Widget}
	mapping: {labels: {name: test.example.org/widget}}
	children:
	  - resource: configmaps
	    apiVersion: v1
	    kind: ConfigMap
	    project: [data.b, [metadata, labels, a.b/c], metadata.generation, spec.x.y, status, data.none]
	sync: sync.jq
	EOF
	echo "{children: [.children[\"ConfigMap.v1\"][]], status: {seen: .children}}" >prog/keep/sync.jq &&
	cat >keep.in <<-\EOF &&
	{"type":"ADDED","object":{"apiVersion":"test.example.org/v1","kind":"Widget","metadata":{"name":"w","namespace":"t","uid":"u1"}}}
	{"type":"ADDED","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"t","uid":"u2","labels":{"test.example.org/widget":"w","a.b/c":"x","other":"y"}},"spec":{"x":5},"status":null,"data":{"a":"1","b":"2"}}}
	EOF
	ireconcile --now $NOW prog/keep <keep.in >keep.out 2>keep.err &&
	jq -c "select(.op == \"status\") | .object.status.seen" keep.out >seen &&
	echo "{\"ConfigMap.v1\":{\"c\":{\"data\":{\"b\":\"2\"},\"metadata\":{\"labels\":{\"a.b/c\":\"x\"},\"name\":\"c\",\"namespace\":\"t\"},\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\"}}}" >expect &&
	test_cmp expect seen &&
	test $(wc -l <keep.out) -eq 1
'

# A child's change that leaves both what the program sees of it (its
# projection) and the object without its status alike gives the program
# nothing new, and leaves nothing to apply: no reconcile.
test_expect_success 'a child changed outside its projection, in its status alone: not reconciled for' '
	rm -rf prog/quiet && mkdir prog/quiet &&
	cat >prog/quiet/program.yml <<-\EOF &&
	name: quiet
	primary: {resource: widgets.test.example.org, apiVersion: test.example.org/v1, kind: Widget}
	mapping: {labels: {name: test.example.org/widget}}
	children:
	  - {resource: configmaps, apiVersion: v1, kind: ConfigMap, project: [data.b, status.ready]}
	sync: sync.jq
	EOF
	echo "{children: [.children[\"ConfigMap.v1\"][]], status: {ready: .children[\"ConfigMap.v1\"].c.status.ready}}" \
		>prog/quiet/sync.jq &&
	cm () { # RV DATA-A OTHER READY
		printf "{\"type\":\"%s\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"c\",\"namespace\":\"t\",\"uid\":\"u2\",\"resourceVersion\":\"%s\",\"labels\":{\"test.example.org/widget\":\"w\"}},\"data\":{\"a\":\"%s\",\"b\":\"2\"},\"status\":{\"other\":%s,\"ready\":%s}}}\n" \
			"$( test "$1" = 2 && echo ADDED || echo MODIFIED)" "$1" "$2" "$3" "$4"
	} &&
	mkfifo quiet.fifo &&
	{ ( echo "{\"type\":\"ADDED\",\"object\":{\"apiVersion\":\"test.example.org/v1\",\"kind\":\"Widget\",\"metadata\":{\"name\":\"w\",\"namespace\":\"t\",\"uid\":\"u1\",\"resourceVersion\":\"1\"}}}"
	    cm 2 1 1 false
	    echo "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Widget\",\"apiVersion\":\"test.example.org/v1\",\"metadata\":{\"resourceVersion\":\"2\",\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}}}}"
	    test_wait_for 30 test_has_reconciles quiet.err 1
	    : outside the projection, not in the status: compared, so reconciled for
	    cm 3 2 1 false
	    test_wait_for 30 test_has_reconciles quiet.err 2
	    : in the status, outside the projection: nothing
	    cm 4 2 2 false
	    cm 5 2 3 false
	    sleep 1
	    : in the projection
	    : in the projection: its status written at once, --status-interval 0
	    cm 6 2 3 true
	    test_wait_for 30 test_has_reconciles quiet.err 3
	    sleep 1
	  ) >quiet.fifo & } &&
	timeout 60 ireconcile -v --now $NOW --status-interval 0 prog/quiet <quiet.fifo >quiet.out 2>quiet.err &&
	wait &&
	test_no_sanitizer_report quiet.err &&
	test "$(test_reconciles quiet.err)" = 3 &&
	jq -c "select(.op == \"status\") | .object.status" quiet.out >statuses &&
	printf "{\"ready\":false}\n{\"ready\":true}\n" >expect &&
	test_cmp expect statuses
'

# A primary seen again as its last reconcile saw it (its resourceVersion
# alone moved: a relist, a no-op write) gives the program nothing new: not
# reconciled for. A label that moved is something the program sees.
test_expect_success 'a primary seen again as its last reconcile saw it: not reconciled for' '
	w () { # RV LABEL
		printf "{\"type\":\"MODIFIED\",\"object\":{\"apiVersion\":\"test.example.org/v1\",\"kind\":\"Widget\",\"metadata\":{\"name\":\"w\",\"namespace\":\"t\",\"uid\":\"u1\",\"resourceVersion\":\"%s\",\"labels\":{\"l\":\"%s\"}}}}\n" "$1" "$2"
	} &&
	mkfifo again.fifo &&
	{ ( w 1 a
	    echo "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Widget\",\"apiVersion\":\"test.example.org/v1\",\"metadata\":{\"resourceVersion\":\"2\",\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}}}}"
	    test_wait_for 30 test_has_reconciles again.err 1
	    w 3 a
	    test_wait_for 30 grep -q "as its last reconcile saw it; not reconciled" again.err
	    w 4 b
	    test_wait_for 30 test_has_reconciles again.err 2
	  ) >again.fifo & } &&
	timeout 60 ireconcile -v --now $NOW prog/quiet <again.fifo >again.out 2>again.err &&
	wait &&
	test_no_sanitizer_report again.err &&
	test "$(test_reconciles again.err)" = 2 &&
	test "$(grep -c "as its last reconcile saw it; not reconciled" again.err)" = 1
'

# A status written is asked of the program at once, with it stored, and
# with the aggregates it changed: a program that counts itself answers
# otherwise once its own status counts (its landing reconciles, and writes
# the count again), one that fails on it fails at the landing's reconcile
# (the question itself says nothing), and neither is taken as seen.
test_expect_success 'a status asked of the program at its write: the aggregates it changed, a program failing on it' '
	rm -rf prog/asked && mkdir prog/asked &&
	cat >prog/asked/program.yml <<-\EOF &&
	name: asked
	primary: {resource: widgets.test.example.org, apiVersion: test.example.org/v1, kind: Widget}
	mapping: {labels: {name: test.example.org/widget}}
	children:
	  - {resource: configmaps, apiVersion: v1, kind: ConfigMap}
	aggregates:
	  counted: .status.n != null
	sync: sync.jq
	EOF
	cat >prog/asked/sync.jq <<-\EOF &&
	if .parent.metadata.name == "bad" and .parent.status.n then error("no status of mine may stand")
	else {children: [], status: {n: 1, count: (.aggregates.counted | length)}} end
	EOF
	widget () { # NAME RV [STATUS]
		printf "{\"type\":\"%s\",\"object\":{\"apiVersion\":\"test.example.org/v1\",\"kind\":\"Widget\",\"metadata\":{\"name\":\"%s\",\"namespace\":\"t\",\"uid\":\"u-%s\",\"resourceVersion\":\"%s\"}%s}}\n" \
			"$(test -z "${3:-}" && echo ADDED || echo MODIFIED)" "$1" "$1" "$2" "${3:+,\"status\":$3}"
	} &&
	mkfifo asked.fifo &&
	{ ( widget w 1
	    echo "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Widget\",\"apiVersion\":\"test.example.org/v1\",\"metadata\":{\"resourceVersion\":\"2\",\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}}}}"
	    test_wait_for 30 test_has_reconciles asked.err 1
	    widget w 3 "{\"n\":1,\"count\":0}"
	    test_wait_for 30 test_has_reconciles asked.err 2
	    widget w 4 "{\"n\":1,\"count\":1}"
	    test_wait_for 30 grep -q "as its last reconcile saw it; not reconciled" asked.err
	    widget bad 5
	    test_wait_for 30 test_has_reconciles asked.err 3
	    widget bad 6 "{\"n\":1,\"count\":1}"
	    test_wait_for 30 grep -q "no status of mine may stand" asked.err
	  ) >asked.fifo & } &&
	timeout 60 ireconcile -v --now $NOW --status-interval 0 prog/asked <asked.fifo >asked.out 2>asked.err &&
	wait &&
	test_no_sanitizer_report asked.err &&
	test_reconciled asked.err primary statuses landingSeen >actual &&
	cat >expect <<-\EOF &&
	["t/w",1,false]
	["t/w",1,true]
	["t/bad",1,false]
	EOF
	test_cmp expect actual &&
	jq -c "select(.op == \"status\") | .object.status" asked.out >statuses &&
	printf "{\"n\":1,\"count\":0}\n{\"n\":1,\"count\":1}\n{\"n\":1,\"count\":1}\n" >expect &&
	test_cmp expect statuses &&
	grep -q "unable to reconcile .t/bad.: .*no status of mine may stand" asked.err
'

test_expect_success 'project: an empty list, an empty key, a number: refused naming the entry (100)' '
	for bad in "[]" "[spec..x]" "[[]]" "[spec, 5]" "5"
	do
		sed "s/project: .*/project: $bad/" prog/keep/program.yml >prog/keep/p.yml &&
		mv prog/keep/p.yml prog/keep/program.yml &&
		test_expect_code 100 ireconcile prog/keep </dev/null 2>err &&
		grep "children\[0\].project" err || return 1
	done
'

test_expect_success 'stdin that cannot be read, a feedback that cannot be opened: 111' '
	WIDGET_TEAM=blue test_expect_code 111 ireconcile prog/widgets <. 2>err &&
	grep "unable to read stdin: Is a directory" err &&
	WIDGET_TEAM=blue test_expect_code 111 ireconcile --feedback nowhere/fifo prog/widgets </dev/null 2>err &&
	grep "unable to open .nowhere/fifo." err
'

# The supervisor's /metrics (KOP_STATS_FD): a line when values changed, at most
# every 200 ms, and the last within 200 ms of going idle, input still open.
reconciles_sent () {
	tail -n 1 idle.stats |
		jq -e --argjson n "$1" "[.metrics[] | select(.name == \"controller_runtime_reconcile_total\") | .value] | add == \$n"
}
test_expect_success 'metrics: the last counts sent while idle, not a line at every wait' '
	mkfifo idle.fifo &&
	sed -n 1p "$FIXTURES/02-steady.in.jsonl" >w1.line &&
	grep -q "\"finalizers\":\[\"test.example.org/cleanup\"\]" w1.line &&
	{ ( cat w1.line
	    sed -n "/BOOKMARK/p" "$FIXTURES/01-create.in.jsonl"
	    test_wait_for 30 test_has_reconciles idle.err 1
	    wc -l <idle.stats >idle.lines0
	    t0=$(date +%s%3N)
	    i=2
	    while test $i -le 21
	    do
		sed "s/\"w1\"/\"w$i\"/; s/uid-w1/uid-w$i/" w1.line
		sleep 0.02
		i=$((i + 1))
	    done
	    test_wait_for 30 test_has_reconciles idle.err 21
	    test_wait_for 5 reconciles_sent 21 && echo sent >idle.sent
	    echo $(($(date +%s%3N) - t0)) >idle.ms
	    wc -l <idle.stats >idle.lines1
	  ) >idle.fifo & } &&
	WIDGET_TEAM=blue KOP_STATS_FD=5 timeout 90 ireconcile -v --now $NOW prog/widgets <idle.fifo \
		>idle.out 2>idle.err 5>idle.stats &&
	wait &&
	test_no_sanitizer_report idle.err &&
	test_reconciles idle.err >n && echo 21 >expect && test_cmp expect n &&
	echo sent >expect && test_cmp expect idle.sent &&
	lines=$(($(cat idle.lines1) - $(cat idle.lines0))) &&
	most=$(($(cat idle.ms) / 200 + 3)) &&
	echo "$lines lines in $(cat idle.ms) ms (at most $most)" &&
	test $lines -ge 1 &&
	test $lines -le $most
'

# While more output waits than stdout takes (1 MiB), nothing more is
# reconciled, but stdin is still read: the writer upstream is never held up,
# and what is reconciled once the output drains sees every change that came
# meanwhile. The reader here takes nothing until the whole input is written,
# the edits once reconciles have begun.
test_expect_success 'output waiting: stdin still read, later reconciles see what came meanwhile' '
	jq -nc --arg c "$(printf "%04000d" 0 | tr 0 r)" "range(600) as \$i |
		{type: \"ADDED\", object: {apiVersion: \"test.example.org/v1\", kind: \"Widget\",
		 metadata: {name: \"w\(\$i)\", namespace: \"blue\", uid: \"uid-w\(\$i)\",
			    resourceVersion: \"\(10 + \$i)\", generation: 1,
			    finalizers: [\"test.example.org/cleanup\"]},
		 spec: {color: \$c, size: 1}}}" >busy.a &&
	sed -n "/BOOKMARK/p" "$FIXTURES/01-create.in.jsonl" >>busy.a &&
	jq -c "select(.type == \"ADDED\") | .type = \"MODIFIED\" |
		.object.metadata.resourceVersion = (.object.metadata.resourceVersion | tonumber + 1000 | tostring) |
		.object.spec.color |= gsub(\"r\"; \"b\")" busy.a >busy.b &&
	mkfifo busy.fifo &&
	{ ( if test_wait_for 30 test -f busy.written; then echo yes >busy.first; fi; cat ) <busy.fifo >busy.out & } &&
	{ cat busy.a
	  test_wait_for 30 test_has_reconciles busy.err 100
	  cat busy.b
	  touch busy.written
	} | WIDGET_TEAM=blue timeout 60 ireconcile -v --now $NOW prog/widgets >busy.fifo 2>busy.err &&
	wait &&
	test_no_sanitizer_report busy.err &&
	echo yes >expect && test_cmp expect busy.first &&
	jq -r "select(.op == \"apply\" and .object.metadata.name == \"color\") |
		[.object.metadata.namespace, .object.data.color[0:1]] | @tsv" busy.out >applied &&
	awk "{ n[\$1] = n[\$1] \$2 } END { for (k in n) print n[k] }" applied | sort | uniq -c >kinds &&
	cat kinds &&
	# every widget ends with the new colour; some were reconciled only after it came, once
	awk "\$2 !~ /b\$/ { bad = 1 } END { exit bad }" kinds &&
	grep -q " b\$" kinds
'

test_done
