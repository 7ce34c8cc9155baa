#!/bin/sh
test_description='deploy/crd.yaml: what the IoTService schema refuses at create (the images of the components always run), with kube-apiserver'"'"'s wording, on ksim with kubectl 1.27 and 1.33'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"

K27=/usr/lib/google-cloud-sdk/bin/kubectl.1.27
K33=/usr/lib/google-cloud-sdk/bin/kubectl.1.33
test -x "$K27" && test -x "$K33" || test_skip_all 'kubectl 1.27 and 1.33 are needed'
command -v kapply >/dev/null || test_skip_all 'kapply not built'

ksim_start --no-simulate || exit 1

# body NAME FILTER >FILE: the example IoTService as JSON, named NAME, FILTER applied
body () {
	jq -c "select(.kind == \"IoTService\") | .metadata.name = \"$1\" | $2" example.jsonl
}

test_expect_success 'setup: the CRD and the operator namespace' '
	kapply -f "$PROJECT_ROOT/deploy/crd.yaml" >crd.out &&
	kapply -f "$PROJECT_ROOT/deploy/namespace.yaml" >ns.out &&
	! grep "\"ok\":false" crd.out ns.out &&
	"$KOP_TEST_TOOL" yaml "$PROJECT_ROOT/deploy/example-iotservice.yaml" >example.jsonl
'

test_expect_success 'the example validates (kubectl 1.27 and 1.33)' '
	for v in 27 33; do
		body ok$v . >ok$v.json &&
		eval "timeout 30 \"\$K$v\" create -f ok$v.json" >out 2>err || { cat err; return 1; }
		echo "iotservice.cp.iot.sap/ok$v created" >expect && test_cmp expect out || return 1
	done
'

test_expect_success 'an empty image: refused at create, the field and the rule named as kube-apiserver does' '
	for v in 27 33; do
		body empty$v ".spec.mms.image = \"\"" >empty$v.json &&
		eval "test_expect_code 1 timeout 30 \"\$K$v\" create -f empty$v.json" >out 2>err &&
		echo "The IoTService \"empty$v\" is invalid: spec.mms.image: Invalid value: \"\": spec.mms.image in body should be at least 1 chars long" >expect &&
		test_cmp expect err || return 1
	done &&
	test_expect_code 1 timeout 30 "$K33" get iotservice -n devawsk8s empty33 >out 2>err &&
	grep "NotFound" err
'

test_expect_success 'a missing image: Required value, in the API status as kube-apiserver words it' '
	body raw "del(.spec.cockpit.image)" >raw.json &&
	ksim_curl -o resp.json -w "%{http_code}\n" -X POST -H "Content-Type: application/json" --data-binary @raw.json \
		/apis/cp.iot.sap/v1/namespaces/devawsk8s/iotservices >code &&
	echo 422 >expect && test_cmp expect code &&
	jq -c "[.reason, .message, .details.causes]" resp.json >actual &&
	echo "[\"Invalid\",\"IoTService.cp.iot.sap \\\"raw\\\" is invalid: spec.cockpit.image: Required value\",[{\"reason\":\"FieldValueRequired\",\"message\":\"Required value\",\"field\":\"spec.cockpit.image\"}]]" >expect &&
	test_cmp expect actual
'

test_expect_success 'spec: {} names the five images always needed, and no other field' '
	body none ".spec = {}" >none.json &&
	test_expect_code 1 timeout 30 "$K27" create -f none.json >out 2>err &&
	cat >expect <<-\EOF &&
	The IoTService "none" is invalid: 
	* spec.cockpit.image: Required value
	* spec.gateway.mqtt.image: Required value
	* spec.gateway.rest.image: Required value
	* spec.haproxy.image: Required value
	* spec.mms.image: Required value
	EOF
	test_cmp expect err
'

test_expect_success 'v1alpha1 refuses them too' '
	body old "del(.spec.haproxy.image) | .apiVersion = \"cp.iot.sap/v1alpha1\"" >old.json &&
	test_expect_code 1 timeout 30 "$K33" create -f old.json >out 2>err &&
	echo "The IoTService \"old\" is invalid: spec.haproxy.image: Required value" >expect &&
	test_cmp expect err
'

# The images of core, core_spring, processing and postgresql are needed only when
# those run (core_spring.enabled, postgresql.size): the operator checks them
# (t2103), the schema cannot, and must not refuse a spec that leaves them out.
test_expect_success 'the images of components that may not run are not required by the schema' '
	body cond "del(.spec.core.image, .spec.postgresql.image) | .spec.core_spring.enabled = true | .spec.postgresql.size = 0" >cond.json &&
	timeout 30 "$K33" create -f cond.json >out 2>err &&
	echo "iotservice.cp.iot.sap/cond created" >expect && test_cmp expect out
'

test_expect_success 'ksim is still there' '
	ksim_stop
'

test_done
