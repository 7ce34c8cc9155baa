#!/bin/sh
test_description='lib/kube against ksim: TLS, tokens, 401 handling, Status errors, discovery refresh'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"

test -x "$KOP_BIN/ksim" || test_skip_all 'ksim is not built'

ksim_start --tls --token sekret || exit 1

# The kubeconfig ksim wrote, changed by a jq filter: kubeconfig_with FILTER OUT
kubeconfig_with () {
	"$KOP_TEST_TOOL" yaml "$KUBECONFIG" >kc.json &&
	jq "$1" kc.json >"$2"
}

test_expect_success 'a GET with the token, TLS verified with the kubeconfig CA' '
	"$KOP_TEST_TOOL" request GET /api/v1/namespaces >out &&
	test "$(jq -c "[.code,.reason,.body.kind]" out)" = "[200,null,\"NamespaceList\"]"
'

test_expect_success 'a 404 decoded into reason NotFound with the server message, permanent' '
	test_expect_code 1 "$KOP_TEST_TOOL" request GET /api/v1/namespaces/default/configmaps/nope >out &&
	jq -c "[.code,.reason,.message,.transient,.exit]" out >actual &&
	echo "[404,\"NotFound\",\"configmaps \\\"nope\\\" not found\",false,100]" >expect &&
	test_cmp expect actual
'

test_expect_success 'a POST with a body, then the object reads back' '
	echo "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"c1\"},\"data\":{\"k\":\"v\"}}" >cm.json &&
	"$KOP_TEST_TOOL" request POST /api/v1/namespaces/default/configmaps cm.json >out &&
	test "$(jq -c "[.code,.body.data.k]" out)" = "[201,\"v\"]" &&
	test_expect_code 1 "$KOP_TEST_TOOL" request POST /api/v1/namespaces/default/configmaps cm.json >out &&
	# (a create that meets an object of its name stays refused: permanent)
	test "$(jq -c "[.code,.reason,.transient,.exit]" out)" = "[409,\"AlreadyExists\",false,100]" &&
	"$KOP_TEST_TOOL" request GET /api/v1/namespaces/default/configmaps/c1 >out &&
	test "$(jq -r .body.data.k out)" = v &&
	# (a write on a resourceVersion gone stale is a conflict to read again and retry: transient)
	jq -c ".metadata.resourceVersion = \"1\"" cm.json >stale.json &&
	test_expect_code 1 "$KOP_TEST_TOOL" request PUT /api/v1/namespaces/default/configmaps/c1 stale.json >out &&
	test "$(jq -c "[.code,.reason,.transient,.exit]" out)" = "[409,\"Conflict\",true,111]"
'

test_expect_success 'a wrong token gets 401 Unauthorized, permanent' '
	kubeconfig_with ".users[0].user.token = \"wrong\"" wrong.json &&
	test_expect_code 1 "$KOP_TEST_TOOL" request --kubeconfig wrong.json GET /api/v1/namespaces >out &&
	test "$(jq -c "[.code,.reason,.transient,.exit]" out)" = "[401,\"Unauthorized\",false,100]"
'

test_expect_success 'after a 401 a rotated token file is read again' '
	echo wrong >tok &&
	kubeconfig_with ".users[0].user |= {tokenFile: \"tok\"}" tokfile.json &&
	KOP_TEST_BETWEEN="echo sekret >tok" \
		"$KOP_TEST_TOOL" request --kubeconfig tokfile.json --repeat 2 GET /api/v1/namespaces >out &&
	test "$(jq -s -c "map(.code)" out)" = "[401,200]"
'

test_expect_success 'after a 401 an exec plugin runs again' '
	cat >plugin.sh <<-\EOF &&
	#!/bin/sh
	n=$(( $(cat runs 2>/dev/null || echo 0) + 1 )); echo $n >runs
	tok=wrong; test $n -gt 1 && tok=sekret
	echo "{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"$tok\"}}"
	EOF
	chmod +x plugin.sh && rm -f runs &&
	kubeconfig_with ".users[0].user |= {exec: {apiVersion: \"client.authentication.k8s.io/v1\", command: \"./plugin.sh\", interactiveMode: \"Never\"}}" exec.json &&
	"$KOP_TEST_TOOL" request --kubeconfig exec.json --repeat 3 GET /api/v1/namespaces >out &&
	test "$(jq -s -c "map(.code)" out)" = "[401,200,200]" &&
	test "$(cat runs)" = 2
'

test_expect_success 'without the CA the server is refused (permanent), with insecure-skip-tls-verify accepted' '
	kubeconfig_with "del(.clusters[0].cluster[\"certificate-authority-data\"])" noca.json &&
	test_expect_code 1 "$KOP_TEST_TOOL" request --kubeconfig noca.json GET /api/v1/namespaces >out &&
	test "$(jq -c "[.code,.reason,.transient,.exit]" out)" = "[0,\"TLSVerificationFailed\",false,100]" &&
	kubeconfig_with "del(.clusters[0].cluster[\"certificate-authority-data\"]) | .clusters[0].cluster[\"insecure-skip-tls-verify\"] = true" insecure.json &&
	"$KOP_TEST_TOOL" request --kubeconfig insecure.json GET /api/v1/namespaces >out &&
	test "$(jq .code out)" = 200
'

test_expect_success 'the CA from a file relative to the kubeconfig' '
	jq -r ".clusters[0].cluster[\"certificate-authority-data\"]" kc.json | base64 -d >ca.crt &&
	kubeconfig_with ".clusters[0].cluster |= (del(.[\"certificate-authority-data\"]) | .[\"certificate-authority\"] = \"ca.crt\")" cafile.json &&
	mkdir -p elsewhere && (cd elsewhere && "$KOP_TEST_TOOL" request --kubeconfig ../cafile.json GET /api) >out &&
	test "$(jq .code out)" = 200
'

test_expect_success 'tls-server-name: verified against that name, refused for a name the certificate lacks' '
	kubeconfig_with ".clusters[0].cluster[\"tls-server-name\"] = \"localhost\"" sni.json &&
	"$KOP_TEST_TOOL" request --kubeconfig sni.json GET /api >out &&
	test "$(jq .code out)" = 200 &&
	kubeconfig_with ".clusters[0].cluster[\"tls-server-name\"] = \"not-in-the-cert.example\"" badsni.json &&
	test_expect_code 1 "$KOP_TEST_TOOL" request --kubeconfig badsni.json GET /api >out &&
	test "$(jq -c "[.code,.transient]" out)" = "[0,false]"
'

test_expect_success 'a refused connection is transient' '
	kubeconfig_with ".clusters[0].cluster.server = \"https://127.0.0.1:1\"" closed.json &&
	test_expect_code 1 "$KOP_TEST_TOOL" request --kubeconfig closed.json GET /api >out &&
	test "$(jq -c "[.code,.reason,.transient,.exit]" out)" = "[0,\"CouldNotConnect\",true,111]"
'

test_expect_success 'the request timeout applies' '
	"$KOP_TEST_TOOL" request --timeout 5000 GET /api >out &&
	test "$(jq .code out)" = 200
'

test_expect_success 'discovery against the server; an unknown name refreshes once (a CRD just created)' '
	jq -c "del(.status) | .metadata = {name: .metadata.name}" "$TEST_DATA/recordings/custom/crd-established.json" >crd.json &&
	CA=$(jq -r ".clusters[0].cluster[\"certificate-authority-data\"]" kc.json) &&
	KOP_TEST_BETWEEN="test \$J != 2 || \"$KOP_TEST_TOOL\" request POST /apis/apiextensions.k8s.io/v1/customresourcedefinitions crd.json >crd.out && sleep 1" \
		"$KOP_TEST_TOOL" resolve deploy widgets ns >out &&
	cat >expect <<-\EOF &&
	deploy apps/v1 deployments Deployment namespaced /apis/apps/v1/namespaces/ns1/deployments /apis/apps/v1/namespaces/ns1/deployments/x/status
	widgets test.example.org/v1 widgets Widget namespaced /apis/test.example.org/v1/namespaces/ns1/widgets /apis/test.example.org/v1/namespaces/ns1/widgets/x/status
	ns v1 namespaces Namespace cluster /api/v1/namespaces /api/v1/namespaces/x/status
	EOF
	test_cmp expect out &&
	test "$(jq .code crd.out)" = 201
'

test_expect_success 'kube_resolve_gvk and its error in kubectl words' '
	"$KOP_TEST_TOOL" resolve-gvk test.example.org/v1 Widget >out &&
	grep "^Widget test.example.org/v1 widgets Widget namespaced " out &&
	"$KOP_TEST_TOOL" resolve-gvk v1 ConfigMap >out &&
	grep "^ConfigMap v1 configmaps ConfigMap namespaced /api/v1/namespaces/ns1/configmaps " out &&
	test_expect_code 1 "$KOP_TEST_TOOL" resolve-gvk test.example.org/v2 Widget >out &&
	echo "error: no matches for kind \"Widget\" in version \"test.example.org/v2\"" >expect &&
	test_cmp expect out
'

test_expect_success 'ksim stops cleanly' '
	ksim_stop
'

test_done
