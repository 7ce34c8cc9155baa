#!/bin/sh
test_description='ksim makes what kube-controller-manager and kube-apiserver make: default ServiceAccount and kube-root-ca.crt in every namespace, the kubernetes Service, default ClusterRoles, a complete Node, replicas 0'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"

REC="$TEST_DATA/recordings/pods"

ksim_start --tls --token t0k3n
ksim_kubectls

test_expect_success 'every namespace there at start has its default ServiceAccount and kube-root-ca.crt' '
	for ns in default kube-system kube-public kube-node-lease; do
		ksim_wait_get 10 ".metadata.name == \"default\"" /api/v1/namespaces/$ns/serviceaccounts/default &&
		ksim_wait_get 10 ".data[\"ca.crt\"] | startswith(\"-----BEGIN CERTIFICATE-----\")" \
			/api/v1/namespaces/$ns/configmaps/kube-root-ca.crt || return 1
	done
'

test_expect_success 'the ServiceAccount is shaped as the recorded one' '
	sed -n "\$p" "$REC/default-serviceaccount.http.txt" >rec.json &&
	head -n 1 "$REC/default-serviceaccount.http.txt" | tr -d "\r" >expect.status &&
	ksim_curl -s -D headers -o sa.json /api/v1/namespaces/default/serviceaccounts/default &&
	head -n 1 headers | tr -d "\r" >actual.status &&
	test_cmp expect.status actual.status &&
	jq -S "{kind, apiVersion, md: (.metadata | keys), rest: (del(.kind, .apiVersion, .metadata) | keys)}" rec.json >expect &&
	jq -S "{kind, apiVersion, md: (.metadata | keys), rest: (del(.kind, .apiVersion, .metadata) | keys)}" sa.json >actual &&
	test_cmp expect actual
'

test_expect_success 'a new namespace gets both; a deleted one comes back' '
	kubectl create namespace fresh >/dev/null &&
	ksim_wait_get 10 ".metadata.name == \"default\"" /api/v1/namespaces/fresh/serviceaccounts/default &&
	ksim_wait_get 10 ".metadata.name == \"kube-root-ca.crt\"" /api/v1/namespaces/fresh/configmaps/kube-root-ca.crt &&
	uid=$(jq -r .metadata.uid wait.json) &&
	kubectl -n fresh delete configmap kube-root-ca.crt >/dev/null &&
	kubectl -n fresh delete serviceaccount default >/dev/null &&
	ksim_wait_get 10 ".metadata.uid != \"$uid\"" /api/v1/namespaces/fresh/configmaps/kube-root-ca.crt &&
	ksim_wait_get 10 ".metadata.name == \"default\"" /api/v1/namespaces/fresh/serviceaccounts/default
'

test_expect_success 'kube-root-ca.crt holds the CA of the kubeconfig (ksim --tls is its own CA)' '
	ksim_curl -s -o cm.json /api/v1/namespaces/default/configmaps/kube-root-ca.crt &&
	jq -j ".data[\"ca.crt\"]" cm.json >ca.pem &&
	jq -r ".clusters[0].cluster[\"certificate-authority-data\"]" "$TRASH/ksim.kubeconfig" | base64 -d >kc.pem &&
	test_cmp kc.pem ca.pem
'

test_expect_success 'the default/kubernetes Service, its Endpoints and EndpointSlice' '
	ksim_wait_get 10 ".spec.clusterIP == \"10.96.0.1\" and .spec.ports == [{name: \"https\", port: 443, protocol: \"TCP\", targetPort: 6443}] and
		.metadata.labels == {component: \"apiserver\", provider: \"kubernetes\"}" /api/v1/namespaces/default/services/kubernetes &&
	ksim_wait_get 10 ".subsets[0].ports[0].port == 6443" /api/v1/namespaces/default/endpoints/kubernetes &&
	ksim_wait_get 10 ".endpoints[0].conditions.ready" /apis/discovery.k8s.io/v1/namespaces/default/endpointslices/kubernetes &&
	for v in $versions; do
		"$v" get svc kubernetes >svc.txt && grep -E "^kubernetes +ClusterIP +10.96.0.1 " svc.txt || return 1
	done
'

test_expect_success 'the Node: nodeInfo complete, addresses, capacity, allocatable, conditions' '
	ksim_wait_get 10 ".status.nodeInfo | (.bootID, .kernelVersion, .machineID, .systemUUID, .osImage,
		.containerRuntimeVersion, .kubeletVersion, .kubeProxyVersion, .operatingSystem, .architecture) | length > 0" \
		/api/v1/nodes/ksim-node &&
	jq -e ".status | (.addresses | map(.type) == [\"InternalIP\", \"Hostname\"]) and .capacity.pods == \"110\" and
		.allocatable.cpu == \"2\" and ([.conditions[].type] == [\"MemoryPressure\", \"DiskPressure\", \"PIDPressure\", \"Ready\"]) and
		(.nodeInfo.machineID | test(\"^[0-9a-f]{32}\$\"))" wait.json &&
	for v in $versions; do
		"$v" get node ksim-node -o wide >node.txt && grep -E "^ksim-node +Ready " node.txt || return 1
	done
'

test_expect_success 'create answers status replicas 0 where a real server does' '
	kubectl create namespace w >/dev/null &&
	body="{\"metadata\":{\"name\":\"x\"},\"spec\":{\"selector\":{\"matchLabels\":{\"a\":\"b\"}},\"template\":{\"metadata\":{\"labels\":{\"a\":\"b\"}},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"i\"}]}}}}" &&
	for r in statefulsets:"{replicas: 0, availableReplicas: 0}" replicasets:"{replicas: 0}" deployments:"{}" \
		daemonsets:"{currentNumberScheduled: 0, numberMisscheduled: 0, desiredNumberScheduled: 0, numberReady: 0}"; do
		st=${r#*:} r=${r%%:*} &&
		ksim_curl -s -f -o $r.json -X POST -H "Content-Type: application/json" -d "$body" /apis/apps/v1/namespaces/w/$r &&
		jq -e ".status == $st" $r.json || { echo "$r:"; cat $r.json; return 1; }
	done
'

test_expect_success 'pods the controllers make name a ServiceAccount that exists' '
	kubectl -n w create deployment web --image=nginx:1.25 >/dev/null &&
	ksim_wait_get 10 ".items | length == 1" "/api/v1/namespaces/w/pods?labelSelector=app%3Dweb" &&
	sa=$(jq -r ".items[0].spec.serviceAccountName" wait.json) &&
	ksim_curl -s -f -o /dev/null /api/v1/namespaces/w/serviceaccounts/$sa
'

test_expect_success '--no-simulate: a bare API server makes none of them' '
	ksim_stop &&
	(
		ksim_start --no-simulate &&
		ksim_curl -s -o sa.json /api/v1/serviceaccounts &&
		ksim_curl -s -o cm.json /api/v1/configmaps &&
		ksim_curl -s -o svc.json /api/v1/services &&
		jq -e ".items == []" sa.json cm.json svc.json &&
		ksim_stop
	)
'

test_expect_success '--authorization rbac: the default ClusterRoles and their bindings' '
	printf "alice-token,alice\n" >tokens.csv &&
	(
		ksim_start --authorization rbac --token t0k3n --token-file tokens.csv --no-simulate &&
		ksim_curl -s -o cr.json /apis/rbac.authorization.k8s.io/v1/clusterroles &&
		jq -r ".items[].metadata.name" cr.json >names &&
		for r in cluster-admin admin edit view system:basic-user system:discovery system:public-info-viewer \
			system:monitoring system:node system:kube-controller-manager system:kube-scheduler; do
			grep -qx "$r" names || { echo "no ClusterRole $r"; exit 1; }
		done &&
		jq -e ".items[] | select(.metadata.name == \"cluster-admin\") | .rules ==
			[{verbs: [\"*\"], apiGroups: [\"*\"], resources: [\"*\"]}, {verbs: [\"*\"], nonResourceURLs: [\"*\"]}]" cr.json &&
		jq -e ".items[] | select(.metadata.name == \"system:discovery\") | .rules[0].nonResourceURLs | index(\"/openapi/*\")" cr.json &&
		jq -e ".items[] | select(.metadata.name == \"view\") | .aggregationRule.clusterRoleSelectors[0].matchLabels ==
			{\"rbac.authorization.k8s.io/aggregate-to-view\": \"true\"}" cr.json &&
		ksim_curl -s -o crb.json /apis/rbac.authorization.k8s.io/v1/clusterrolebindings &&
		jq -e "[.items[] | {(.metadata.name): [.subjects[]?.name]}] | add |
			.[\"cluster-admin\"] == [\"system:masters\"] and .[\"system:discovery\"] == [\"system:authenticated\"] and
			.[\"system:public-info-viewer\"] == [\"system:authenticated\", \"system:unauthenticated\"]" crb.json &&
		# the view role, bound to alice: she reads pods but may not create them nor read secrets
		ksim_curl -s -o /dev/null -X POST -H "Content-Type: application/json" \
			-d "{\"metadata\":{\"name\":\"alice-view\"},\"roleRef\":{\"apiGroup\":\"rbac.authorization.k8s.io\",\"kind\":\"ClusterRole\",\"name\":\"view\"},\"subjects\":[{\"kind\":\"User\",\"name\":\"alice\"}]}" \
			/apis/rbac.authorization.k8s.io/v1/clusterrolebindings &&
		as_alice () { curl -sS -k -m 10 -o /dev/null -w "%{http_code}\n" -H "Authorization: Bearer alice-token" "$@"; } &&
		test "$(as_alice "$KSIM_URL/api/v1/namespaces/default/pods")" = 200 &&
		test "$(as_alice "$KSIM_URL/apis/batch/v1/namespaces/default/cronjobs")" = 200 &&
		test "$(as_alice "$KSIM_URL/api/v1/namespaces/default/secrets")" = 403 &&
		test "$(as_alice -X POST -H "Content-Type: application/json" -d "{\"metadata\":{\"name\":\"x\"}}" \
			"$KSIM_URL/api/v1/namespaces/default/configmaps")" = 403 &&
		ksim_stop
	)
'

test_done
