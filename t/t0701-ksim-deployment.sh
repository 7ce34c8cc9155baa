#!/bin/sh
test_description='ksim simulated cluster: Deployments, ReplicaSets and pods as kube-controller-manager and a kubelet keep them'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"

F="$TEST_DIRECTORY/t0701-ksim-deployment"
R="$TEST_DATA/recordings/deployment"
NS=rec-deploy

ksim_start --pod-start-delay 300ms --pod-run-duration 500ms

k () {
	kubectl --request-timeout=20s "$@"
}

# Distinct condition states of generation $2 in watch file $1.
conds () {
	jq -s -c --argjson gen "$2" -f "$F/conditions.jq" "$1"
}

kubectl create namespace $NS >/dev/null
RV=$(curl -sS "$KSIM_URL/api/v1/namespaces" | jq -r .metadata.resourceVersion)
for r in apis/apps/v1/deployments apis/apps/v1/replicasets api/v1/pods; do
	curl -sSN -o "watch.${r##*/}" "$KSIM_URL/$r?watch=true&resourceVersion=$RV&timeoutSeconds=120" &
	echo $! >>watch.pids
done

test_expect_success 'a Deployment reaches ready: READY 2/2, its ReplicaSet and pods' '
	k apply --server-side --field-manager iot-operator -f "$F/web.yaml" >out &&
	ksim_wait_json 15 ".status.availableReplicas == 2 and
		(.status.conditions[] | select(.type == \"Progressing\") | .reason) == \"NewReplicaSetAvailable\"" -n $NS deploy web &&
	k -n $NS get deploy web >table &&
	grep -E "^web +2/2 +2 +2 " table &&
	k -n $NS get rs -o json >rs.json &&
	jq -e ".items | length == 1" rs.json &&
	hash=$(jq -r ".items[0].metadata.labels[\"pod-template-hash\"]" rs.json) &&
	jq -e --arg h "$hash" ".items[0].metadata.name == \"web-\" + \$h and
		.items[0].spec.selector.matchLabels == {app: \"web\", \"pod-template-hash\": \$h} and
		.items[0].metadata.ownerReferences[0].kind == \"Deployment\" and
		.items[0].metadata.annotations == {\"deployment.kubernetes.io/desired-replicas\": \"2\",
			\"deployment.kubernetes.io/max-replicas\": \"3\", \"deployment.kubernetes.io/revision\": \"1\"}" rs.json &&
	k -n $NS get pods -o json >pods.json &&
	jq -e --arg h "$hash" "[.items[] | select(.metadata.name | test(\"^web-\" + \$h + \"-[bcdfghjklmnpqrstvwxz2456789]{5}\$\"))
		| select(.status.phase == \"Running\" and .metadata.labels[\"pod-template-hash\"] == \$h
			and (.status.conditions[] | select(.type == \"Ready\") | .status) == \"True\"
			and .status.containerStatuses[0].ready and .spec.nodeName == \"ksim-node\")] | length == 2" pods.json &&
	k -n $NS get pods >table &&
	test $(grep -cE "^web-$hash-[a-z0-9]{5} +1/1 +Running +0 " table) = 2
'

test_expect_success 'the create phase goes through the recorded condition states' '
	head -n 1 watch.deployments >added.json &&
	jq -e ".type == \"ADDED\" and .object.status == {}" added.json &&
	jq -c . "$R/deployments.watch.jsonl" >rec.jsonl &&
	conds rec.jsonl 1 >expect &&
	conds watch.deployments 1 >actual &&
	test_cmp expect actual
'

test_expect_success 'the revision annotation comes with the first status write, on /status, as recorded' '
	first="[.[] | select(.type == \"MODIFIED\")][0].object
		| [.metadata.annotations[\"deployment.kubernetes.io/revision\"], [.status.conditions[] | .type + \"/\" + .reason]]" &&
	jq -s -c "$first" "$R/deployments.watch.jsonl" >expect &&
	jq -s -c "$first" watch.deployments >actual &&
	test_cmp expect actual &&
	kcm="[.[].object.metadata.managedFields[]? | select(.manager == \"kube-controller-manager\")
		| \"\(.operation)/\(.subresource // \"\")\"] | unique" &&
	jq -s -c "$kcm" "$R/deployments.watch.jsonl" >expect &&
	jq -s -c "$kcm" watch.deployments >actual &&
	test_cmp expect actual
'

test_expect_success 'a pod-template change rolls the pods over to a new ReplicaSet' '
	k -n $NS set image deploy/web web=nginx:1.26 >out &&
	ksim_wait_json 20 ".status.observedGeneration == 2 and .status.updatedReplicas == 2 and
		.status.replicas == 2 and .status.availableReplicas == 2 and
		(.status.conditions[] | select(.type == \"Progressing\") | .reason) == \"NewReplicaSetAvailable\"" -n $NS deploy web &&
	k -n $NS get rs -o json >rs.json &&
	jq -e "[.items[] | {r: .metadata.annotations[\"deployment.kubernetes.io/revision\"], n: .spec.replicas,
		img: .spec.template.spec.containers[0].image}] | sort_by(.r) ==
		[{r: \"1\", n: 0, img: \"nginx:1.25\"}, {r: \"2\", n: 2, img: \"nginx:1.26\"}]" rs.json &&
	new=$(jq -r ".items[] | select(.spec.replicas == 2) | .metadata.labels[\"pod-template-hash\"]" rs.json) &&
	ksim_wait_json 10 "([.items[] | select(.metadata.labels[\"pod-template-hash\"] == \"$new\" and .status.phase == \"Running\")] | length == 2) and (.items | length == 2)" -n $NS pods &&
	k -n $NS get deploy web -o json >web.json &&
	jq -e ".metadata.annotations[\"deployment.kubernetes.io/revision\"] == \"2\"" web.json &&
	jq -c . "$R/deployments.watch.jsonl" >rec.jsonl &&
	conds rec.jsonl 2 >expect &&
	conds watch.deployments 2 >actual &&
	test_cmp expect actual
'

test_expect_success 'scaling to 3: Available false until the new pod is ready, as recorded' '
	k -n $NS patch deploy web --type merge -p "{\"spec\":{\"replicas\":3}}" >out &&
	ksim_wait_json 15 ".status.observedGeneration == 3 and .status.availableReplicas == 3 and
		(.status.conditions[] | select(.type == \"Available\") | .status) == \"True\"" -n $NS deploy web &&
	jq -c . "$R/deployments.watch.jsonl" >rec.jsonl &&
	conds rec.jsonl 3 >expect &&
	conds watch.deployments 3 >actual &&
	test_cmp expect actual &&
	k -n $NS get deploy web >table &&
	grep -E "^web +3/3 +3 +3 " table
'

test_expect_success 'the final status matches the recorded one (counts, conditions, fields)' '
	k -n $NS get deploy web -o json >web.json &&
	norm=".status | del(.conditions[].lastUpdateTime, .conditions[].lastTransitionTime)
		| .conditions |= (map(.message |= gsub(\"web-[a-z0-9]+\"; \"web-HASH\")) | sort_by(.type))" &&
	jq -S "$norm" "$R/deployment-final.json" >expect &&
	jq -S "$norm" web.json >actual &&
	test_cmp expect actual
'

test_expect_success 'status fields and managers are the recorded ones' '
	jq -s -c "[.[].object.status // {} | keys[]] | unique" "$R/deployments.watch.jsonl" >expect &&
	jq -s -c "[.[].object.status // {} | keys[]] | unique" watch.deployments >actual &&
	test_cmp expect actual &&
	jq -s -c "[.[].object.status // {} | keys[]] | unique" "$R/replicasets.watch.jsonl" >expect &&
	jq -s -c "[.[].object.status // {} | keys[]] | unique" watch.replicasets >actual &&
	test_cmp expect actual &&
	mf="[.[].object.metadata.managedFields[]? | \"\(.manager)/\(.operation)/\(.subresource // \"\")\"] | unique" &&
	jq -s -c "$mf" "$R/replicasets.watch.jsonl" >expect &&
	jq -s -c "$mf" watch.replicasets >actual &&
	test_cmp expect actual &&
	jq -s -c "$mf" watch.pods >actual &&
	echo "[\"kube-controller-manager/Update/\",\"kubelet/Update/status\"]" >expect &&
	test_cmp expect actual &&
	jq -s -e "[.[].object.metadata.managedFields[]? | select(.subresource == \"status\") | .manager] | unique == [\"kube-controller-manager\"]" watch.deployments
'

test_expect_success 'pods: ADDED Pending, then MODIFIED Running and Ready (kubelet), as recorded' '
	jq -s -c "[.[] | select(.object.metadata.name == .object.metadata.name) ] | group_by(.object.metadata.name) | map(map([.type, .object.status.phase]) | .[0:2]) | unique" "$R/pods.watch.jsonl" >expect &&
	jq -s -c "[.[] | select(.object.metadata.name == .object.metadata.name) ] | group_by(.object.metadata.name) | map(map([.type, .object.status.phase]) | .[0:2]) | unique" watch.pods >actual &&
	test_cmp expect actual
'

test_expect_success 'an image matching --broken-image stays not ready: ErrImagePull, then ImagePullBackOff' '
	k apply -f "$F/broken.yaml" >out &&
	ksim_wait_json 10 ".items[0].status.containerStatuses[0].state.waiting.reason == \"ImagePullBackOff\"" -n $NS pods -l app=bad &&
	curl -sS "$KSIM_URL/api/v1/namespaces/$NS/pods?watch=true&resourceVersion=$RV&timeoutSeconds=3&labelSelector=app%3Dbad" >bad.watch &&
	jq -r ".object.status.containerStatuses[0].state.waiting.reason // .object.status.phase" bad.watch >actual &&
	printf "Pending\nErrImagePull\nImagePullBackOff\n" >expect &&
	test_cmp expect actual &&
	k -n $NS get pods -l app=bad -o json >bad.json &&
	jq -e ".items[0].status | .phase == \"Pending\" and
		(.conditions[] | select(.type == \"Ready\") | .status == \"False\" and .reason == \"ContainersNotReady\"
			and .message == \"containers with unready status: [bad]\") and
		(.containerStatuses[0].state.waiting.message == \"Back-off pulling image \\\"registry.example/app:broken-1\\\"\")" bad.json &&
	sleep 1 &&
	k -n $NS get deploy bad -o json >bad.json &&
	jq -e ".status.unavailableReplicas == 1 and (.status.readyReplicas // 0) == 0 and
		(.status.conditions[] | select(.type == \"Available\") | .reason) == \"MinimumReplicasUnavailable\"" bad.json &&
	k -n $NS get pods -l app=bad >table &&
	grep -E "^bad-[a-z0-9]+-[a-z0-9]{5} +0/1 +ImagePullBackOff " table &&
	ksim_wait_json 10 "(.status.conditions[] | select(.type == \"Progressing\")) as \$p | \$p.status == \"False\" and
		\$p.reason == \"ProgressDeadlineExceeded\" and (\$p.message | test(\"^ReplicaSet \\\"bad-[a-z0-9]+\\\" has timed out progressing[.]\$\"))" -n $NS deploy bad
'

test_expect_success 'a restartPolicy Never pod runs, then Succeeds' '
	k apply -f "$F/job-pod.yaml" >out &&
	ksim_wait_json 10 ".status.phase == \"Succeeded\"" -n $NS pod once &&
	k -n $NS get pod once -o json >once.json &&
	jq -e ".status.containerStatuses[0].state.terminated | .exitCode == 0 and .reason == \"Completed\"" once.json &&
	k -n $NS get pod once >table &&
	grep -E "^once +0/1 +Completed " table
'

test_expect_success 'a Node exists and is Ready' '
	k get nodes >table &&
	grep -E "^ksim-node +Ready " table &&
	k get node ksim-node -o json >node.json &&
	jq -e "(.status.conditions[] | select(.type == \"Ready\") | .status) == \"True\"" node.json
'

# ksim adopts no orphan: the ReplicaSet the Deployment makes again takes the
# name of the orphan of the same template, and is refused until that one is gone
test_expect_success 'a Deployment made again over its orphaned ReplicaSets gets its own once they are gone' '
	k -n $NS delete deploy web --cascade=orphan >out &&
	ksim_wait_json 10 ".items | length >= 1 and all(.metadata.ownerReferences == null)" -n $NS rs -l app=web &&
	k apply --server-side --field-manager iot-operator -f "$F/web.yaml" >out &&
	sleep 1 &&	# (its sync is tried, and refused, meanwhile: it writes no status then)
	k -n $NS get deploy web -o json >web.json &&
	uid=$(jq -r .metadata.uid web.json) &&
	k -n $NS get rs -l app=web -o json >rs.json &&
	jq -e --arg u "$uid" "[.items[] | select(.metadata.ownerReferences[0].uid == \$u)] == []" rs.json &&
	k -n $NS delete rs -l app=web >out &&
	ksim_wait_json 15 ".status.availableReplicas == 2" -n $NS deploy web &&
	k -n $NS get rs -l app=web -o json >rs.json &&
	jq -e --arg u "$uid" "[.items[] | select(.metadata.ownerReferences[0].uid == \$u)] | length == 1" rs.json
'

test_expect_success 'deleting the Deployment deletes its ReplicaSets and pods' '
	k -n $NS delete deploy web >out &&
	ksim_wait_json 10 ".items == []" -n $NS rs,pods -l app=web
'

test_expect_success '--no-simulate: a Deployment stays as written' '
	for p in $(cat watch.pids); do kill $p 2>/dev/null; done
	ksim_stop &&
	(
		ksim_start --no-simulate &&
		kubectl create namespace $NS >/dev/null &&
		k apply -f "$F/web.yaml" >out &&
		sleep 1 &&
		k -n $NS get deploy web -o json >web.json &&
		jq -e ".status == {}" web.json &&
		k get rs,pods,nodes -A -o json >all.json &&
		jq -e ".items == []" all.json &&
		for r in statefulsets:"{replicas: 0, availableReplicas: 0}" replicasets:"{replicas: 0}"; do
			st=${r#*:} r=${r%%:*} &&
			curl -sS -f -m 10 -o $r.json -X POST -H "Content-Type: application/json" \
				-d "{\"metadata\":{\"name\":\"x\"},\"spec\":{\"selector\":{\"matchLabels\":{\"a\":\"b\"}},\"template\":{\"metadata\":{\"labels\":{\"a\":\"b\"}},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"i\"}]}}}}" \
				"$KSIM_URL/apis/apps/v1/namespaces/$NS/$r" &&
			jq -e ".status == $st" $r.json &&
			curl -sS -f -m 10 -o $r.get.json "$KSIM_URL/apis/apps/v1/namespaces/$NS/$r/x" &&
			jq -e ".status == $st" $r.get.json || exit 1
		done &&
		ksim_stop
	)
'

test_done
