#!/bin/sh
test_description='pipeline/iotservice on ksim: an invalid spec is Failed naming every invalid field at once, and a spec whose config Secret a server would refuse for its size is Failed with nothing created'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"

for t in ksim kapply iot-operator
do
	command -v $t >/dev/null || test_skip_all "$t not built"
done

ksim_start || exit 1

operator_stop () {
	test -s operator.pid || return 0
	kill -TERM "$(cat operator.pid)" 2>/dev/null
	i=0
	while kill -0 "$(cat operator.pid)" 2>/dev/null && test $i -lt 150; do sleep 0.1; i=$((i + 1)); done
	kill -KILL "$(cat operator.pid)" 2>/dev/null
	rm -f operator.pid
}
trap 'operator_stop; ksim_exit_trap_' EXIT

# create NAME FILTER: the example IoTService named NAME, FILTER applied, POSTed (201)
create () {
	jq -c "select(.kind == \"IoTService\") | .metadata.name = \"$1\" | $2" example.jsonl >"$1.json" &&
	ksim_curl -o "$1.resp" -w "%{http_code}\n" -X POST -H "Content-Type: application/json" \
		--data-binary @"$1.json" /apis/cp.iot.sap/v1/namespaces/devawsk8s/iotservices >"$1.code" &&
	echo 201 >expect.code && test_cmp expect.code "$1.code"
}

# failed NAME: the IoTService NAME is Failed for its current generation (into NAME.get)
failed () {
	ksim_curl -o "$1.get" "/apis/cp.iot.sap/v1/namespaces/devawsk8s/iotservices/$1" &&
	jq -e ".status.phase == \"Failed\" and .status.observedGeneration == .metadata.generation" "$1.get" >/dev/null
}

# warned NAME: a Warning event Failed on the IoTService NAME (into NAME.events)
warned () {
	ksim_curl -o "$1.events" "/api/v1/namespaces/devawsk8s/events?fieldSelector=involvedObject.name%3D$1" &&
	jq -e "any(.items[]; .type == \"Warning\" and .reason == \"Failed\")" "$1.events" >/dev/null
}

test_expect_success 'setup: CRD, operator namespace, the operator' '
	kapply -f "$PROJECT_ROOT/deploy/crd.yaml" >crd.out &&
	kapply -f "$PROJECT_ROOT/deploy/namespace.yaml" >ns.out &&
	! grep "\"ok\":false" crd.out ns.out &&
	"$KOP_TEST_TOOL" yaml "$PROJECT_ROOT/deploy/example-iotservice.yaml" >example.jsonl &&
	(OPERATOR_NAME=devawsk8s iot-operator --leader-elect=false --metrics-addr 0 \
		--program "$PROJECT_ROOT/pipeline/iotservice" >operator.out 2>operator.log </dev/null &
	 echo $! >operator.pid) &&
	test -s operator.pid
'

test_expect_success 'several invalid fields the schema lets through: one Failed status and one event naming them all' '
	create many ".spec.core.size = -1 | .spec.cockpit.container_port = \"abc\" | .spec.imagePullPolicy = \"Sometimes\"
		| .spec.mms.persistent_volume_claim_size = \"10 Gi\"" &&
	test_wait_for 60 failed many &&
	failed many &&
	cat >expect <<-\EOF &&
	invalid spec.core.size -1: must not be negative; spec.cockpit.container_port "abc": is not a port number (1-65535); spec.imagePullPolicy "Sometimes": must be Always, IfNotPresent or Never; spec.mms.persistent_volume_claim_size "10 Gi": is not a valid quantity
	EOF
	jq -r .status.reason many.get >actual && test_cmp expect actual &&
	test_wait_for 30 warned many &&
	warned many &&
	jq -r "[.items[] | select(.type == \"Warning\") | .message] | unique[]" many.events >actual &&
	test_cmp expect actual &&
	ksim_curl -o ns.json /api/v1/namespaces/devawsk8s-many &&
	jq -e ".code == 404" ns.json
'

# 1.2 MB: an IoTService a real server stores (under etcd's 1.5 MiB), whose
# config.yml a real server would not (over the 1 MiB of a Secret).
test_expect_success 'a 1.2 MB domain_name: Failed naming the config Secret and its size; no namespace, no Secret' '
	create big ".spec.domain_name = (\"d\" * 1200000)" &&
	test_wait_for 60 failed big &&
	failed big &&
	jq -r .status.reason big.get >reason &&
	grep "^invalid spec: renders the Secret devawsk8s-big/iotservice-big with at least [0-9]* bytes of data, more than the 1048576 bytes (1 MiB) a Secret may hold; its longest field is spec.domain_name (1200000 bytes)\$" reason &&
	test_wait_for 30 warned big &&
	warned big &&
	ksim_curl -o secrets.json "/api/v1/secrets?labelSelector=cp.iot.sap%2Finstance%3Dbig" &&
	jq -e ".items == []" secrets.json &&
	ksim_curl -o ns.json /api/v1/namespaces/devawsk8s-big &&
	jq -e ".code == 404" ns.json
'

test_expect_success 'the domain_name shortened: the instance proceeds' '
	ksim_curl -o patch.resp -X PATCH -H "Content-Type: application/merge-patch+json" \
		-d "{\"spec\":{\"domain_name\":\"big.example\"}}" \
		/apis/cp.iot.sap/v1/namespaces/devawsk8s/iotservices/big &&
	secret_there () {
		ksim_curl -o secret.json /api/v1/namespaces/devawsk8s-big/secrets/iotservice-big &&
		jq -e ".kind == \"Secret\"" secret.json >/dev/null
	} &&
	test_wait_for 60 secret_there &&
	secret_there
'

test_expect_success 'the operator and ksim are still there' '
	kill -0 "$(cat operator.pid)" &&
	operator_stop &&
	ksim_stop
'

test_done
