#!/bin/sh
test_description='lib/manifest: what kapply -f reads from files, directories and stdin'
. "${0%/*}/test-lib.sh"

test_expect_success 'a directory: its .yaml, .yml and .json files in name order, Lists unpacked' '
	"$KOP_TEST_TOOL" manifest "$FIXTURES/dir" >out &&
	jq -c "[.kind, .metadata.name]" out >actual &&
	cat >expect <<-\EOF &&
	["Namespace","demo"]
	["ConfigMap","a"]
	["ConfigMap","b"]
	["ConfigMap","c"]
	["Secret","d"]
	EOF
	test_cmp expect actual &&
	jq -e -s ".[3].data == {\"enabled\":true,\"octal\":8}" out
'

test_expect_success 'one file, and stdin as -' '
	"$KOP_TEST_TOOL" manifest "$FIXTURES/dir/20-config.json" >out &&
	test $(wc -l <out) = 2 &&
	"$KOP_TEST_TOOL" manifest - <"$FIXTURES/dir/10-ns.yaml" >out &&
	jq -e ".kind == \"Namespace\"" out
'

test_expect_success 'an empty input gives no objects' '
	"$KOP_TEST_TOOL" manifest - </dev/null >out &&
	test ! -s out
'

test_expect_success 'an object without metadata.name is an error naming the file and document' '
	test_expect_code 1 "$KOP_TEST_TOOL" manifest "$FIXTURES/no-name.yaml" >out &&
	grep "^error: unable to read .*no-name.yaml.: document 2 has no metadata.name$" out
'

test_expect_success 'a YAML error names the file and the line' '
	test_expect_code 1 "$KOP_TEST_TOOL" manifest "$FIXTURES/broken.yaml" >out &&
	grep "^error: unable to parse .*broken.yaml.: line 5" out
'

test_expect_success 'a missing path is an error' '
	test_expect_code 1 "$KOP_TEST_TOOL" manifest nowhere.yaml >out &&
	grep "^error: unable to open .nowhere.yaml.: No such file or directory$" out
'

test_expect_success 'kapply -f DIR: a directory without a manifest file is an error naming it (100)' '
	mkdir empty &&
	echo "# notes" >empty/README.md &&
	test_expect_code 100 timeout 30 kapply --dry-run --kubeconfig /nonexistent -f empty >out 2>err &&
	test ! -s out &&
	jq -r .msg err >msgs &&
	test $(wc -l <msgs) = 1 &&
	grep -x "unable to read directory .empty.: no manifest in it (recognized file extensions are \.json, \.yaml, \.yml)" msgs
'

test_expect_success 'kapply -f: no objects at all (empty stdin, only empty documents) is an error naming the input (100)' '
	test_expect_code 100 timeout 30 kapply --dry-run --kubeconfig /nonexistent -f - </dev/null >out 2>err &&
	test ! -s out &&
	jq -r .msg err >msgs &&
	test $(wc -l <msgs) = 1 &&
	grep -x "unable to apply .<stdin>.: no objects in it (empty documents are skipped)" msgs &&
	printf "%s\n" --- "# nothing" --- >nothing.yaml &&
	test_expect_code 100 timeout 30 kapply --dry-run --kubeconfig /nonexistent -f nothing.yaml -f - </dev/null >out 2>err &&
	test ! -s out &&
	jq -r .msg err >msgs &&
	test $(wc -l <msgs) = 1 &&
	grep -x "unable to apply .nothing\.yaml., .<stdin>.: no objects in them (empty documents are skipped)" msgs
'

test_done
