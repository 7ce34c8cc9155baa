#!/bin/sh
test_description='ksim: kubectl create token (TokenRequest on serviceaccounts/NAME/token): a JWT that authenticates as the ServiceAccount until it expires or the ServiceAccount is deleted'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"

ksim_start --tls --authorization rbac --token admin --no-simulate
KC=/usr/lib/google-cloud-sdk/bin/kubectl
test -x "$KC.1.27" && test -x "$KC.1.33" || test_skip_all 'kubectl 1.27 and 1.33 needed'

# code TOKEN METHOD PATH [BODY [CONTENT-TYPE]]: the HTTP code; the body in body.json
code () {
	if test -n "$4"; then
		curl -k -sS -m 10 -o body.json -w "%{http_code}\n" -X "$2" -H "Authorization: Bearer $1" \
			-H "Content-Type: ${5:-application/json}" --data-binary "$4" "$KSIM_URL$3"
	else
		curl -k -sS -m 10 -o body.json -w "%{http_code}\n" -X "$2" -H "Authorization: Bearer $1" "$KSIM_URL$3"
	fi
}

# claims FILE: the JWT's payload, decoded
claims () {
	cl_p=$(cut -d. -f2 "$1" | tr "_-" "/+") &&
	while test $((${#cl_p} % 4)) != 0; do cl_p="$cl_p="; done &&
	printf "%s" "$cl_p" | base64 -d
}

test_expect_success 'setup: a ServiceAccount that may read ConfigMaps in its namespace' '
	$KC.1.33 create namespace team >out &&
	$KC.1.33 -n team create serviceaccount bot >out &&
	$KC.1.33 -n team create configmap c --from-literal=a=1 >out &&
	$KC.1.33 -n team create role cm-reader --verb=get,list --resource=configmaps >out &&
	$KC.1.33 -n team create rolebinding bot-reads --role=cm-reader --serviceaccount=team:bot >out
'

test_expect_success 'discovery lists serviceaccounts/token as a real server does' '
	$KC.1.33 get --raw /api/v1 >v1.json &&
	jq -c ".resources[] | select(.name == \"serviceaccounts/token\")" v1.json >actual &&
	echo "{\"name\":\"serviceaccounts/token\",\"singularName\":\"\",\"namespaced\":true,\"group\":\"authentication.k8s.io\",\"version\":\"v1\",\"kind\":\"TokenRequest\",\"verbs\":[\"create\"]}" >expect &&
	test_cmp expect actual
'

for v in 1.27 1.33; do
	test_expect_success "kubectl $v create token: the token authenticates as the ServiceAccount, with its RBAC rights" '
		$KC.'$v' -n team create token bot >tok.'$v' &&
		$KC.'$v' auth whoami --token "$(cat tok.'$v')" -o json >who.json &&
		jq -c .status.userInfo who.json >actual &&
		echo "{\"username\":\"system:serviceaccount:team:bot\",\"groups\":[\"system:serviceaccounts\",\"system:serviceaccounts:team\",\"system:authenticated\"]}" >expect &&
		test_cmp expect actual &&
		$KC.'$v' -n team get configmap c --token "$(cat tok.'$v')" -o name >actual &&
		echo configmap/c >expect && test_cmp expect actual &&
		test_must_fail $KC.'$v' -n team get secrets --token "$(cat tok.'$v')" 2>err &&
		grep "User \"system:serviceaccount:team:bot\" cannot list resource \"secrets\"" err
	'
done

test_expect_success 'the JWT: header.payload.signature, claims of the ServiceAccount, an hour by default' '
	uid=$($KC.1.33 -n team get sa bot -o jsonpath="{.metadata.uid}") &&
	test "$(tr -cd . <tok.1.33)" = ".." &&
	claims tok.1.33 >c.json &&
	jq -e --arg uid "$uid" ".iss == \"https://kubernetes.default.svc.cluster.local\" and
		.sub == \"system:serviceaccount:team:bot\" and
		.aud == [\"https://kubernetes.default.svc.cluster.local\"] and
		.exp - .iat == 3600 and .nbf == .iat and
		.[\"kubernetes.io\"] == {namespace: \"team\", serviceaccount: {name: \"bot\", uid: \$uid}}" c.json
'

test_expect_success '--duration=10m sets the expiry; the answer echoes the request with status.token' '
	$KC.1.33 -n team create token bot --duration=10m >tok10 &&
	claims tok10 >c.json &&
	jq -e ".exp - .iat == 600" c.json &&
	code admin POST /api/v1/namespaces/team/serviceaccounts/bot/token \
		"{\"apiVersion\":\"authentication.k8s.io/v1\",\"kind\":\"TokenRequest\",\"spec\":{\"expirationSeconds\":900,\"audiences\":[\"vault\"]}}" >got &&
	echo 201 >expect && test_cmp expect got &&
	uid=$($KC.1.33 -n team get sa bot -o jsonpath="{.metadata.uid}") &&
	jq -e --arg uid "$uid" ".kind == \"TokenRequest\" and .metadata.name == \"bot\" and .metadata.namespace == \"team\" and
		.metadata.uid == \$uid and .spec == {audiences: [\"vault\"], expirationSeconds: 900} and
		((.status.expirationTimestamp | fromdate) - (.metadata.creationTimestamp | fromdate) == 900)" body.json &&
	jq -r .status.token body.json >tokv &&
	claims tokv >c.json &&
	jq -e ".aud == [\"vault\"] and .exp - .iat == 900" c.json
'

test_expect_success 'a protobuf TokenRequest (what kubectl 1.32+ sends) is read as its JSON' '
	echo "{\"apiVersion\":\"authentication.k8s.io/v1\",\"kind\":\"TokenRequest\",\"spec\":{\"expirationSeconds\":1200}}" |
		"$KOP_TEST_TOOL" proto-encode >body.pb &&
	curl -k -sS -m 10 -o body.json -w "%{http_code}\n" -X POST -H "Authorization: Bearer admin" \
		-H "Content-Type: application/vnd.kubernetes.protobuf" --data-binary @body.pb \
		"$KSIM_URL/api/v1/namespaces/team/serviceaccounts/bot/token" >got &&
	echo 201 >expect && test_cmp expect got &&
	jq -e ".spec.expirationSeconds == 1200" body.json
'

test_expect_success 'too short is refused: 422 Invalid as kube-apiserver words it' '
	test_must_fail $KC.1.33 -n team create token bot --duration=5m 2>err &&
	echo "error: failed to create token: TokenRequest.authentication.k8s.io \"\" is invalid: spec.expirationSeconds: Invalid value: 300: may not specify a duration less than 10 minutes" >expect &&
	test_cmp expect err &&
	code admin POST /api/v1/namespaces/team/serviceaccounts/bot/token "{\"spec\":{\"expirationSeconds\":599}}" >got &&
	echo 422 >expect && test_cmp expect got &&
	jq -e ".reason == \"Invalid\" and .details.kind == \"TokenRequest\" and .details.group == \"authentication.k8s.io\" and
		.details.causes == [{reason: \"FieldValueInvalid\", message: \"Invalid value: 599: may not specify a duration less than 10 minutes\", field: \"spec.expirationSeconds\"}]" body.json
'

test_expect_success 'a ServiceAccount that does not exist: 404 NotFound' '
	test_must_fail $KC.1.27 -n team create token nobody 2>err &&
	echo "error: failed to create token: serviceaccounts \"nobody\" not found" >expect &&
	test_cmp expect err &&
	code admin POST /api/v1/namespaces/team/serviceaccounts/nobody/token "{}" >got &&
	echo 404 >expect && test_cmp expect got &&
	jq -c "del(.metadata)" body.json >actual &&
	echo "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"message\":\"serviceaccounts \\\"nobody\\\" not found\",\"reason\":\"NotFound\",\"details\":{\"name\":\"nobody\",\"kind\":\"serviceaccounts\"},\"code\":404}" >expect &&
	test_cmp expect actual
'

test_expect_success 'boundObjectRef: a Secret or Pod that must exist; its claim in the token' '
	$KC.1.33 -n team create secret generic s --from-literal=a=b >out &&
	test_must_fail $KC.1.33 -n team create token bot --bound-object-kind=Secret --bound-object-name=gone 2>err &&
	grep "secrets \"gone\" not found" err &&
	$KC.1.33 -n team create token bot --bound-object-kind=Secret --bound-object-name=s >tokb &&
	suid=$($KC.1.33 -n team get secret s -o jsonpath="{.metadata.uid}") &&
	claims tokb >c.json &&
	jq -e --arg u "$suid" ".[\"kubernetes.io\"].secret == {name: \"s\", uid: \$u}" c.json &&
	code admin POST /api/v1/namespaces/team/pods \
		"{\"metadata\":{\"name\":\"p\"},\"spec\":{\"serviceAccountName\":\"bot\",\"containers\":[{\"name\":\"c\",\"image\":\"i\"}]}}" >got &&
	echo 201 >expect && test_cmp expect got &&
	code admin POST /api/v1/namespaces/team/pods \
		"{\"metadata\":{\"name\":\"q\"},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"i\"}]}}" >got &&
	echo 201 >expect && test_cmp expect got &&
	$KC.1.33 -n team create token bot --bound-object-kind=Pod --bound-object-name=p >tokp &&
	puid=$($KC.1.33 -n team get pod p -o jsonpath="{.metadata.uid}") &&
	claims tokp >c.json &&
	jq -e --arg u "$puid" ".[\"kubernetes.io\"].pod == {name: \"p\", uid: \$u}" c.json &&
	test_must_fail $KC.1.33 -n team create token bot --bound-object-kind=Pod --bound-object-name=q 2>err &&
	grep "cannot bind token for serviceaccount \"bot\" to pod running with different serviceaccount name." err &&
	test_must_fail $KC.1.33 -n team create token bot --bound-object-kind=Pod --bound-object-name=p \
		--bound-object-uid=0000 2>err &&
	grep "the UID in the bound object reference (0000) does not match the UID in record" err &&
	code admin POST /api/v1/namespaces/team/serviceaccounts/bot/token \
		"{\"spec\":{\"boundObjectRef\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"name\":\"c\"}}}" >got &&
	echo 400 >expect && test_cmp expect got &&
	jq -e ".message == \"cannot bind token to object of type /v1, Kind=ConfigMap\"" body.json
'

test_expect_success 'RBAC: create on serviceaccounts/token is needed' '
	code "$(cat tok.1.33)" POST /api/v1/namespaces/team/serviceaccounts/bot/token "{}" >got &&
	echo 403 >expect && test_cmp expect got &&
	jq -e ".message == \"serviceaccounts \\\"bot\\\" is forbidden: User \\\"system:serviceaccount:team:bot\\\" cannot create resource \\\"serviceaccounts/token\\\" in API group \\\"\\\" in the namespace \\\"team\\\"\"" body.json &&
	$KC.1.33 -n team create role tokens --verb=create --resource=serviceaccounts/token >out &&
	$KC.1.33 -n team create rolebinding bot-tokens --role=tokens --serviceaccount=team:bot >out &&
	code "$(cat tok.1.33)" POST /api/v1/namespaces/team/serviceaccounts/bot/token "{}" >got &&
	echo 201 >expect && test_cmp expect got
'

test_expect_success 'a token whose payload was changed does not authenticate (401)' '
	p=$(printf "%s" "{\"sub\":\"system:serviceaccount:team:bot\",\"exp\":9999999999}" | base64 -w0 | tr "+/" "-_" | tr -d =) &&
	forged=$(cut -d. -f1 tok.1.33).$p.$(cut -d. -f3 tok.1.33) &&
	code "$forged" GET /api/v1/namespaces/team/configmaps/c >got &&
	echo 401 >expect && test_cmp expect got
'

test_expect_success 'deleting the ServiceAccount ends its tokens, a new one of the same name too (401)' '
	$KC.1.33 -n team delete serviceaccount bot >out &&
	code "$(cat tok.1.27)" GET /api/v1/namespaces/team/configmaps/c >got &&
	echo 401 >expect && test_cmp expect got &&
	test_must_fail $KC.1.33 auth whoami --token "$(cat tok.1.33)" 2>err &&
	grep Unauthorized err &&
	$KC.1.33 -n team create serviceaccount bot >out &&
	code "$(cat tok.1.33)" GET /api/v1/namespaces/team/configmaps/c >got &&
	echo 401 >expect && test_cmp expect got
'

test_expect_success 'no token is in the log' '
	! grep -F "$(cut -d. -f3 tok.1.33)" "$KSIM_LOG"
'

test_expect_success 'ksim stops cleanly' '
	ksim_stop
'

test_done
