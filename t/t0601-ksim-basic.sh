#!/bin/sh
test_description='ksim: start, discovery, configmap CRUD and watch over curl, clean stop'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"

test_expect_success 'ksim --help' '
	ksim --help >help.out &&
	grep "^usage: ksim" help.out &&
	test_expect_code 100 ksim --bogus 2>err.out
'

test_expect_success 'an unwritable --kubeconfig is reported by the path the user gave' '
	test_expect_code 111 ksim --port 0 --kubeconfig "$PWD/nonexistent/dir/kubeconfig" 2>err.out &&
	grep "unable to write .$PWD/nonexistent/dir/kubeconfig.: No such file or directory" err.out &&
	! grep "\.tmp\." err.out &&
	! test -e nonexistent
'

ksim_start

test_expect_success 'kubeconfig names the server, a context and namespace default' '
	jq -e ".\"current-context\" == \"ksim\"" "$KUBECONFIG" &&
	jq -e ".contexts[0].context.namespace == \"default\"" "$KUBECONFIG" &&
	jq -e --arg u "$KSIM_URL" ".clusters[0].cluster.server == \$u" "$KUBECONFIG" &&
	case "$KSIM_URL" in http://127.0.0.1:*) ;; *) false ;; esac
'

test_expect_success 'discovery: /version, /api, /api/v1, /apis' '
	ksim_curl -o version.json /version &&
	jq -e ".major and .gitVersion" version.json &&
	ksim_curl -o api.json /api &&
	jq -e ".kind == \"APIVersions\" and .versions == [\"v1\"]" api.json &&
	ksim_curl -o v1.json /api/v1 &&
	jq -e "[.resources[] | select(.name == \"configmaps\")][0] | .namespaced and .kind == \"ConfigMap\" and .shortNames == [\"cm\"]" v1.json &&
	jq -e "[.resources[].name] | index(\"namespaces/finalize\")" v1.json &&
	ksim_curl -o apis.json /apis &&
	jq -e "[.groups[].name] | index(\"apps\") and index(\"coordination.k8s.io\") and index(\"apiextensions.k8s.io\")" apis.json
'

test_expect_success 'the built-in namespaces exist' '
	ksim_curl -o ns.json /api/v1/namespaces &&
	jq -e "[.items[].metadata.name] | sort == [\"default\",\"kube-node-lease\",\"kube-public\",\"kube-system\"]" ns.json &&
	jq -e "[.items[] | .status.phase] | unique == [\"Active\"]" ns.json
'

test_expect_success 'create, get, update, delete a configmap' '
	ksim_curl -o created.json -w "%{http_code}\n" -X POST -H "Content-Type: application/json" \
		-d "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\"},\"data\":{\"k\":\"v\"}}" \
		/api/v1/namespaces/default/configmaps >code &&
	echo 201 >expect && test_cmp expect code &&
	jq -e ".metadata.uid and .metadata.creationTimestamp and .metadata.resourceVersion" created.json &&
	ksim_curl -o got.json /api/v1/namespaces/default/configmaps/a &&
	jq -e ".data.k == \"v\" and .kind == \"ConfigMap\" and .apiVersion == \"v1\"" got.json &&
	jq -c ".data.k = \"w\"" got.json >put.json &&
	ksim_curl -o updated.json -X PUT -H "Content-Type: application/json" -d @put.json \
		/api/v1/namespaces/default/configmaps/a &&
	jq -e ".data.k == \"w\"" updated.json &&
	test "$(jq -r .metadata.resourceVersion updated.json)" -gt "$(jq -r .metadata.resourceVersion got.json)" &&
	ksim_curl -o deleted.json -X DELETE /api/v1/namespaces/default/configmaps/a &&
	jq -e ".kind == \"Status\" and .status == \"Success\" and .details.name == \"a\"" deleted.json &&
	ksim_curl -o gone.json -w "%{http_code}\n" /api/v1/namespaces/default/configmaps/a >code &&
	echo 404 >expect && test_cmp expect code
'

test_expect_success 'a no-op update keeps the resourceVersion' '
	ksim_curl -o c.json -X POST -H "Content-Type: application/json" \
		-d "{\"metadata\":{\"name\":\"same\"},\"data\":{\"k\":\"v\"}}" \
		/api/v1/namespaces/default/configmaps &&
	ksim_curl -o u.json -X PUT -H "Content-Type: application/json" -d @c.json \
		/api/v1/namespaces/default/configmaps/same &&
	test "$(jq -r .metadata.resourceVersion c.json)" = "$(jq -r .metadata.resourceVersion u.json)"
'

test_expect_success 'watch sees ADDED, MODIFIED and DELETED (deletion RV), then the cut ends it' '
	rv=$(ksim_curl /api/v1/namespaces/default/configmaps | jq -r .metadata.resourceVersion) &&
	{ ksim_curl -N -o watch.out "/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=$rv" & } &&
	sleep 0.3 &&
	ksim_curl -o w1.json -X POST -H "Content-Type: application/json" \
		-d "{\"metadata\":{\"name\":\"w\"},\"data\":{\"k\":\"1\"}}" /api/v1/namespaces/default/configmaps &&
	ksim_curl -o w2.json -X PATCH -H "Content-Type: application/merge-patch+json" \
		-d "{\"data\":{\"k\":\"2\"}}" /api/v1/namespaces/default/configmaps/w &&
	ksim_curl -o w3.json -X DELETE /api/v1/namespaces/default/configmaps/w &&
	test_wait_for 5 grep -q DELETED watch.out &&
	ksim_admin cut-watches &&
	wait &&
	jq -r .type watch.out >types &&
	printf "ADDED\nMODIFIED\nDELETED\n" >expect && test_cmp expect types &&
	jq -s -e ".[2].object.metadata.resourceVersion | tonumber > ($(jq -r .metadata.resourceVersion w2.json) | tonumber)" watch.out
'

test_expect_success 'ksim stops cleanly on SIGTERM' '
	ksim_stop
'

test_expect_success '--help names each admin endpoint once' '
	"$KOP_BIN/ksim" --help >help &&
	for e in /ksim/faults /ksim/stats /ksim/cut-watches /ksim/error-watches /ksim/compact; do
		test "$(grep -o "$e" help | wc -l)" = 1 || return 1
	done
'

test_done
