#!/bin/sh
test_description='kapply: the objects of a namespace wait for its RoleBinding (README, the operator'"'"'s rights), and a 403 right after it is retried a bounded number of times

Runs against the canned-reply server of t3003 (fake-api.py), which logs when
each request arrived: the RoleBinding'"'"'s answer comes a second late.'
. "${0%/*}/test-lib.sh"

. "$TEST_DIRECTORY/lib-fake-api.sh"

# requests PATH-SUFFIX: how many PATCH requests for it reached the server
requests () {
	jq -r --arg s "$1" 'select(.method == "PATCH" and (.path | endswith($s))) | .path' requests.jsonl | wc -l
}

# at PATH-SUFFIX: when the first request for it arrived
at () {
	jq -r --arg s "$1" 'select(.path | endswith($s)) | .at' requests.jsonl | head -n 1
}

# result_for NAME FILTER: exactly one result line is for NAME, and FILTER holds for it
result_for () {
	jq -e -s --arg n "$1" "map(select(.ref.name == \$n)) | length == 1 and (.[0] | $2)" out >/dev/null
}

test_expect_success 'setup' '
	fake_api_start "$FIXTURES/script.json" n1
'

test_expect_success 'a namespace, its RoleBinding, two ConfigMaps in it and one elsewhere, in one stream' '
	{
		echo "{\"op\":\"apply\",\"primary\":\"o/x\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"n1\"}}}" &&
		echo "{\"op\":\"apply\",\"primary\":\"o/x\",\"object\":{\"apiVersion\":\"rbac.authorization.k8s.io/v1\",\"kind\":\"RoleBinding\",\"metadata\":{\"name\":\"iot-operator-instance\",\"namespace\":\"n1\"},\"roleRef\":{\"apiGroup\":\"rbac.authorization.k8s.io\",\"kind\":\"ClusterRole\",\"name\":\"iot-operator-instance\"},\"subjects\":[{\"kind\":\"ServiceAccount\",\"name\":\"op\",\"namespace\":\"o\"}]}}" &&
		for c in c1 c2; do
			echo "{\"op\":\"apply\",\"primary\":\"o/x\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"$c\",\"namespace\":\"n1\"},\"data\":{\"k\":\"v\"}}}"
		done &&
		echo "{\"op\":\"apply\",\"primary\":\"o/y\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"c3\",\"namespace\":\"other\"},\"data\":{\"k\":\"v\"}}}"
	} >in &&
	timeout 60 kapply --kubeconfig kubeconfig <in >out 2>err &&
	test_no_sanitizer_report err &&
	result_for n1 ".ok == true" &&
	result_for iot-operator-instance ".ok == true" &&
	result_for c1 ".ok == true and .code == 200" &&
	result_for c2 ".ok == false and .code == 403 and .reason == \"Forbidden\"" &&
	result_for c3 ".ok == false and .code == 403"
'

test_expect_success 'order: the RoleBinding after its namespace, the objects of the namespace only once it is written' '
	rb=$(at /rolebindings/iot-operator-instance) && ns=$(at /namespaces/n1) &&
	c1=$(at /configmaps/c1) && c2=$(at /configmaps/c2) &&
	echo "namespace $ns, RoleBinding $rb (answered 1 s later), c1 $c1, c2 $c2" &&
	awk -v ns="$ns" -v rb="$rb" -v c1="$c1" -v c2="$c2" \
		"BEGIN { exit !(rb >= ns && c1 >= rb + 1 && c2 >= rb + 1) }"
'

test_expect_success 'another namespace'"'"'s object does not wait for that RoleBinding, and its 403 is reported at once' '
	rb=$(at /rolebindings/iot-operator-instance) && c3=$(at /configmaps/c3) &&
	awk -v rb="$rb" -v c3="$c3" "BEGIN { exit !(c3 < rb + 1) }" &&
	test $(requests /namespaces/other/configmaps/c3) = 1 &&
	! grep "retrying apply of .*c3" err
'

test_expect_success 'a 403 right after the RoleBinding is retried: until it passes (c1), at most 3 times (c2)' '
	test $(requests /configmaps/c1) = 3 &&
	test $(requests /configmaps/c2) = 4 &&
	grep -c "retrying apply of '"'"'ConfigMap/n1/c1'"'"' in [0-9]* ms after 403 Forbidden: .*: a RoleBinding written in its namespace a moment ago may not be in force yet" err >n1 &&
	echo 2 >expect && test_cmp expect n1 &&
	grep -c "retrying apply of '"'"'ConfigMap/n1/c2'"'"' in [0-9]* ms after 403 Forbidden" err >n2 &&
	echo 3 >expect && test_cmp expect n2
'

fake_api_stop
test_done
