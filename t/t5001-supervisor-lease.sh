#!/bin/sh
test_description='leader election: client-go tryAcquireOrRenew and release (lib/lease) on an in-memory Lease'
. "${0%/*}/test-lib.sh"

test_expect_success 'create, hold, expiry by observed time, fast-path renew, failure, release, race' '
	"$KOP_TEST_TOOL" lease-scenario <"$FIXTURES/takeover.script" >actual 2>err &&
	test_cmp_golden "$FIXTURES/takeover.expect" actual
'

test_expect_success 'MicroTime with 6 digits; release writes holder "" and duration 1' '
	"$KOP_TEST_TOOL" lease-scenario <"$FIXTURES/takeover.script" >actual &&
	grep "^{" actual >stored &&
	jq -e ".spec.renewTime | test(\"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\\\.[0-9]{6}Z$\")" stored >/dev/null &&
	jq -s -e "map(select(.spec.holderIdentity == \"\"))[0].spec.leaseDurationSeconds == 1" stored >/dev/null
'

test_expect_success 'a second candidate never takes a lease renewed in time' '
	cat >script <<-\EOT &&
	A try 0
	B try 100
	A try 10000
	B try 15050
	A try 20000
	B try 30000
	A try 30100
	B try 44000
	EOT
	"$KOP_TEST_TOOL" lease-scenario <script >actual &&
	cat >expect <<-\EOT &&
	A try 0: 1 requests=2 holder=A
	B try 100: 0 requests=1 holder=A
	A try 10000: 1 requests=1 holder=A
	B try 15050: 0 requests=1 holder=A
	A try 20000: 1 requests=1 holder=A
	B try 30000: 0 requests=1 holder=A
	A try 30100: 1 requests=1 holder=A
	B try 44000: 0 requests=1 holder=A
	EOT
	test_cmp expect actual
'

test_done
