#!/bin/sh
test_description='lib/discovery: resource names resolved as kubectl resolves them (offline, on recorded discovery)'
. "${0%/*}/test-lib.sh"

test_expect_success 'setup: the recorded discovery plus a cp.iot.sap group (v1 preferred, v1alpha1) and events.k8s.io' '
	mkdir disc &&
	cp "$TEST_DATA"/recordings/discovery/api*.json disc/ &&
	cp "$FIXTURES"/apis-*.json disc/ &&
	jq -c ".groups += [{name:\"cp.iot.sap\",versions:[{groupVersion:\"cp.iot.sap/v1alpha1\",version:\"v1alpha1\"},{groupVersion:\"cp.iot.sap/v1\",version:\"v1\"}],preferredVersion:{groupVersion:\"cp.iot.sap/v1\",version:\"v1\"}}]" \
		"$TEST_DATA"/recordings/discovery/apis.json >disc/apis.json
'

test_expect_success 'names, short names, kinds, resource.group and resource.version.group' '
	"$KOP_TEST_TOOL" discovery-find disc $(cut -d" " -f1 "$FIXTURES/expect") >out &&
	test_cmp "$FIXTURES/expect" out
'

test_expect_success 'unknown names, versions and groups are errors in kubectl words' '
	test_expect_code 1 "$KOP_TEST_TOOL" discovery-find disc $(cut -d" " -f1 "$FIXTURES/expect-errors") >out &&
	test_cmp "$FIXTURES/expect-errors" out
'

test_expect_success 'core wins over a group even when the group comes first in the list' '
	jq -c ".groups |= ([{name:\"\",versions:[{groupVersion:\"v1\",version:\"v1\"}],preferredVersion:{groupVersion:\"v1\",version:\"v1\"}}] as \$core | reverse + \$core)" \
		disc/apis.json >apis.json && mv apis.json disc/apis.json &&
	"$KOP_TEST_TOOL" discovery-find disc events ev >out &&
	grep "^events v1 events " out && grep "^ev v1 events " out
'

test_expect_success 'the preferred version wins over the first listed one' '
	"$KOP_TEST_TOOL" discovery-find disc iotservices >out &&
	grep "^iotservices cp.iot.sap/v1 " out
'

test_expect_success 'query values are percent-encoded' '
	test "$("$KOP_TEST_TOOL" query-escape "app in (a,b),tier!=x")" = "app%20in%20%28a%2Cb%29%2Ctier%21%3Dx" &&
	test "$("$KOP_TEST_TOOL" query-escape "eyJ2Ijo+/=")" = "eyJ2Ijo%2B%2F%3D"
'

test_done
