#!/bin/sh
test_description='ksim simulated controllers: Jobs run to completion, CronJobs make Jobs on schedule, DaemonSets run a pod on each node, ReplicationControllers keep their pods, Endpoints and EndpointSlices follow Services and ready pods'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"

F="$TEST_DIRECTORY/t0711-ksim-controllers"
NS=ctl

ksim_start --pod-start-delay 200ms --pod-run-duration 300ms
ksim_kubectls

k () {
	kubectl --request-timeout=20s "$@"
}

test_expect_success 'setup' '
	k create namespace $NS >/dev/null &&
	k -n $NS apply -f "$F/workloads.yaml" >/dev/null
'

test_expect_success 'a Job runs its pods to completion: succeeded, completionTime, Complete' '
	ksim_wait_json 20 ".status.succeeded == 3 and (.status.conditions | map(select(.status == \"True\") | .type)) ==
		[\"SuccessCriteriaMet\", \"Complete\"] and (.status.completionTime | length > 0) and
		(.status | has(\"active\") | not)" -n $NS job three &&
	k -n $NS get pods -l job-name=three -o json >pods.json &&
	jq -e "[.items[] | .status.phase == \"Succeeded\" and .metadata.ownerReferences[0].kind == \"Job\" and
		.metadata.ownerReferences[0].apiVersion == \"batch/v1\" and .spec.nodeName == \"ksim-node\"] |
		length == 3 and all" pods.json &&
	k -n $NS get job three >table &&
	grep "^three" table
'

test_expect_success 'a suspended Job runs nothing until resumed' '
	k -n $NS create job held --image=busybox:1.36 --dry-run=client -o json |
		jq ".spec.suspend = true" | k -n $NS create -f - >/dev/null &&
	k -n $NS get pods -l job-name=held -o name >pods.txt &&
	! test -s pods.txt &&
	k -n $NS patch job held --type merge -p "{\"spec\":{\"suspend\":false}}" >/dev/null &&
	ksim_wait_json 20 ".status.succeeded == 1" -n $NS job held
'

test_expect_success 'a CronJob makes a Job when its schedule comes, owned by it, and keeps its status' '
	k -n $NS create cronjob tick --image=busybox:1.36 --schedule="@every 1s" >/dev/null &&
	cj=$(k -n $NS get cronjob tick -o jsonpath={.metadata.uid}) &&
	ksim_wait_json 20 "[.items[] | select(.metadata.ownerReferences[0].uid == \"$cj\")] | length >= 1 and
		(map(.status.succeeded == 1) | all)" -n $NS jobs &&
	jq -e --arg u "$cj" "[.items[] | select(.metadata.ownerReferences[0].uid == \$u)] |
		map((.metadata.name | test(\"^tick-[0-9]+\$\")) and .metadata.ownerReferences[0].kind == \"CronJob\" and
			(.metadata.annotations[\"batch.kubernetes.io/cronjob-scheduled-timestamp\"] | length > 0)) | all" wait.json &&
	ksim_wait_json 20 "(.status.lastScheduleTime | length > 0) and (.status.lastSuccessfulTime | length > 0)" -n $NS cronjob tick
'

test_expect_success 'a suspended CronJob makes no Job; an invalid schedule is refused' '
	k -n $NS create cronjob later --image=busybox:1.36 --schedule="0 0 1 1 *" >/dev/null &&
	k -n $NS get cronjob later -o json >cj.json &&
	jq -e ".spec.concurrencyPolicy == \"Allow\" and .spec.successfulJobsHistoryLimit == 3 and .status == {}" cj.json &&
	test_must_fail k -n $NS create cronjob bad --image=busybox:1.36 --schedule="61 * * * *" 2>err.txt &&
	grep "spec.schedule" err.txt
'

test_expect_success 'a DaemonSet runs one pod on the node, and replaces it when its template changes' '
	ksim_wait_json 20 ".status.desiredNumberScheduled == 1 and .status.numberReady == 1 and .status.currentNumberScheduled == 1" \
		-n $NS ds agent &&
	k -n $NS get pods -l app=agent -o json >pods.json &&
	jq -e ".items | length == 1 and .[0].spec.nodeName == \"ksim-node\" and
		.[0].metadata.ownerReferences[0].kind == \"DaemonSet\"" pods.json &&
	old=$(jq -r ".items[0].metadata.name" pods.json) &&
	k -n $NS set image ds/agent c=busybox:1.37 >/dev/null &&
	ksim_wait_json 20 ".items | length == 1 and .[0].spec.containers[0].image == \"busybox:1.37\" and
		.[0].status.phase == \"Running\"" -n $NS pods -l app=agent &&
	! grep -q "\"$old\"" wait.json
'

test_expect_success 'a ReplicationController keeps its pods: replaces a deleted one, follows a scale' '
	ksim_wait_json 20 ".status.readyReplicas == 2 and .status.replicas == 2" -n $NS rc legacy &&
	k -n $NS get pods -l app=legacy -o name >before.txt &&
	test $(wc -l <before.txt) -eq 2 &&
	k -n $NS delete $(head -1 before.txt) --wait=true >/dev/null &&
	ksim_wait_json 20 "[.items[] | select(.metadata.deletionTimestamp | not) | select(.status.phase == \"Running\")] | length == 2" \
		-n $NS pods -l app=legacy &&
	k -n $NS scale rc legacy --replicas=1 >/dev/null &&
	ksim_wait_json 20 ".status.replicas == 1" -n $NS rc legacy
'

test_expect_success 'Endpoints and EndpointSlice list the ready pods of the Service, named port resolved' '
	ksim_wait_json 20 ".subsets[0].addresses | length == 1" -n $NS endpoints legacy &&
	jq -e ".subsets[0].ports == [{name: \"web\", port: 8080, protocol: \"TCP\"}] and
		.subsets[0].addresses[0].targetRef.kind == \"Pod\"" wait.json &&
	ip=$(jq -r ".subsets[0].addresses[0].ip" wait.json) &&
	ksim_wait_json 20 ".items | length == 1 and (.[0].endpoints | length == 1) and .[0].endpoints[0].addresses == [\"$ip\"] and
		.[0].endpoints[0].conditions.ready and .[0].ports == [{name: \"web\", port: 8080, protocol: \"TCP\"}] and
		.[0].metadata.ownerReferences[0].kind == \"Service\"" \
		-n $NS endpointslices -l kubernetes.io/service-name=legacy
'

test_expect_success 'a pod that is not ready is listed as not ready' '
	k -n $NS run broken --image=busybox:broken --labels=app=legacy --dry-run=client -o json |
		jq ".spec.containers[0].ports = [{name: \"http\", containerPort: 8080}]" | k -n $NS create -f - >/dev/null &&
	ksim_wait_json 20 ".status.podIP | length > 0" -n $NS pod broken &&
	ksim_wait_json 20 ".subsets[0].notReadyAddresses | length == 1" -n $NS endpoints legacy &&
	jq -e ".subsets[0].notReadyAddresses[0].targetRef.name == \"broken\"" wait.json &&
	ksim_wait_json 20 ".items[0].endpoints | map(select(.conditions.ready == false)) | length == 1" \
		-n $NS endpointslices -l kubernetes.io/service-name=legacy
'

test_expect_success 'an Endpoints or EndpointSlice deleted while its Service stays is made again (a quiet namespace)' '
	k create namespace quiet >/dev/null &&
	k -n quiet run web --image=busybox:1.36 --labels=app=web >/dev/null &&
	k -n quiet create service clusterip web --tcp=80:8080 -o json --dry-run=client |
		jq ".spec.selector = {app: \"web\"}" | k -n quiet create -f - >/dev/null &&
	ksim_wait_json 20 "(.subsets[0].addresses | length) == 1" -n quiet endpoints web &&
	ksim_wait_json 20 ".items | length == 1 and (.[0].endpoints | length == 1)" \
		-n quiet endpointslices -l kubernetes.io/service-name=web &&
	sleep 1 &&
	k -n quiet delete endpoints web >/dev/null &&
	ksim_wait_json 20 "(.subsets[0].addresses | length) == 1" -n quiet endpoints web &&
	k -n quiet delete endpointslices -l kubernetes.io/service-name=web >/dev/null &&
	ksim_wait_json 20 ".items | length == 1 and (.[0].endpoints | length == 1)" \
		-n quiet endpointslices -l kubernetes.io/service-name=web
'

test_expect_success 'when the Service goes, so do its Endpoints and EndpointSlice' '
	k -n $NS delete svc legacy >/dev/null &&
	ksim_wait_json 20 ".items | length == 0" -n $NS endpoints --field-selector metadata.name=legacy &&
	ksim_wait_json 20 ".items | length == 0" -n $NS endpointslices -l kubernetes.io/service-name=legacy
'

test_expect_success 'with every kubectl: the workloads read back, DaemonSets and ReplicationControllers in the columns of a real server' '
	for v in $versions; do
		"$v" -n $NS get jobs,cronjobs,daemonsets,replicationcontrollers,endpoints,endpointslices >out 2>err ||
		{ cat err; exit 1; }
		"$v" -n $NS get ds agent >ds.txt &&
		grep -E "^NAME +DESIRED +CURRENT +READY +UP-TO-DATE +AVAILABLE +NODE SELECTOR +AGE\$" ds.txt &&
		grep -E "^agent +1 +1 +1 +1 +1 +<none> +" ds.txt &&
		"$v" -n $NS get rc legacy -o wide >rc.txt &&
		grep -E "^NAME +DESIRED +CURRENT +READY +AGE +CONTAINERS +IMAGES +SELECTOR\$" rc.txt &&
		grep -E "^legacy +1 +1 +1 +[0-9a-z]+ +c +busybox:1.36 +app=legacy\$" rc.txt || { cat ds.txt rc.txt; exit 1; }
	done
'

ksim_stop

test_done
