#!/bin/sh
test_description='end to end under deploy/ RBAC: create, spec edit, core <-> core-spring, drift, delete'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"
. "$TEST_DIRECTORY/lib-e2e.sh"

e2e_ksim_start

e2e_lifecycle op

test_expect_success 'stop ksim' '
	ksim_stop
'

test_done
