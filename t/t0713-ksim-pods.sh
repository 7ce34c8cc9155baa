#!/bin/sh
test_description='ksim keeps pods as a real server does: scheduled to the node, deleted gracefully, log/exec/attach/portforward answered as recorded'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"

REC="$TEST_DATA/recordings/pods"
NS=rec-pods

# the status line, the headers a test compares (Content-Type, and none for a 204), and the body of a recording or answer
status_of () {
	head -n 1 "$1" | tr -d "\r" | sed "s/ *\$//"
}
ctype_of () {
	tr -d "\r" <"$1" | sed -n "2,/^\$/p" | grep -i "^content-type:" | tr A-Z a-z
}
body_of () {
	tr -d "\r" <"$1" | sed "1,/^\$/d"
}

# Answer the request like the recording: METHOD PATH RECORDING
matches () {
	ksim_curl -s -D got.headers -o got.body -X "$1" "$2" &&
	status_of "$3" >expect.status &&
	status_of got.headers >actual.status &&
	test_cmp expect.status actual.status &&
	ctype_of "$3" >expect.ctype &&
	ctype_of got.headers >actual.ctype &&
	test_cmp expect.ctype actual.ctype &&
	body_of "$3" >expect.body &&
	test_cmp expect.body got.body
}

# An unscheduled pod: a bare API server (no scheduler, no kubelet) keeps it so.
ksim_start --no-simulate
ksim_kubectls

test_expect_success 'setup: the recorded pod, which no node runs' '
	kubectl create namespace $NS >/dev/null &&
	kubectl -n $NS run p1 --image=busybox >/dev/null
'

test_expect_success 'the stored pod has the defaults a real server fills in' '
	body_of "$REC/pod-unscheduled.http.txt" >rec.json &&
	ksim_curl -s -o pod.json /api/v1/namespaces/$NS/pods/p1 &&
	# the recorded server also projected an OpenShift service CA; the random volume suffix differs
	norm="del(.metadata.uid, .metadata.resourceVersion, .metadata.creationTimestamp, .metadata.managedFields) |
		.spec.volumes[0].name = \"V\" | .spec.containers[0].volumeMounts[0].name = \"V\" |
		.spec.volumes[0].projected.sources |= map(select(.configMap.name != \"openshift-service-ca.crt\"))" &&
	jq -S "$norm" rec.json >expect &&
	jq -S "$norm" pod.json >actual &&
	test_cmp expect actual
'

test_expect_success 'log of a pod no node runs: 204, as recorded' '
	matches GET /api/v1/namespaces/$NS/pods/p1/log "$REC/log-unscheduled.http.txt"
'

test_expect_success 'exec and portforward of a pod no node runs: 400 no host assigned, as recorded' '
	matches POST "/api/v1/namespaces/$NS/pods/p1/exec?command=true&stdout=true" "$REC/exec-unscheduled.http.txt" &&
	matches POST /api/v1/namespaces/$NS/pods/p1/portforward "$REC/portforward-unscheduled.http.txt" &&
	matches GET "/api/v1/namespaces/$NS/pods/p1/exec?command=true&stdout=true" "$REC/exec-unscheduled.http.txt" &&
	ksim_curl -s -o attach.json -w "%{http_code}\n" -X POST /api/v1/namespaces/$NS/pods/p1/attach >code &&
	echo 400 >expect && test_cmp expect code &&
	jq -e ".message == \"pod p1 does not have a host assigned\" and .reason == \"BadRequest\"" attach.json
'

test_expect_success 'log of a pod that does not exist: a JSON 404 Status, as recorded' '
	matches GET /api/v1/namespaces/$NS/pods/nope/log "$REC/log-missing-pod.http.txt" &&
	matches POST /api/v1/namespaces/$NS/pods/nope/exec "$REC/log-missing-pod.http.txt"
'

test_expect_success 'kubectl logs and exec say what a real server says' '
	for v in $versions; do
		"$v" -n $NS logs p1 >out 2>err && ! test -s out &&
		test_must_fail "$v" -n $NS exec p1 -- true 2>err &&
		grep "does not have a host assigned" err || { echo "$v:"; cat err; return 1; }
	done
'

test_expect_success 'the node subresources are in discovery' '
	ksim_curl -s -o v1.json /api/v1 &&
	jq -e "[.resources[] | select(.name | startswith(\"pods/\")) | [.name, .kind, (.verbs | join(\",\"))] | join(\" \")] ==
		[\"pods/attach PodAttachOptions create,get\", \"pods/exec PodExecOptions create,get\", \"pods/log Pod get\",
		 \"pods/portforward PodPortForwardOptions create,get\", \"pods/status Pod get,patch,update\"]" v1.json
'

test_expect_success 'a pod no node runs is deleted at once' '
	kubectl -n $NS delete pod p1 --wait=false >/dev/null &&
	ksim_curl -s -o /dev/null -w "%{http_code}\n" /api/v1/namespaces/$NS/pods/p1 >code &&
	echo 404 >expect && test_cmp expect code
'

test_expect_success 'a pod on a node is deleted gracefully: deletionTimestamp and grace period; 0 removes it' '
	kubectl -n $NS run p2 --image=busybox --overrides="{\"spec\":{\"nodeName\":\"other\"}}" >/dev/null &&
	ksim_curl -s -o del.json -w "%{http_code}\n" -X DELETE /api/v1/namespaces/$NS/pods/p2 >code &&
	echo 200 >expect && test_cmp expect code &&
	jq -e ".metadata.deletionGracePeriodSeconds == 30 and (.metadata.deletionTimestamp | length > 0)" del.json &&
	ksim_curl -s -o get.json /api/v1/namespaces/$NS/pods/p2 &&
	jq -e ".metadata.deletionGracePeriodSeconds == 30" get.json &&
	ksim_curl -s -o del.json -X DELETE "/api/v1/namespaces/$NS/pods/p2?gracePeriodSeconds=5" &&
	jq -e ".metadata.deletionGracePeriodSeconds == 5" del.json &&
	ksim_curl -s -o del.json -X DELETE "/api/v1/namespaces/$NS/pods/p2?gracePeriodSeconds=10" &&
	jq -e ".metadata.deletionGracePeriodSeconds == 5" del.json &&
	ksim_curl -s -o /dev/null -X DELETE "/api/v1/namespaces/$NS/pods/p2?gracePeriodSeconds=0" &&
	ksim_curl -s -o /dev/null -w "%{http_code}\n" /api/v1/namespaces/$NS/pods/p2 >code &&
	echo 404 >expect && test_cmp expect code
'

test_expect_success 'kubectl delete --grace-period=0 --force removes a pod on a node at once' '
	kubectl -n $NS run p3 --image=busybox --overrides="{\"spec\":{\"nodeName\":\"other\"}}" >/dev/null &&
	kubectl -n $NS delete pod p3 --grace-period=0 --force >/dev/null 2>&1 &&
	ksim_curl -s -o /dev/null -w "%{http_code}\n" /api/v1/namespaces/$NS/pods/p3 >code &&
	echo 404 >expect && test_cmp expect code
'

ksim_stop

# The simulated cluster: a scheduler binds pods, the kubelet runs and ends them.
ksim_start --pod-start-delay 200ms

test_expect_success 'a pod a client makes is scheduled to ksim-node and runs' '
	kubectl create namespace $NS >/dev/null &&
	kubectl -n $NS run p1 --image=busybox >/dev/null &&
	ksim_wait_get 10 ".spec.nodeName == \"ksim-node\" and .status.phase == \"Running\"" /api/v1/namespaces/$NS/pods/p1
'

test_expect_success 'a pod for another scheduler, or on a cordoned node, stays unscheduled' '
	kubectl -n $NS run other --image=busybox --overrides="{\"spec\":{\"schedulerName\":\"my-scheduler\"}}" >/dev/null &&
	kubectl cordon ksim-node >/dev/null &&
	kubectl -n $NS run later --image=busybox >/dev/null &&
	kubectl -n $NS run sync --image=busybox --overrides="{\"spec\":{\"nodeName\":\"ksim-node\"}}" >/dev/null &&
	ksim_wait_get 10 ".status.phase == \"Running\"" /api/v1/namespaces/$NS/pods/sync &&
	ksim_curl -s -o o.json /api/v1/namespaces/$NS/pods/other &&
	ksim_curl -s -o l.json /api/v1/namespaces/$NS/pods/later &&
	jq -e "(.spec.nodeName // \"\") == \"\" and .status.phase == \"Pending\"" o.json l.json &&
	kubectl uncordon ksim-node >/dev/null &&
	ksim_wait_get 10 ".spec.nodeName == \"ksim-node\"" /api/v1/namespaces/$NS/pods/later
'

test_expect_success 'log of a pod on the simulated node: one plain line saying so' '
	ksim_curl -s -D h -o log.txt /api/v1/namespaces/$NS/pods/p1/log &&
	head -n 1 h | grep "200" &&
	grep -i "^content-type: text/plain" h &&
	echo "ksim: pod $NS/p1 runs on ksim'"'"'s simulated node ksim-node, which runs no containers and keeps no logs" >expect &&
	test_cmp expect log.txt &&
	kubectl -n $NS logs p1 >out && test_cmp expect out
'

test_expect_success 'exec, attach and portforward of a pod on the simulated node: 400, no containers run' '
	for s in exec attach portforward; do
		ksim_curl -s -o e.json -w "%{http_code}\n" -X POST /api/v1/namespaces/$NS/pods/p1/$s >code &&
		echo 400 >expect && test_cmp expect code &&
		jq -e --arg s $s ".kind == \"Status\" and .reason == \"BadRequest\" and
			.message == \"pod p1 runs on ksim'"'"'s simulated node ksim-node, which runs no containers: \" + \$s + \" is not supported\"" e.json ||
		return 1
	done
'

test_expect_success 'a running pod is deleted gracefully; the kubelet removes it; watchers see both steps' '
	rv=$(ksim_curl -s /api/v1/namespaces/$NS/pods | jq -r .metadata.resourceVersion) &&
	ksim_curl -sN -o w.out "/api/v1/namespaces/$NS/pods?watch=true&resourceVersion=$rv&fieldSelector=metadata.name%3Dp1&timeoutSeconds=10" &
	kubectl -n $NS delete pod p1 >/dev/null &&
	ksim_curl -s -o /dev/null -w "%{http_code}\n" /api/v1/namespaces/$NS/pods/p1 >code &&
	echo 404 >expect && test_cmp expect code &&
	test_wait_for 10 grep -q DELETED w.out &&
	jq -r "[.type, (.object.metadata.deletionGracePeriodSeconds // \"-\" | tostring)] | join(\" \")" w.out >actual &&
	printf "MODIFIED 30\nDELETED 0\n" >expect &&
	test_cmp expect actual
'

ksim_stop

test_done
