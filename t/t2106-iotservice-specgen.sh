#!/bin/sh
test_description='pipeline/iotservice: specgen.jq is what its generator writes and answers as the schema walk'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-iotservice.sh"

# The jq program and its generator, run by the jq command: no C of ours.
test_normal_pass_only 'it tests the jq program with the jq command, not our C'

# (no .jq file is written here: jq looks for included modules in the
# current directory first)

iotjq () {
	jq -L "$PROJECT_ROOT/pipeline/lib" -L "$IOT_PROGRAM" "$@"
}

test_expect_success 'specgen.jq is up to date with the schema (make pipeline-gen)' '
	iotjq -n -r -f "$PROJECT_ROOT/scripts/iotservice-specgen.jq" >regenerated &&
	test_cmp regenerated "$IOT_PROGRAM/specgen.jq"
'

# Specs: the vectors, and the example with each field of the schema given a
# value of every wrong type, null, and each section missing or of the wrong
# type (lists get an element first), one change per spec.
test_expect_success 'setup: valid and invalid specs' '
	jq -c ".spec" "$IOT_VECTORS"/*.json >specs &&
	iotjq -n -c --slurpfile ex "$IOT_VECTORS/example-iotservice.json" "
		include \"spec\";
		def walk_schema(\$p):
			if type == \"object\" then [\$p, \"object\"], (to_entries[] | .key as \$k | .value | walk_schema(\$p + [\$k]))
			elif type == \"array\" then [\$p, \"list\"], (.[0] | walk_schema(\$p + [0]))
			else [\$p, rtrimstr(\"-\")] end;
		\$ex[0].spec as \$s
		| iot_spec_schema | walk_schema([]) as [\$path, \$t]
		| (null, 7, 1.5, -3, 3000000000, 9007199254740993, \"x\", \"\", true, false, {}, [], [\"x\"],
		   {limits: \"x\"}, {limits: {cpu: \"lots\"}}, {requests: {memory: 5}}, {limits: {cpu: -1}}, {limits: {}})
		| . as \$v | \$s | try setpath(\$path; \$v) catch empty
	" >>specs &&
	iotjq -n -c --slurpfile ex "$IOT_VECTORS/example-iotservice.json" "
		include \"spec\";
		def leaves(\$p):
			if type == \"object\" then to_entries[] | .key as \$k | .value | leaves(\$p + [\$k])
			elif type == \"array\" then .[0] | leaves(\$p + [0])
			else \$p end;
		\$ex[0].spec as \$s
		| [iot_spec_schema | leaves([])] as \$all
		| range(0; \$all | length) as \$i
		| (1, 7) as \$d
		| select(\$i + \$d < (\$all | length))
		| \$s | setpath(\$all[\$i + \$d]; {}) | setpath(\$all[\$i]; [1])
	" >two-bad &&
	test "$(wc -l <two-bad)" -gt 200 &&
	cat two-bad >>specs &&
	test "$(wc -l <specs)" -gt 2000
'

test_expect_success 'iot_spec_fast (generated) answers as iot_spec (the schema walk), errors included' '
	iotjq -c "include \"spec\"; include \"specgen\";
		(try iot_spec catch {error: .}) as \$want
		| (try iot_spec_fast catch {error: .}) as \$got
		| if \$got == \$want then (\$want | has(\"error\")) else {spec: ., want: \$want, got: \$got} end" specs >answers &&
	! grep -v "^true$" answers | grep -v "^false$" &&
	test "$(grep -c "^true$" answers)" -gt 1000 &&
	test "$(grep -c "^false$" answers)" -gt 100
'

# The walk that names every bad field (desired.jq runs it when iot_spec_fast
# fails): the same spec where there is none, the same first error where there
# is one; with two bad fields, each field's own error.
test_expect_success 'iot_decode_collect answers as iot_spec, and names every bad field' '
	iotjq -c "include \"spec\";
		(try {spec: iot_spec} catch {error: .}) as \$want
		| iot_decode_collect(iot_spec_schema; []) as \$c
		| if \$want.error then (\$c.e[0] == \$want.error)
		  else (\$c.e == [] and (\$c.v | iot_spec_defaults) == \$want.spec) end
		| if . then . else \$c end" specs >collect &&
	! grep -v "^true$" collect &&
	test "$(wc -l <collect)" -gt 2000 &&
	iotjq -n -c --slurpfile ex "$IOT_VECTORS/example-iotservice.json" "
		include \"spec\";
		def leaves(\$p):
			if type == \"object\" then to_entries[] | .key as \$k | .value | leaves(\$p + [\$k])
			elif type == \"array\" then .[0] | leaves(\$p + [0])
			else \$p end;
		def err: try (iot_spec | null) catch .;
		\$ex[0].spec as \$s
		| [iot_spec_schema | leaves([])] as \$all
		| range(0; \$all | length - 7) as \$i
		| (\$s | setpath(\$all[\$i + 7]; {})) as \$one
		| (\$s | setpath(\$all[\$i]; [1])) as \$other
		| [\$one | err, (\$other | err)] as \$alone
		| (\$one | setpath(\$all[\$i]; [1]) | iot_decode_collect(iot_spec_schema; []).e) as \$both
		| if all(\$alone[] | select(. != null); . as \$a | any(\$both[]; . == \$a)) then true
		  else {path: \$all[\$i], alone: \$alone, both: \$both} end" >pairs &&
	! grep -v "^true$" pairs &&
	test "$(wc -l <pairs)" -gt 100
'

test_expect_success 'iot_config_strip_spec (generated) keeps what iot_config_strip(iot_spec_schema) keeps' '
	iotjq -c "include \"spec\"; include \"specgen\"; include \"config\";
		try iot_spec catch empty
		| if iot_config_strip_spec == iot_config_strip(iot_spec_schema) then true else . end" specs >strip &&
	! grep -v "^true$" strip &&
	test "$(wc -l <strip)" -gt 100
'

test_expect_success 'kop_quantity: the fast canonical check never says yes where the full one says no' '
	printf "%s\n" 1000Mi 1024Mi 1023Ki 2Gi 5 0 -5 +5 1.5 1.5Mi 01 1e3 1E3 500m 1000m 2k 1000 512 512Ki Mi m "" \
		1E 5E 10Ei 3Pi 1234567890123456 123456789012345 0.5 " 5" "5 " abc 7u 7n 100M 1000000 999999 Inf NaN |
	jq -R -c -L "$PROJECT_ROOT/pipeline/lib" "include \"kop\";
		[., _kop_quantity_fast, _kop_quantity_canonical] | select(.[1] and (.[2] | not))" >wrong &&
	! test -s wrong &&
	printf "%s\n" 1000Mi 5 500m 2k 3Gi |
	jq -R -c -L "$PROJECT_ROOT/pipeline/lib" "include \"kop\"; _kop_quantity_fast" >fast &&
	! grep -v true fast
'

test_expect_success 'iot_port_text: the fast check answers as the full rule' '
	printf "%s\n" 80 0080 00080 000080 0 1 65535 65536 70000 99999 abc "" 8a 1.5 80.0 -1 +80 1e3 " 80" "80 " 8080 \
		61616 0x50 Infinity |
	iotjq -R -c "include \"spec\"; [., iot_port_text, _iot_port_text_full] | select(.[1] != .[2])" >wrong &&
	! test -s wrong &&
	printf "%s\n" 80 0080 65535 |
	iotjq -R "include \"spec\"; iot_port_text" >ok &&
	! grep -v true ok
'

test_done
