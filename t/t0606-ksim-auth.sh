#!/bin/sh
test_description='ksim: kubectl auth whoami and can-i (SelfSubjectReview, SelfSubjectAccessReview, SelfSubjectRulesReview) from its tokens and RBAC, JSON and protobuf bodies'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"

ksim_kubectls

ksim_start --tls --authorization rbac --token admin-token --token-file "$FIXTURES/tokens.csv" \
	--sa-token team/robot=robot-token --no-simulate

# kubectl with a bound on its run time, as the user of a kubeconfig (admin by default)
k () {
	timeout 30 "$KUBECTL" "$@"
}

as () {
	as_user=$1
	shift
	timeout 30 "$KUBECTL" --kubeconfig "$as_user.kubeconfig" "$@"
}

test_expect_success 'setup: the roles and bindings; kubeconfigs of alice and of a ServiceAccount' '
	KUBECTL=kubectl k apply -f "$FIXTURES/rbac.yaml" >out &&
	jq ".users[0].user = {token: \"alice-token\"}" "$KUBECONFIG" >alice.kubeconfig &&
	jq ".users[0].user = {token: \"robot-token\"}" "$KUBECONFIG" >robot.kubeconfig &&
	jq ".users[0].user = {token: \"carol-token\"}" "$KUBECONFIG" >carol.kubeconfig
'

for KUBECTL in $versions; do
	export KUBECTL
	V=$(basename "$KUBECTL")

	test_expect_success "$V: auth whoami: the user and its groups, as the authenticator gives them" '
		k auth whoami >out &&
		grep -E "^Username +system:admin$" out &&
		grep -E "^Groups +\[system:masters system:authenticated\]$" out &&
		as alice auth whoami -o json >out.json &&
		jq -e ".kind == \"SelfSubjectReview\" and (.apiVersion | startswith(\"authentication.k8s.io/v1\"))" out.json &&
		jq -e ".status.userInfo == {username: \"alice\", groups: [\"dev-team\", \"system:authenticated\"]}" out.json &&
		as robot auth whoami >out &&
		grep -E "^Username +system:serviceaccount:team:robot$" out &&
		grep -E "^Groups +\[system:serviceaccounts system:serviceaccounts:team system:authenticated\]$" out
	'

	test_expect_success "$V: auth can-i: yes and no as RBAC decides (verb, namespace, resourceNames, groups)" '
		as alice auth can-i get configmaps -n team >out && echo yes >expect && test_cmp expect out &&
		as alice auth can-i list configmaps -n team >out && test_cmp expect out &&
		as alice auth can-i get secrets/only-this -n team >out && test_cmp expect out &&
		as alice auth can-i create deployments.apps -n default >out && test_cmp expect out &&
		as alice auth can-i create selfsubjectaccessreviews >out && test_cmp expect out &&
		echo no >expect &&
		test_expect_code 1 as alice auth can-i create configmaps -n team >out && test_cmp expect out &&
		test_expect_code 1 as alice auth can-i get configmaps -n default >out && test_cmp expect out &&
		test_expect_code 1 as alice auth can-i get secrets/other -n team >out && test_cmp expect out &&
		test_expect_code 1 as robot auth can-i get configmaps -n team >out && test_cmp expect out &&
		echo yes >expect &&
		k auth can-i "*" "*" >out && test_cmp expect out
	'

	test_expect_success "$V: auth can-i --list: the rules of the bindings, and those every user has" '
		as alice auth can-i --list -n team >out &&
		grep -E "^configmaps +\[\] +\[\] +\[get list watch\]$" out &&
		grep -E "^secrets +\[\] +\[only-this\] +\[get update\]$" out &&
		grep -E "^\*\.apps +\[\] +\[\] +\[\*\]$" out &&
		grep -E "^selfsubjectaccessreviews\.authorization\.k8s\.io +\[\] +\[\] +\[create\]$" out &&
		grep -E "^ +\[/version\] +\[\] +\[get\]$" out &&
		k auth can-i --list >out &&
		grep -E "^\*\.\* +\[\] +\[\] +\[\*\]$" out
	'
done

# get TOKEN PATH: the code in code, the body in out.txt (no token: anonymous)
get () {
	curl -k -sS -m 10 -o out.txt -w "%{http_code}\n" ${1:+-H "Authorization: Bearer $1"} "$KSIM_URL$2" >code
}

code_is () {
	echo "$1" >expect.code && test_cmp expect.code code
}

test_expect_success 'non-resource paths under RBAC: the default roles (discovery, public info), not a single health check' '
	for p in /healthz /livez "/readyz?verbose" /version /api /apis/apps/v1 /openapi/v3; do
		get alice-token "$p" && code_is 200 || return 1
	done &&
	for p in /healthz /livez "/readyz?verbose" /version; do
		get "" "$p" && code_is 200 || return 1
	done &&
	get "" /api && code_is 403 &&
	get alice-token /readyz/etcd && code_is 403 &&
	jq -e ".message == \"forbidden: User \\\"alice\\\" cannot get path \\\"/readyz/etcd\\\"\"" out.txt &&
	get alice-token /livez/ping && code_is 403 &&
	get robot-token /healthz/etcd && code_is 403 &&
	get admin-token /readyz/etcd && code_is 200
'

test_expect_success 'non-resource paths under RBAC: a ClusterRole bound by a ClusterRoleBinding grants its nonResourceURLs (prefix*)' '
	get robot-token /readyz/etcd && code_is 200 && printf ok >expect && test_cmp expect out.txt &&
	get robot-token /readyz/nope && code_is 404 &&
	get robot-token /livez/ping && code_is 403 &&
	get alice-token /readyz/etcd && code_is 403
'

test_expect_success 'a path where nothing is served: authorized first (403), then 404 for who may get it' '
	get alice-token /metrics && code_is 403 &&
	jq -e ".message == \"forbidden: User \\\"alice\\\" cannot get path \\\"/metrics\\\"\"" out.txt &&
	get "" /nothing && code_is 403 &&
	get robot-token /metrics && code_is 404 &&
	echo "404 page not found" >expect && test_cmp expect out.txt &&
	get admin-token /nothing && code_is 404 &&
	get alice-token /apis/nope && code_is 404 &&
	get "" /apis/nope && code_is 403
'

for KUBECTL in $versions; do
	export KUBECTL
	V=$(basename "$KUBECTL")

	test_expect_success "$V: auth can-i on non-resource URLs follows the nonResourceURLs rules" '
		echo yes >expect &&
		as robot auth can-i get /metrics >out && test_cmp expect out &&
		as robot auth can-i get /readyz/etcd >out && test_cmp expect out &&
		as robot auth can-i get /logs/app-1.log >out && test_cmp expect out &&
		as robot auth can-i get /healthz >out && test_cmp expect out &&
		as alice auth can-i get /apis/apps >out && test_cmp expect out &&
		k auth can-i get /anything >out && test_cmp expect out &&
		k auth can-i delete /metrics >out && test_cmp expect out &&
		echo no >expect &&
		test_expect_code 1 as robot auth can-i post /metrics >out && test_cmp expect out &&
		test_expect_code 1 as robot auth can-i get /logs/other >out && test_cmp expect out &&
		test_expect_code 1 as robot auth can-i get /healthz/etcd >out && test_cmp expect out &&
		test_expect_code 1 as alice auth can-i get /metrics >out && test_cmp expect out &&
		test_expect_code 1 as alice auth can-i get /readyz/etcd >out && test_cmp expect out
	'
done

SA=system:serviceaccount:team:robot

for KUBECTL in $versions; do
	export KUBECTL
	V=$(basename "$KUBECTL")

	test_expect_success "$V: --as, --as-group: the admin (system:masters) impersonates; the groups are the given ones" '
		k auth whoami --as=$SA >out &&
		grep -E "^Username +system:serviceaccount:team:robot$" out &&
		grep -E "^Groups +\[system:serviceaccounts system:serviceaccounts:team system:authenticated\]$" out &&
		k auth whoami --as=alice >out &&
		grep -E "^Groups +\[system:authenticated\]$" out &&
		k auth whoami --as=alice --as-group=dev-team --as-group=x >out &&
		grep -E "^Groups +\[dev-team x system:authenticated\]$" out &&
		k auth whoami --as=$SA --as-group=g --as-uid=u-1 -o json >out.json &&
		jq -e ".status.userInfo == {username: \"$SA\", uid: \"u-1\", groups: [\"g\", \"system:authenticated\"]}" out.json &&
		echo yes >expect &&
		k auth can-i get configmaps -n team --as=alice >out && test_cmp expect out &&
		k auth can-i create deployments.apps --as=alice --as-group=dev-team >out && test_cmp expect out &&
		k auth can-i get /metrics --as=$SA >out && test_cmp expect out &&
		k auth can-i "*" "*" --as=nobody --as-group=system:masters >out && test_cmp expect out &&
		echo no >expect &&
		test_expect_code 1 k auth can-i create deployments.apps --as=alice >out && test_cmp expect out &&
		test_expect_code 1 k auth can-i get configmaps -n team --as=$SA >out && test_cmp expect out &&
		test_expect_code 1 k auth can-i get secrets -n team --as=system:admin >out && test_cmp expect out &&
		k auth can-i --list -n team --as=alice >out &&
		grep -E "^configmaps +\[\] +\[\] +\[get list watch\]$" out &&
		k get configmaps -n team --as=alice -o name >out &&
		grep -x configmap/c1 out &&
		test_must_fail k get configmaps -n team --as=$SA 2>err &&
		grep -F "Error from server (Forbidden): configmaps is forbidden: User \"$SA\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"team\"" err
	'

	test_expect_success "$V: --as is refused to a user who may not impersonate, worded as kube-apiserver words it" '
		test_must_fail as alice get configmaps -n team --as=bob 2>err &&
		grep -F "Error from server (Forbidden): users \"bob\" is forbidden: User \"alice\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope" err &&
		test_must_fail as alice auth can-i get pods --as=$SA 2>err &&
		grep -F "serviceaccounts \"robot\" is forbidden: User \"alice\" cannot impersonate resource \"serviceaccounts\" in API group \"\" in the namespace \"team\"" err &&
		test_must_fail as robot get configmaps -n team --as=alice 2>err &&
		grep -F "Error from server (Forbidden): users \"alice\" is forbidden: User \"$SA\" cannot impersonate resource \"users\"" err
	'

	test_expect_success "$V: impersonate rules: resourceNames, and users but not groups" '
		as carol auth whoami --as=$SA >out &&
		grep -E "^Username +system:serviceaccount:team:robot$" out &&
		as carol auth whoami --as=bob >out &&
		grep -E "^Username +bob$" out &&
		test_must_fail as carol get configmaps -n team --as=system:serviceaccount:team:other 2>err &&
		grep -F "serviceaccounts \"other\" is forbidden: User \"carol\" cannot impersonate resource \"serviceaccounts\" in API group \"\" in the namespace \"team\"" err &&
		test_must_fail as carol get configmaps -n team --as=bob --as-group=dev-team 2>err &&
		grep -F "groups \"dev-team\" is forbidden: User \"carol\" cannot impersonate resource \"groups\" in API group \"\" at the cluster scope" err &&
		test_must_fail as carol get configmaps -n team --as=bob --as-uid=1 2>err &&
		grep -F "uids.authentication.k8s.io \"1\" is forbidden: User \"carol\" cannot impersonate resource \"uids\" in API group \"authentication.k8s.io\" at the cluster scope" err
	'
done

W=/apis/authentication.k8s.io/v1/selfsubjectreviews

# post TOKEN PATH [HEADER...]: a SelfSubjectReview POSTed with the headers; code in code, body in out.txt
post () {
	p_tok=$1 p_path=$2
	shift 2
	set -- ${p_tok:+-H "Authorization: Bearer $p_tok"} "$@"
	curl -k -sS -m 10 -o out.txt -w "%{http_code}\n" -X POST -H "Content-Type: application/json" -d "{}" "$@" \
		"$KSIM_URL$p_path" >code
}

test_expect_success 'Impersonate-Extra-KEY (in lower case, %-decoded) and Impersonate-Uid reach the SelfSubjectReview' '
	post admin-token $W -H "Impersonate-User: bob" -H "Impersonate-Extra-Scopes: a" -H "Impersonate-Extra-Scopes: b" \
		-H "Impersonate-Extra-Example.org%2fKey: v" -H "Impersonate-Uid: 42" &&
	code_is 201 &&
	jq -e ".status.userInfo == {username: \"bob\", uid: \"42\", groups: [\"system:authenticated\"], extra: {scopes: [\"a\", \"b\"], \"example.org/key\": [\"v\"]}}" out.txt &&
	post admin-token $W -H "Impersonate-User: x" -H "Impersonate-Group: system:unauthenticated" \
		-H "Impersonate-Group: system:masters" &&
	code_is 201 &&
	jq -e ".status.userInfo.groups == [\"system:unauthenticated\", \"system:masters\"]" out.txt &&
	post admin-token $W -H "Impersonate-User: system:anonymous" &&
	code_is 403 &&
	jq -e ".message == \"selfsubjectreviews.authentication.k8s.io is forbidden: User \\\"system:anonymous\\\" cannot create resource \\\"selfsubjectreviews\\\" in API group \\\"authentication.k8s.io\\\" at the cluster scope\"" out.txt &&
	post admin-token $W -H "Impersonate-User: x" -H "Impersonate-Group: system:unauthenticated" &&
	code_is 403 &&
	post carol-token $W -H "Impersonate-User: bob" -H "Impersonate-Extra-Scopes: a" &&
	code_is 403 &&
	jq -e ".message == \"userextras.authentication.k8s.io \\\"a\\\" is forbidden: User \\\"carol\\\" cannot impersonate resource \\\"userextras/scopes\\\" in API group \\\"authentication.k8s.io\\\" at the cluster scope\" and .details == {name: \"a\", group: \"authentication.k8s.io\", kind: \"userextras\"}" out.txt
'

test_expect_success 'impersonation: groups without a user are a 500 (plain text, as responsewriters.InternalError writes it); anonymous may not' '
	post admin-token "$W?x=1" -H "Impersonate-Group: g" -H "Impersonate-Uid: 7" &&
	code_is 500 &&
	echo "Internal Server Error: &#34;/apis/authentication.k8s.io/v1/selfsubjectreviews?x=1&#34;: requested [{Group  g    } {UID  7  authentication.k8s.io/v1  }] without impersonating a user" >expect &&
	test_cmp expect out.txt &&
	post "" $W -H "Impersonate-User: admin" &&
	code_is 403 &&
	jq -e ".message == \"users \\\"admin\\\" is forbidden: User \\\"system:anonymous\\\" cannot impersonate resource \\\"users\\\" in API group \\\"\\\" at the cluster scope\"" out.txt &&
	get "" /healthz && code_is 200 &&
	curl -k -sS -m 10 -o out.txt -w "%{http_code}\n" -H "Impersonate-User: admin" "$KSIM_URL/healthz" >code &&
	code_is 403 &&
	curl -k -sS -m 10 -o out.txt -w "%{http_code}\n" -H "Authorization: Bearer admin-token" \
		-H "Impersonate-User: alice" "$KSIM_URL/readyz/etcd" >code &&
	code_is 403 &&
	jq -e ".message == \"forbidden: User \\\"alice\\\" cannot get path \\\"/readyz/etcd\\\"\"" out.txt
'

test_expect_success 'an unknown resource is authorized before the 404: 403 for a user without rights to it, 404 for one with them' '
	get alice-token /api/v1/nosuchthings && code_is 403 &&
	jq -e ".message == \"nosuchthings is forbidden: User \\\"alice\\\" cannot list resource \\\"nosuchthings\\\" in API group \\\"\\\" at the cluster scope\" and .details == {kind: \"nosuchthings\"}" out.txt &&
	get alice-token /api/v1/namespaces/team/nosuchthings/x && code_is 403 &&
	jq -e ".message == \"nosuchthings \\\"x\\\" is forbidden: User \\\"alice\\\" cannot get resource \\\"nosuchthings\\\" in API group \\\"\\\" in the namespace \\\"team\\\"\"" out.txt &&
	get robot-token "/apis/apps/v1/nosuch?watch=1" && code_is 403 &&
	jq -e ".message == \"nosuch.apps is forbidden: User \\\"system:serviceaccount:team:robot\\\" cannot watch resource \\\"nosuch\\\" in API group \\\"apps\\\" at the cluster scope\"" out.txt &&
	get robot-token /api/v1/namespaces/team/configmaps/c1/nosuchsub && code_is 403 &&
	jq -e ".message | endswith(\"cannot get resource \\\"configmaps/nosuchsub\\\" in API group \\\"\\\" in the namespace \\\"team\\\"\")" out.txt &&
	get "" /api/v1/nosuchthings && code_is 403 &&
	get alice-token /apis/apps/v1/nosuch && code_is 404 &&
	echo "404 page not found" >expect && test_cmp expect out.txt &&
	for p in /api/v1/nosuchthings /apis/apps/v1/nosuch /api/v1/namespaces/team/configmaps/c1/nosuchsub; do
		get admin-token "$p" && code_is 404 || return 1
	done
'

S=/apis/authorization.k8s.io/v1/selfsubjectaccessreviews

test_expect_success 'a SelfSubjectAccessReview comes back with its status, 201; the reviews are in discovery' '
	ksim_curl -o out.json -w "%{http_code}\n" -X POST -H "Content-Type: application/json" \
		-d "{\"kind\":\"SelfSubjectAccessReview\",\"apiVersion\":\"authorization.k8s.io/v1\",\"spec\":{\"resourceAttributes\":{\"verb\":\"get\",\"resource\":\"pods\"}}}" $S >code &&
	echo 201 >expect && test_cmp expect code &&
	jq -e ". == {kind: \"SelfSubjectAccessReview\", apiVersion: \"authorization.k8s.io/v1\", metadata: {creationTimestamp: null}, spec: {resourceAttributes: {verb: \"get\", resource: \"pods\"}}, status: {allowed: true}}" out.json &&
	ksim_curl -o v1.json /apis/authorization.k8s.io/v1 &&
	jq -e "[.resources[] | [.name, .verbs]] == [[\"selfsubjectaccessreviews\", [\"create\"]], [\"selfsubjectrulesreviews\", [\"create\"]]]" v1.json &&
	ksim_curl -o g.json /apis/authentication.k8s.io &&
	jq -e "[.versions[].version] == [\"v1\", \"v1beta1\"]" g.json
'

# ssar TOKEN SPEC: a SelfSubjectAccessReview of SPEC POSTed with the token; its status (compact) in status
ssar () {
	curl -k -sS -m 10 -o out.json -X POST -H "Authorization: Bearer $1" -H "Content-Type: application/json" \
		-d "{\"spec\":$2}" "$KSIM_URL$S" &&
	jq -c .status out.json >status
}

test_expect_success 'SelfSubjectAccessReview: an allow by RBAC has the reason the RBAC authorizer words; system:masters none' '
	ssar alice-token "{\"resourceAttributes\":{\"namespace\":\"team\",\"verb\":\"get\",\"resource\":\"configmaps\"}}" &&
	jq -e ". == {allowed: true, reason: \"RBAC: allowed by RoleBinding \\\"alice-reads/team\\\" of Role \\\"cm-reader\\\" to User \\\"alice\\\"\"}" status &&
	ssar alice-token "{\"resourceAttributes\":{\"verb\":\"create\",\"group\":\"apps\",\"resource\":\"deployments\"}}" &&
	jq -e ".reason == \"RBAC: allowed by ClusterRoleBinding \\\"dev-team-deploys\\\" of ClusterRole \\\"deploy-admin\\\" to Group \\\"dev-team\\\"\"" status &&
	ssar robot-token "{\"nonResourceAttributes\":{\"path\":\"/metrics\",\"verb\":\"get\"}}" &&
	jq -e ".reason == \"RBAC: allowed by ClusterRoleBinding \\\"robot-probes\\\" of ClusterRole \\\"probe-reader\\\" to ServiceAccount \\\"robot/team\\\"\"" status &&
	ssar robot-token "{\"resourceAttributes\":{\"verb\":\"create\",\"group\":\"authorization.k8s.io\",\"resource\":\"selfsubjectrulesreviews\"}}" &&
	jq -e ".reason == \"RBAC: allowed by ClusterRoleBinding \\\"system:basic-user\\\" of ClusterRole \\\"system:basic-user\\\" to Group \\\"system:authenticated\\\"\"" status &&
	ssar alice-token "{\"nonResourceAttributes\":{\"path\":\"/apis/apps\",\"verb\":\"get\"}}" &&
	jq -e ".reason == \"RBAC: allowed by ClusterRoleBinding \\\"system:discovery\\\" of ClusterRole \\\"system:discovery\\\" to Group \\\"system:authenticated\\\"\"" status &&
	ssar alice-token "{\"resourceAttributes\":{\"namespace\":\"team\",\"verb\":\"create\",\"resource\":\"configmaps\"}}" &&
	jq -e ". == {allowed: false}" status &&
	ssar admin-token "{\"resourceAttributes\":{\"verb\":\"delete\",\"resource\":\"nodes\"}}" &&
	jq -e ". == {allowed: true}" status
'

test_expect_success 'reviews: 422 without attributes, 405 for other methods, 400 for a broken protobuf body, 403 for anonymous' '
	ksim_curl -o out.json -w "%{http_code}\n" -X POST -H "Content-Type: application/json" -d "{\"spec\":{}}" $S >code &&
	echo 422 >expect && test_cmp expect code &&
	jq -e ".reason == \"Invalid\" and .details.causes[0].field == \"spec.resourceAttributes\"" out.json &&
	ksim_curl -o out.json -w "%{http_code}\n" $S >code &&
	echo 405 >expect && test_cmp expect code &&
	jq -e ".reason == \"MethodNotAllowed\"" out.json &&
	printf "k8s\000\022\003xyz" >bad.pb &&
	ksim_curl -o out.json -w "%{http_code}\n" -X POST -H "Content-Type: application/vnd.kubernetes.protobuf" \
		--data-binary @bad.pb $S >code &&
	echo 400 >expect && test_cmp expect code &&
	curl -k -sS -m 10 -o out.json -w "%{http_code}\n" -X POST -H "Content-Type: application/json" \
		-d "{}" "$KSIM_URL/apis/authentication.k8s.io/v1/selfsubjectreviews" >code &&
	echo 403 >expect && test_cmp expect code
'

test_expect_success 'reviews: a body of another kind is 400 (JSON and the protobuf envelope), as a create of any kind is' '
	ksim_curl -o out.json -w "%{http_code}\n" -X POST -H "Content-Type: application/json" \
		-d "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"spec\":{\"nonResourceAttributes\":{\"path\":\"/x\",\"verb\":\"get\"}}}" $S >code &&
	echo 400 >expect && test_cmp expect code &&
	jq -e ".message == \"the kind in the data (Pod) does not match the expected kind (SelfSubjectAccessReview)\"" out.json &&
	printf "k8s\000\012\011\012\002v1\022\003Pod\022\000" >pod.pb &&
	ksim_curl -o out.json -w "%{http_code}\n" -X POST -H "Content-Type: application/vnd.kubernetes.protobuf" \
		--data-binary @pod.pb $S >code &&
	test_cmp expect code &&
	jq -e ".message | startswith(\"the kind in the data (Pod)\")" out.json
'

test_expect_success 'reviews: an attribute with a NUL byte is asked whole (no rule of alice names it; the admin'"'"'s wildcards match it)' '
	for ns in "team" "team\\u0000zz"
	do
		curl -k -sS -m 10 -o "out.json" -X POST -H "Authorization: Bearer alice-token" -H "Content-Type: application/json" \
			-d "{\"spec\":{\"resourceAttributes\":{\"namespace\":\"$ns\",\"verb\":\"get\",\"resource\":\"configmaps\"}}}" \
			"$KSIM_URL$S" &&
		jq -c ".status.allowed" out.json || return 1
	done >alice &&
	printf "%s\n" true false >expect &&
	test_cmp expect alice &&
	ksim_curl -o out.json -X POST -H "Content-Type: application/json" \
		-d "{\"spec\":{\"resourceAttributes\":{\"namespace\":\"team\\u0000zz\",\"verb\":\"get\\u0000x\",\"resource\":\"configmaps\"}}}" $S &&
	jq -e ".status.allowed == true" out.json
'

test_expect_success 'reviews: both kinds of attributes: 422 quoting the non-resource ones as field.Invalid prints them' '
	ksim_curl -o out.json -w "%{http_code}\n" -X POST -H "Content-Type: application/json" \
		-d "{\"spec\":{\"resourceAttributes\":{\"verb\":\"get\"},\"nonResourceAttributes\":{\"path\":\"/x\",\"verb\":\"get\"}}}" $S >code &&
	echo 422 >expect && test_cmp expect code &&
	jq -r ".details.causes[0].message" out.json >msg &&
	echo "Invalid value: authorization.NonResourceAttributes{Path:\"/x\", Verb:\"get\"}: cannot be specified in combination with resourceAttributes" >expect &&
	test_cmp expect msg
'

test_expect_success 'ksim stops cleanly' '
	ksim_stop
'

test_done
