#!/bin/sh
test_description='pipeline/iotservice: the desired objects of an instance (sync.jq through jq 1.6 and lib/render)'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-iotservice.sh"

X=example-iotservice
I=devawsk8s-example-iotservice

# desired PARENT-FILTER NAME: NAME.json is the resolved answer for the
# example changed by PARENT-FILTER, with nothing in the cluster yet but its
# instance namespace (until that is seen, only the namespace is desired).
desired () {
	iot_parent "$1" >"$2.parent.json" &&
	iot_own_ns "$2.parent.json" >"$2.ns.json" &&
	iot_input "$2.parent.json" "$2.ns.json" >"$2.in.json" &&
	iot_sync "$2.in.json" "$2.json"
}

# bare PARENT-FILTER NAME: as desired, with nothing in the cluster at all.
bare () {
	iot_parent "$1" >"$2.parent.json" &&
	iot_input "$2.parent.json" >"$2.in.json" &&
	iot_sync "$2.in.json" "$2.json"
}

# changed A B: "Kind name" of every child that differs between two answers
# (added, removed or changed), sorted.
changed () {
	jq -n -r --slurpfile a "$1" --slurpfile b "$2" '
		def index_of($o): $o.children | map({key: "\(.kind) \(.metadata.name)", value: .}) | from_entries;
		index_of($a[0]) as $x | index_of($b[0]) as $y
		| (($x | keys) + ($y | keys) | unique)[] | select($x[.] != $y[.])'
}

test_expect_success 'the example: every object of the inventory, in the instance namespace' '
	desired . base &&
	jq -r ".children[] | \"\(.kind) \(.metadata.namespace // \"-\") \(.metadata.name)\"" base.json >actual &&
	cat >expect <<-EOT &&
	Namespace - $I
	RoleBinding $I iot-operator-instance
	Secret $I image-pull-secret
	Secret $I iotservice-$X
	NetworkPolicy $I deny-not-instance-$X
	Deployment $I cockpit-$X
	Deployment $I core-spring-$X
	Deployment $I processing-$X
	Deployment $I gateway-rest-$X
	Deployment $I haproxy-$X
	Deployment $I postgresql-$X
	StatefulSet $I gateway-mqtt-$X
	StatefulSet $I messaging-$X
	Service $I cockpit-$X
	Service $I core-spring-$X
	Service $I processing-$X
	Service $I gateway-rest-$X
	Service $I iot-$X
	Service $I postgresql-$X
	Service $I gateway-mqtt-$X
	Service $I messaging-$X
	EOT
	test_cmp expect actual
'

test_expect_success 'the example: the whole desired state (golden)' '
	jq .children base.json >actual.json &&
	test_cmp_json "$FIXTURES/example.children.json" actual.json
'

test_expect_success 'every object carries the ownership labels' '
	jq -r ".children[] | select(.metadata.labels[\"app.kubernetes.io/managed-by\"] != \"iot-operator\"
		or .metadata.labels[\"cp.iot.sap/operator\"] != \"devawsk8s\"
		or .metadata.labels[\"cp.iot.sap/instance\"] != \"$X\") | .metadata.name" base.json >actual &&
	test_cmp /dev/null actual &&
	jq -r ".children[] | select(.spec.template) | select(.spec.selector.matchLabels != {instance: \"$X\", component: .spec.template.spec.containers[0].name}) | .metadata.name" base.json >actual &&
	test_cmp /dev/null actual
'

test_expect_success 'config.yml in the Secret is the vector; checksum/config its MD5 (postgresql: none)' '
	jq -r ".children[] | select(.kind == \"Secret\" and .metadata.name == \"iotservice-$X\") | .type, (.stringData | tostring), .data[\"config.yml\"]" base.json >secret &&
	sed -n 1p secret >type && echo Opaque >expect && test_cmp expect type &&
	sed -n 2p secret >sd && echo null >expect && test_cmp expect sd &&
	sed -n 3p secret | base64 -d >config.yml &&
	test_cmp "$IOT_VECTORS/example-iotservice.config.yml" config.yml &&
	sum=$(md5sum <config.yml | cut -d" " -f1) &&
	jq -r ".children[] | select(.spec.template) | \"\(.metadata.name) \(.spec.template.metadata.annotations[\"checksum/config\"])\"" base.json >actual &&
	cat >expect <<-EOT &&
	cockpit-$X $sum
	core-spring-$X $sum
	processing-$X $sum
	gateway-rest-$X $sum
	haproxy-$X $sum
	postgresql-$X null
	gateway-mqtt-$X $sum
	messaging-$X $sum
	EOT
	test_cmp expect actual
'

test_expect_success 'the pull secret is a copy of the source (type and data)' '
	jq -c ".children[] | select(.metadata.name == \"image-pull-secret\") | {type, data}" base.json >actual &&
	echo "{\"type\":\"kubernetes.io/dockerconfigjson\",\"data\":{\".dockerconfigjson\":\"eyJhdXRocyI6e319\"}}" >expect &&
	test_cmp expect actual
'

test_expect_success 'a second run on the same input gives the same answer' '
	iot_sync base.in.json again.json &&
	test_cmp base.json again.json
'

WORKLOADS_WITH_CONFIG="Deployment_cockpit-$X Deployment_core-spring-$X Deployment_processing-$X Deployment_gateway-rest-$X Deployment_haproxy-$X StatefulSet_gateway-mqtt-$X StatefulSet_messaging-$X"

test_expect_success 'edit: an image changes only its Deployment' '
	desired ".spec.cockpit.image = \"registry/cockpit:5\"" edit &&
	changed base.json edit.json >actual &&
	echo "Deployment cockpit-$X" >expect &&
	test_cmp expect actual &&
	jq -r ".children[] | select(.metadata.name == \"cockpit-$X\" and .kind == \"Deployment\") | .spec.template.spec.containers[0].image" edit.json >actual &&
	echo registry/cockpit:5 >expect && test_cmp expect actual
'

test_expect_success 'edit: a size changes only its StatefulSet' '
	desired ".spec.gateway.mqtt.size = 3" edit &&
	changed base.json edit.json >actual &&
	echo "StatefulSet gateway-mqtt-$X" >expect &&
	test_cmp expect actual
'

test_expect_success 'edit: resources change only their Deployment, canonicalised' '
	desired ".spec.haproxy.resources = {limits: {memory: \"1024Mi\", cpu: \"0.5\"}, requests: {}}" edit &&
	changed base.json edit.json >actual &&
	echo "Deployment haproxy-$X" >expect &&
	test_cmp expect actual &&
	jq -c ".children[] | select(.metadata.name == \"haproxy-$X\" and .kind == \"Deployment\") | .spec.template.spec.containers[0].resources" edit.json >actual &&
	echo "{\"limits\":{\"memory\":\"1Gi\",\"cpu\":\"500m\"}}" >expect &&
	test_cmp expect actual
'

config_changes () {
	for w in $WORKLOADS_WITH_CONFIG; do echo "$w" | tr _ " "; done
	echo "Secret iotservice-$X"
}

test_expect_success 'edit: a config value changes the config Secret and the checksum of the workloads that mount it' '
	desired ".spec.domain_name = \"other.example\"" edit &&
	changed base.json edit.json >actual &&
	config_changes | sort >expect &&
	test_cmp expect actual
'

test_expect_success 'edit: a port changes the config, its workload and its Service' '
	desired ".spec.cockpit.container_port = \"8090\"" edit &&
	changed base.json edit.json >actual &&
	{ config_changes && echo "Service cockpit-$X"; } | sort >expect &&
	test_cmp expect actual &&
	jq -c ".children[] | select(.metadata.name == \"cockpit-$X\") | .spec.ports // .spec.template.spec.containers[0].ports, (.spec.template.spec.containers[0].env // empty)" edit.json >actual &&
	cat >expect <<-\EOT &&
	[{"name":"http","containerPort":8090}]
	[{"name":"CONTAINER_PORT","value":"8090"}]
	[{"name":"http","protocol":"TCP","port":8090,"targetPort":8090}]
	EOT
	test_cmp expect actual
'

test_expect_success 'edit: imagePullPolicy reaches every container (B10)' '
	desired ".spec.imagePullPolicy = \"IfNotPresent\"" edit &&
	jq -r "[.children[] | select(.spec.template) | .spec.template.spec.containers[0].imagePullPolicy] | unique[]" edit.json >actual &&
	echo IfNotPresent >expect && test_cmp expect actual
'

test_expect_success 'core_spring.enabled false: core instead of core-spring and processing' '
	desired ".spec.core_spring.enabled = false" edit &&
	changed base.json edit.json | grep -v "^Secret iotservice\|^StatefulSet\|^Deployment \(cockpit\|gateway-rest\|haproxy\)-" >actual &&
	cat >expect <<-EOT &&
	Deployment core-$X
	Deployment core-spring-$X
	Deployment processing-$X
	Service core-$X
	Service core-spring-$X
	Service processing-$X
	EOT
	test_cmp expect actual &&
	jq -r ".children[] | select(.metadata.name | test(\"^(core|core-spring|processing)-\")) | \"\(.kind) \(.metadata.name)\"" edit.json >actual &&
	printf "Deployment core-$X\nService core-$X\n" >expect &&
	test_cmp expect actual &&
	jq -c ".children[] | select(.metadata.name == \"core-$X\") | .spec.ports // [.spec.template.spec.containers[0] | .ports, .env]" edit.json >actual &&
	cat >expect <<-\EOT &&
	[[{"name":"http","containerPort":8161},{"name":"hazelcast","containerPort":5801}],[{"name":"CONTAINER_PORT_HTTP","value":"8161"},{"name":"CONTAINER_PORT_HAZELCAST","value":"5801"}]]
	[{"name":"http","protocol":"TCP","port":8161,"targetPort":8161},{"name":"hazelcast","protocol":"TCP","port":5801,"targetPort":5801}]
	EOT
	test_cmp expect actual
'

for size in 0 2
do
	test_expect_success "postgresql.size $size: no postgresql Deployment or Service" "
		desired '.spec.postgresql.size = $size' edit &&
		changed base.json edit.json >actual &&
		printf 'Deployment postgresql-$X\nService postgresql-$X\n' >expect &&
		test_cmp expect actual &&
		jq -e '[.children[] | select(.metadata.name == \"postgresql-$X\")] == []' edit.json
	"
done

test_expect_success 'enableNetworkPolicies false: no NetworkPolicy, nothing else changes' '
	desired ".spec.enableNetworkPolicies = false" edit &&
	changed base.json edit.json >actual &&
	echo "NetworkPolicy deny-not-instance-$X" >expect &&
	test_cmp expect actual
'

test_expect_success 'imagePullSecrets empty: pods carry no imagePullSecrets entry (B21)' '
	desired "del(.spec.imagePullSecrets)" edit &&
	jq -r ".children[] | select(.spec.template.spec.imagePullSecrets) | .metadata.name" edit.json >actual &&
	test_cmp /dev/null actual &&
	jq -r ".children[] | select(.spec.template) | .spec.template.spec.imagePullSecrets[0].name" base.json | sort -u >actual &&
	echo image-pull-secret >expect && test_cmp expect actual
'

test_expect_success 'tenant_exposed is rendered false whatever the spec says' '
	desired ".spec.gateway.mqtt.tenant_exposed = true" edit &&
	changed base.json edit.json >actual &&
	test_cmp /dev/null actual
'

test_expect_success 'a v1alpha1 object renders as the same v1 object (conversion None)' '
	desired ".apiVersion = \"cp.iot.sap/v1alpha1\"" edit &&
	changed base.json edit.json >actual &&
	test_cmp /dev/null actual
'

test_expect_success 'no source pull secret: no copy, the rest as before' '
	iot_input base.parent.json base.ns.json "{\"related\": {\"Secret.v1\": {\"devawsk8s/image-pull-secret\": null}}}" >in.json &&
	iot_sync in.json edit.json &&
	changed base.json edit.json >actual &&
	echo "Secret image-pull-secret" >expect &&
	test_cmp expect actual
'

test_expect_success 'an instance name too long for O-X gives nothing and Failed' '
	bare ".metadata.name = \"a-name-that-is-far-too-long-for-a-namespace-once-prefixed-xx\"" long &&
	jq -c "[(.children | length), .status.phase, .status.reason]" long.json >actual &&
	grep "^\[0,\"Failed\",\"invalid metadata.name .*devawsk8s-a-name-that-is-far-too-long-for-a-namespace-once-prefixed-xx.*not a valid namespace name" actual
'

# (the longest name that works: gateway-mqtt-X is a StatefulSet, at most 52)
test_expect_success 'an instance name too long for its StatefulSets gives nothing and Failed' '
	bare ".metadata.name = \"n23456789-123456789-123456789-12345678ab\"" long2 &&
	jq -c "[(.children | length), .status.phase, .status.reason]" long2.json >actual &&
	echo "[0,\"Failed\",\"invalid metadata.name \\\"n23456789-123456789-123456789-12345678ab\\\": gives the StatefulSet name '"'"'gateway-mqtt-n23456789-123456789-123456789-12345678ab'"'"', longer than 52 characters (its pods could not be created: their controller-revision-hash label would exceed 63)\"]" >expect &&
	test_cmp expect actual &&
	desired ".metadata.name = \"n23456789-123456789-123456789-123456789\"" long3 &&
	jq -c "[(.children | length), .status.phase]" long3.json >actual &&
	echo "[21,\"Processing\"]" >expect &&
	test_cmp expect actual
'

test_done
