#!/bin/sh
test_description='docs: every field of the CRD and every option of every tool is documented; every relative link resolves'
. "${0%/*}/test-lib.sh"
test_normal_pass_only 'it compares the docs with the tools'\'' --help, the same text in either build'

# The convention checked: docs/iotservice-api.md names each field of every
# served version's schema (spec and status, nested) by its path in
# backquotes, `spec.gateway.mqtt.size`; "[]" stands for a list's items, a
# key holding a dot is quoted (`spec.processing_services[].properties."processing.http.url"`).
# A field that v1alpha1 lacks is marked "v1 only" on its own table row.

DOC="$PROJECT_ROOT/docs/iotservice-api.md"

# "VERSION PATH" for each field of each served version, in schema order.
crd_fields () {
	"$KOP_TEST_TOOL" yaml "$PROJECT_ROOT/deploy/crd.yaml" >crd.jsonl &&
	jq -r '
		def fields($p):
			if .type == "object" and .properties then
				.properties | to_entries[]
				| (if (.key | test("\\.")) then "\($p).\"\(.key)\"" else "\($p).\(.key)" end) as $q
				| $q, (.value | fields($q))
			elif .type == "array" and .items then .items | fields($p + "[]")
			else empty end;
		select(.kind == "CustomResourceDefinition")
		| .spec.versions[] | select(.served) | .name as $v
		| .schema.openAPIV3Schema.properties
		| ((.spec | fields("spec")), (.status | fields("status"))) | "\($v) \(.)"' crd.jsonl
}

# Prints each problem of the doc $1 against the fields in ./fields; fails if any.
check_doc () {
	awk '{ print $2 }' fields | sort -u >paths &&
	awk '$1 == "v1alpha1" { print $2 }' fields | sort -u >old &&
	comm -23 paths old >v1only &&
	while read -r p; do
		grep -qF "\`$p\`" "$1" || echo "not documented: $p"
	done <paths >problems &&
	while read -r p; do
		grep -F "| \`$p\` |" "$1" | grep -q "v1 only" || echo "not marked v1 only: $p"
	done <v1only >>problems &&
	while read -r p; do
		! grep -F "| \`$p\` |" "$1" | grep -q "v1 only" || echo "marked v1 only but served in v1alpha1: $p"
	done <old >>problems &&
	cat problems &&
	! test -s problems
}

test_expect_success 'the CRD has fields in every served version' '
	crd_fields >fields &&
	grep -q "^v1 spec.gateway.mqtt.persistent_volume_claim_size$" fields &&
	grep -q "^v1alpha1 spec.mms.size$" fields &&
	grep -q "^v1 status.conditions\[\].lastTransitionTime$" fields &&
	grep -q "^v1 spec.processing_services\[\].properties.\"processing.http.headers\"\[\].value$" fields &&
	test $(awk "\$1 == \"v1\"" fields | wc -l) -gt 200 &&
	test $(awk "\$1 == \"v1alpha1\"" fields | wc -l) -gt 150
'

test_expect_success 'docs/iotservice-api.md documents every field of the CRD' '
	check_doc "$DOC"
'

test_expect_success 'a field left out of the doc is named' '
	grep -vF "| \`spec.last_alive.period_seconds\` |" "$DOC" >doc.md &&
	! check_doc doc.md >out &&
	test_cmp - out <<-\EOF
	not documented: spec.last_alive.period_seconds
	EOF
'

test_expect_success 'a v1-only field not marked so is named, and a marked one served in v1alpha1' '
	sed -e "/^| \`spec.on_boarding\` |/s/\*\*v1 only\*\*; //" \
	    -e "/^| \`spec.last_alive.enabled\` |/s/| false |/| false | **v1 only** |/" "$DOC" >doc.md &&
	! check_doc doc.md >out &&
	test_cmp - out <<-\EOF
	not marked v1 only: spec.on_boarding
	marked v1 only but served in v1alpha1: spec.last_alive.enabled
	EOF
'

# Every relative link [text](target) or [text](target#anchor) of the files
# named: the target exists in the repository, and an anchor is a heading of
# the target (GitHub's slugs: lower case, punctuation but "-" and "_"
# dropped, spaces as "-").
slugs () {
	sed -n "s/^#\{1,6\} //p" "$1" | tr "A-Z" "a-z" | sed -e "s/[^a-z0-9 _-]//g" -e "s/ /-/g"
}
check_links () {
	for f in "$@"; do
		dir=$(dirname "$f")
		grep -o "\]([^)]*)" "$f" | sed -e "s/^](//" -e "s/)\$//" |
		grep -v "^[a-z][a-z]*:" |
		while read -r link; do
			target=${link%%#*}
			anchor=
			case $link in *"#"*) anchor=${link#*#} ;; esac
			if test -z "$target"; then
				file=$f
			else
				file="$dir/$target"
			fi
			if ! test -e "$file"; then
				echo "$f: $link: no such file"
			elif test -n "$anchor" && ! slugs "$file" | grep -qxF "$anchor"; then
				echo "$f: $link: no such heading"
			fi
		done
	done >problems &&
	cat problems &&
	! test -s problems
}

test_expect_success 'every relative link of README.md and docs/ resolves' '
	check_links "$PROJECT_ROOT/README.md" "$PROJECT_ROOT"/docs/*.md
'

test_expect_success 'a broken link or anchor is named' '
	mkdir -p d &&
	cat >d/a.md <<-\EOF &&
	# A title, with `code`
	[ok](#a-title-with-code) [ok](b.md#second_part) [gone](c.md) [bad](b.md#nope) [web](https://example.com/x)
	EOF
	printf "# B\n## Second_part\n" >d/b.md &&
	! check_links d/a.md >out &&
	test_cmp - out <<-\EOF
	d/a.md: c.md: no such file
	d/a.md: b.md#nope: no such heading
	EOF
'

# Every long option a tool's --help lists (on its option lines) is named,
# in backquotes, in its reference: docs/TOOL.md, or docs/architecture.md for
# the options every tool takes.
check_options () {
	for tool in kwatch ireconcile kapply kstatus iot-operator ksim; do
		"$KOP_BIN/$tool" --help >help.$tool 2>&1 || return 1
		for o in $(grep -E "^[[:space:]]+-" help.$tool | grep -oE -- "--[a-z][a-z-]*" | sort -u); do
			grep -qE -- "\`$o([^a-z-]|\$)" "$1/$tool.md" "$1/architecture.md" ||
			echo "$tool: $o is not in docs/$tool.md"
		done
	done >problems &&
	cat problems &&
	! test -s problems
}

test_expect_success 'every option of every tool is documented' '
	check_options "$PROJECT_ROOT/docs"
'

test_expect_success 'an option missing from the docs is named' '
	mkdir -p docs &&
	cp "$PROJECT_ROOT"/docs/*.md docs/ &&
	sed "s/--coalesce/--c0alesce/g" "$PROJECT_ROOT/docs/kstatus.md" >docs/kstatus.md &&
	! check_options docs >out &&
	test_cmp - out <<-\EOF
	kstatus: --coalesce is not in docs/kstatus.md
	EOF
'

test_done
