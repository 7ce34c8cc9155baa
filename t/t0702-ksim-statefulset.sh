#!/bin/sh
test_description='ksim simulated cluster: StatefulSets (ordered pods, PVCs, rolling update) and LoadBalancer Services'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"

F="$TEST_DIRECTORY/t0702-ksim-statefulset"
R="$TEST_DATA/recordings/statefulset"
NS=rec-sts

ksim_start --pod-start-delay 300ms --lb-delay 500ms

k () {
	kubectl --request-timeout=20s "$@"
}

kubectl create namespace $NS >/dev/null
RV=$(curl -sS "$KSIM_URL/api/v1/namespaces" | jq -r .metadata.resourceVersion)
for r in apis/apps/v1/statefulsets api/v1/pods api/v1/persistentvolumeclaims api/v1/services; do
	curl -sSN -o "watch.${r##*/}" "$KSIM_URL/$r?watch=true&resourceVersion=$RV&timeoutSeconds=120" &
	echo $! >>watch.pids
done

# [type, name, phase, revision label] of the pod events
pod_events () {
	jq -c "[.type, .object.metadata.name, .object.status.phase,
		(.object.metadata.labels[\"controller-revision-hash\"] | sub(\"^db-\"; \"\") | length > 0)]" "$1"
}

test_expect_success 'a StatefulSet reaches ready: db-0 first, then db-1, PVCs bound' '
	k apply -f "$F/db.yaml" >out &&
	ksim_wait_json 15 ".status.readyReplicas == 2 and .status.currentRevision == .status.updateRevision" -n $NS sts db &&
	k -n $NS get sts db >table &&
	grep -E "^db +2/2 " table &&
	jq -c "select(.type == \"ADDED\") | .object.metadata.name" watch.pods >actual &&
	printf "\"db-0\"\n\"db-1\"\n" >expect &&
	test_cmp expect actual &&
	jq -s -e "(map(.object.metadata.name == \"db-1\") | index(true)) >
		(map(.object.metadata.name == \"db-0\" and .object.status.phase == \"Running\") | index(true))" watch.pods &&
	k -n $NS get pods -o json >pods.json &&
	rev=$(k -n $NS get sts db -o jsonpath="{.status.updateRevision}") &&
	jq -e --arg rev "$rev" "[.items[] | {n: .metadata.name, h: .spec.hostname, s: .spec.subdomain,
		r: .metadata.labels[\"controller-revision-hash\"], p: .metadata.labels[\"statefulset.kubernetes.io/pod-name\"],
		c: (.spec.volumes[] | select(.name == \"data\") | .persistentVolumeClaim.claimName)}] ==
		[{n: \"db-0\", h: \"db-0\", s: \"db\", r: \$rev, p: \"db-0\", c: \"data-db-0\"},
		 {n: \"db-1\", h: \"db-1\", s: \"db\", r: \$rev, p: \"db-1\", c: \"data-db-1\"}]" pods.json &&
	k -n $NS get pvc -o json >pvc.json &&
	jq -e "[.items[] | {n: .metadata.name, l: .metadata.labels, p: .status.phase, c: .status.capacity.storage,
		v: (.spec.volumeName | startswith(\"pvc-\")), f: .metadata.finalizers}] ==
		[{n: \"data-db-0\", l: {app: \"db\"}, p: \"Bound\", c: \"1Gi\", v: true, f: [\"kubernetes.io/pvc-protection\"]},
		 {n: \"data-db-1\", l: {app: \"db\"}, p: \"Bound\", c: \"1Gi\", v: true, f: [\"kubernetes.io/pvc-protection\"]}]" pvc.json &&
	k -n $NS get pvc >table &&
	grep -E "^data-db-0 +Bound +pvc-" table
'

test_expect_success 'a template change rolls the pods, highest ordinal first, one at a time' '
	old=$(k -n $NS get sts db -o jsonpath="{.status.currentRevision}") &&
	k -n $NS patch sts db --type merge -p "{\"spec\":{\"template\":{\"spec\":{\"containers\":[{\"name\":\"db\",\"image\":\"postgres:16.2\"}]}}}}" >out &&
	ksim_wait_json 20 ".status.observedGeneration == 2 and .status.readyReplicas == 2 and .status.updatedReplicas == 2 and
		.status.currentRevision == .status.updateRevision and .status.currentRevision != \"$old\"" -n $NS sts db &&
	jq -c "select(.type == \"DELETED\") | .object.metadata.name" watch.pods >actual &&
	printf "\"db-1\"\n\"db-0\"\n" >expect &&
	test_cmp expect actual &&
	jq -c "select(.type == \"DELETED\") | .object.metadata.name" "$R/pods.watch.jsonl" >expect &&
	test_cmp expect actual &&
	jq -s -e "(map(.type == \"DELETED\" and .object.metadata.name == \"db-0\") | index(true)) >
		(map(.object.metadata.name == \"db-1\" and .object.status.phase == \"Running\" and
			.object.metadata.labels[\"controller-revision-hash\"] != \"$old\") | index(true))" watch.pods &&
	k -n $NS get pods -o json >pods.json &&
	jq -e "[.items[].spec.containers[0].image] == [\"postgres:16.2\", \"postgres:16.2\"]" pods.json
'

test_expect_success 'status fields and the final status are the recorded ones' '
	jq -s -c "[.[].object.status // {} | keys[]] | unique" "$R/statefulsets.watch.jsonl" >expect &&
	jq -s -c "[.[].object.status // {} | keys[]] | unique" watch.statefulsets >actual &&
	test_cmp expect actual &&
	norm=".status | .currentRevision |= sub(\"-[a-z0-9]+\$\"; \"-H\") | .updateRevision |= sub(\"-[a-z0-9]+\$\"; \"-H\")" &&
	jq -S "$norm" "$R/statefulset-final.json" >expect &&
	k -n $NS get sts db -o json >sts.json &&
	jq -S "$norm" sts.json >actual &&
	test_cmp expect actual &&
	mf="[.[].object.metadata.managedFields[]? | select(.manager == \"kube-controller-manager\") | \"\(.operation)/\(.subresource // \"\")\"] | unique" &&
	jq -s -c "$mf" "$R/statefulsets.watch.jsonl" >expect &&
	jq -s -c "$mf" watch.statefulsets >actual &&
	test_cmp expect actual
'

test_expect_success 'a LoadBalancer Service gets an ingress IP after --lb-delay; clusterIP at create' '
	k -n $NS get svc db-public -o json >svc.json &&
	jq -e ".spec.clusterIP | test(\"^10\\\\.96\\\\.[0-9]+\\\\.[0-9]+\$\")" svc.json &&
	ksim_wait_json 10 ".status.loadBalancer.ingress[0].ip | test(\"^[0-9.]+\$\")" -n $NS svc db-public &&
	jq -c "[.type, (.object.status.loadBalancer.ingress | length)]" watch.services >actual &&
	jq -c "[.type, (.object.status.loadBalancer.ingress | length)]" "$R/services.watch.jsonl" >expect &&
	test_cmp expect actual &&
	ip=$(k -n $NS get svc db-public -o jsonpath="{.status.loadBalancer.ingress[0].ip}") &&
	k -n $NS get svc >table &&
	grep -E "^db-public +LoadBalancer +10\.96\.[0-9.]+ +$ip +5432:[0-9]+/TCP|^db-public +LoadBalancer +10\.96\.[0-9.]+ +$ip +5432/TCP" table
'

test_expect_success 'kubectl get deploy,sts,pods,svc reads as on a cluster' '
	k -n $NS get deploy,sts,pods,svc >table &&
	grep -E "^statefulset.apps/db +2/2 " table &&
	test $(grep -cE "^pod/db-[01] +1/1 +Running +0 " table) = 2 &&
	grep -E "^service/db-public +LoadBalancer " table
'

test_expect_success 'scaling down removes the highest ordinal; PVCs stay' '
	k -n $NS patch sts db --type merge -p "{\"spec\":{\"replicas\":1}}" >out &&
	ksim_wait_json 10 "[.items[].metadata.name] == [\"db-0\"]" -n $NS pods &&
	ksim_wait_json 10 ".status.replicas == 1 and .status.readyReplicas == 1" -n $NS sts db &&
	k -n $NS get pvc -o json >pvc.json &&
	jq -e "[.items[].metadata.name] == [\"data-db-0\", \"data-db-1\"]" pvc.json
'

test_expect_success 'deleting the namespace: pods go, pvc-protection released, namespace gone' '
	for p in $(cat watch.pids); do kill $p 2>/dev/null; done
	k delete namespace $NS --wait=false >out &&
	test_wait_for 20 sh -c "! kubectl --request-timeout=5s get namespace $NS" &&
	ksim_stop
'

test_done
