#!/bin/sh
test_description='lib/kubeconfig: configuration as kubectl and controller-runtime find it'
. "${0%/*}/test-lib.sh"

# One field of the configuration as test-tool prints it: kc KUBECONFIG FIELD [ARGS...]
kc () {
	field=$2
	env=$1
	shift 2
	KUBECONFIG=$env "$KOP_TEST_TOOL" kubeconfig "$@" >kc.json || return 1
	jq -c "$field" kc.json
}

# {"len":N,"sha256":…} of a file's bytes
secret_file () {
	printf "{\"len\":%d,\"sha256\":\"%s\"}\n" "$(wc -c <"$1")" "$(sha256sum <"$1" | cut -c1-16)"
}

# {"len":N,"sha256":…} of a string, as test-tool prints secrets
secret_of () {
	printf "{\"len\":%d,\"sha256\":\"%s\"}\n" "$(printf %s "$1" | wc -c)" \
		"$(printf %s "$1" | sha256sum | cut -c1-16)"
}

test_expect_success 'setup' '
	cp -R "$FIXTURES"/* . &&
	D=$(pwd) && echo "$D" >dir
'
D=$(cat dir 2>/dev/null)

test_expect_success 'an explicit file: current context, CA path relative to the file, token' '
	"$KOP_TEST_TOOL" kubeconfig --kubeconfig a.yaml >out &&
	jq -c "{server,context,namespace,source,insecure,exec}" out >actual &&
	echo "{\"server\":\"https://127.0.0.1:6443\",\"context\":\"dev\",\"namespace\":\"team-a\",\"source\":\"a.yaml\",\"insecure\":false,\"exec\":null}" >expect &&
	test_cmp expect actual &&
	jq -c .ca out >actual && secret_file sub/ca.crt >expect && test_cmp expect actual &&
	jq -c .token out >actual && secret_of secret-token-a >expect && test_cmp expect actual
'

test_expect_success 'the secret values themselves are never printed' '
	"$KOP_TEST_TOOL" kubeconfig --kubeconfig a.yaml --context certs >out &&
	! grep -e secret-token -e LS0t out &&
	KUBECONFIG=b.yaml "$KOP_TEST_TOOL" kubeconfig --context basic >out &&
	! grep hunter2 out
'

test_expect_success 'KUBECONFIG: first file to define a name wins, first current-context wins, missing files skipped' '
	KUBECONFIG=a.yaml:nope.yaml:b.yaml "$KOP_TEST_TOOL" kubeconfig >out &&
	jq -c "[.context,.namespace,.server,.source]" out >actual &&
	echo "[\"dev\",\"team-a\",\"https://127.0.0.1:6443\",\"a.yaml:b.yaml\"]" >expect &&
	test_cmp expect actual &&
	KUBECONFIG=b.yaml:a.yaml "$KOP_TEST_TOOL" kubeconfig >out &&
	jq -c "[.context,.server,.insecure,.tls_server_name]" out >actual &&
	echo "[\"prod\",\"https://10.0.0.1:6443\",true,\"kubernetes\"]" >expect &&
	test_cmp expect actual
'

test_expect_success 'entries are not merged field by field: the whole first definition wins' '
	test "$(kc b.yaml:a.yaml "[.namespace,.server]" --context dev)" = "[\"from-b\",\"https://10.0.0.1:6443\"]" &&
	test "$(kc a.yaml:b.yaml "[.namespace,.server]" --context dev)" = "[\"team-a\",\"https://127.0.0.1:6443\"]" &&
	test "$(kc a.yaml:b.yaml .server --context certs)" = "\"https://from-a.example:443\"" &&
	test "$(kc b.yaml:a.yaml .server --context certs)" = "\"https://from-b.example:443\""
'

test_expect_success '--context switches, across files' '
	test "$(kc a.yaml:b.yaml "[.context,.server,.username]" --context basic)" = "[\"basic\",\"https://10.0.0.1:6443\",\"admin\"]" &&
	test "$(kc a.yaml:b.yaml .password --context basic)" = "$(secret_of hunter2)"
'

test_expect_success 'inline client certificate and key are decoded and kept in memory' '
	"$KOP_TEST_TOOL" kubeconfig --kubeconfig a.yaml --context certs >out &&
	jq -c .cert out >actual &&
	printf "%s\ncert\n%s\n" "-----BEGIN CERTIFICATE-----" "-----END CERTIFICATE-----" >cert.pem &&
	secret_file cert.pem >expect &&
	test_cmp expect actual &&
	jq -c .key out >actual &&
	printf "%s\nkey\n%s\n" "-----BEGIN PRIVATE KEY-----" "-----END PRIVATE KEY-----" >key.pem &&
	secret_file key.pem >expect &&
	test_cmp expect actual
'

test_expect_success 'client certificate and key from files, relative to the kubeconfig' '
	mkdir -p certs && printf "CERT\n" >certs/c.crt && printf "KEY\n" >certs/c.key &&
	cat >files.yaml <<-\EOF &&
	current-context: x
	clusters: [{name: c, cluster: {server: "https://h:1"}}]
	users: [{name: u, user: {client-certificate: certs/c.crt, client-key: certs/c.key}}]
	contexts: [{name: x, context: {cluster: c, user: u}}]
	EOF
	(cd / && "$KOP_TEST_TOOL" kubeconfig --kubeconfig "$D/files.yaml") >out &&
	jq -c "[.cert,.key]" out >actual &&
	echo "[$(secret_file certs/c.crt),$(secret_file certs/c.key)]" >expect &&
	test_cmp expect actual
'

test_expect_success 'tokenFile is read (trimmed) and kept for re-reading' '
	"$KOP_TEST_TOOL" kubeconfig --kubeconfig b.yaml >out &&
	test "$(jq -c .token out)" = "$(secret_of rotated-token-b)" &&
	test "$(jq -r .token_file out)" = "$D/tok"
'

test_expect_success 'merged files in different directories: each one'\''s paths are relative to itself' '
	mkdir -p other && sed "s/tokenFile: tok/tokenFile: tok2/" b.yaml >other/b.yaml &&
	printf "from-other-dir\n" >other/tok2 &&
	(cd sub && KUBECONFIG=../a.yaml:../other/b.yaml "$KOP_TEST_TOOL" kubeconfig --context prod) >out &&
	test "$(jq -c .token out)" = "$(secret_of from-other-dir)" &&
	test "$(jq -r .token_file out)" = "$D/sub/../other/tok2" &&
	(cd sub && KUBECONFIG=../a.yaml:../other/b.yaml "$KOP_TEST_TOOL" kubeconfig) >out &&
	test "$(jq -c .ca out)" = "$(secret_file sub/ca.crt)"
'

test_expect_success 'a token file is re-read after a 401, not before' '
	printf "first\n" >tok &&
	KOP_TEST_BETWEEN="echo token-\$J >\"$D/tok\"" "$KOP_TEST_TOOL" credentials --kubeconfig b.yaml 3 3 >out &&
	{ echo "1 $(secret_of "Bearer first")"; echo "2 $(secret_of "Bearer first")"; echo "3 $(secret_of "Bearer token-3")"; } >expect &&
	test_cmp expect out
'

test_expect_success 'basic auth sends username and password' '
	KUBECONFIG=b.yaml "$KOP_TEST_TOOL" credentials --context basic 1 >out &&
	echo "1 $(secret_of "Basic $(printf admin:hunter2 | base64)")" >expect &&
	test_cmp expect out
'

test_expect_success 'exec plugin: configuration, relative command, env, args, cluster info' '
	"$KOP_TEST_TOOL" kubeconfig --kubeconfig exec.yaml >out &&
	jq -c .exec out >actual &&
	cat >expect <<-EOF &&
	{"apiVersion":"client.authentication.k8s.io/v1","command":"$D/plugin.sh","args":["get-token","--fast"],"env":["PLUGIN_MODE"],"interactiveMode":"Never","clusterInfo":{"server":"https://127.0.0.1:1","certificate-authority-data":"LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCmNhCi0tLS0tRU5EIENFUlRJRklDQVRFLS0tLS0K","config":{"audience":"kop"}}}
	EOF
	test_cmp expect actual &&
	test "$(kc "" .exec.interactiveMode --kubeconfig exec.yaml --context beta)" = "\"IfAvailable\""
'

test_expect_success 'exec plugin runs lazily, once, with KUBERNETES_EXEC_INFO; the token is reused' '
	rm -f runs* &&
	PLUGIN_RUNS=$D/runs "$KOP_TEST_TOOL" credentials --kubeconfig exec.yaml 3 >out &&
	{ for i in 1 2 3; do echo "$i $(secret_of "Bearer token-1")"; done; } >expect &&
	test_cmp expect out &&
	test "$(cat runs)" = 1 &&
	jq -c . runs.info >actual &&
	echo "{\"kind\":\"ExecCredential\",\"apiVersion\":\"client.authentication.k8s.io/v1\",\"spec\":{\"cluster\":{\"server\":\"https://127.0.0.1:1\",\"certificate-authority-data\":\"LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCmNhCi0tLS0tRU5EIENFUlRJRklDQVRFLS0tLS0K\",\"config\":{\"audience\":\"kop\"}},\"interactive\":false}}" >expect &&
	test_cmp expect actual &&
	test "$(cat runs.args)" = "get-token --fast" &&
	test "$(cat runs.mode)" = token
'

test_expect_success 'exec plugin: run without the GNUTLS_NO_IMPLICIT_INIT iot-operator set, with the user'"'"'s own' '
	rm -f runs* &&
	GNUTLS_NO_IMPLICIT_INIT=1 KOP_GNUTLS_OURS=1 PLUGIN_RUNS=$D/runs "$KOP_TEST_TOOL" credentials --kubeconfig exec.yaml 1 >out &&
	test "$(cat runs)" = 1 &&
	test_cmp /dev/null runs.gnutls &&
	rm -f runs* &&
	GNUTLS_NO_IMPLICIT_INIT=1 PLUGIN_RUNS=$D/runs "$KOP_TEST_TOOL" credentials --kubeconfig exec.yaml 1 >out &&
	echo GNUTLS_NO_IMPLICIT_INIT=1 >expect &&
	test_cmp expect runs.gnutls
'

test_expect_success 'exec plugin: an expired credential is fetched again, a valid one is not' '
	rm -f runs* &&
	PLUGIN_EXPIRY=2000-01-01T00:00:00Z PLUGIN_RUNS=$D/runs "$KOP_TEST_TOOL" credentials --kubeconfig exec.yaml 3 >out &&
	test "$(cat runs)" = 3 &&
	grep "^3 $(secret_of "Bearer token-3")$" out &&
	rm -f runs* &&
	PLUGIN_EXPIRY=2999-01-01T00:00:00Z PLUGIN_RUNS=$D/runs "$KOP_TEST_TOOL" credentials --kubeconfig exec.yaml 3 >out &&
	test "$(cat runs)" = 1
'

test_expect_success 'exec plugin runs again after a 401' '
	rm -f runs* &&
	PLUGIN_EXPIRY=2999-01-01T00:00:00Z PLUGIN_RUNS=$D/runs "$KOP_TEST_TOOL" credentials --kubeconfig exec.yaml 4 3 >out &&
	test "$(cat runs)" = 2 &&
	{ echo "1 $(secret_of "Bearer token-1")"; echo "2 $(secret_of "Bearer token-1")";
	  echo "3 $(secret_of "Bearer token-2")"; echo "4 $(secret_of "Bearer token-2")"; } >expect &&
	test_cmp expect out
'

test_expect_success 'exec plugin failures are reported in client-go words' '
	for mode in fail nostatus empty onlycert wrongversion garbage; do
		PLUGIN_FORCE=$mode PLUGIN_MODE=wrong PLUGIN_RUNS=$D/runs test_expect_code 1 "$KOP_TEST_TOOL" credentials --kubeconfig exec.yaml 1 >out.$mode 2>err.$mode || return 1
	done &&
	echo "1 error: getting credentials: exec: executable $D/plugin.sh failed with exit code 3" >expect &&
	test_cmp expect out.fail &&
	grep "plugin: no credentials" err.fail &&
	echo "1 error: getting credentials: exec plugin didn'\''t return a status field" >expect && test_cmp expect out.nostatus &&
	echo "1 error: getting credentials: exec plugin didn'\''t return a token or cert/key pair" >expect && test_cmp expect out.empty &&
	echo "1 error: getting credentials: exec plugin returned only certificate or key, not both" >expect && test_cmp expect out.onlycert &&
	echo "1 error: getting credentials: exec plugin is configured to use API version client.authentication.k8s.io/v1, plugin returned version client.authentication.k8s.io/v1beta1" >expect &&
	test_cmp expect out.wrongversion &&
	grep "^1 error: getting credentials: decoding stdout: " out.garbage
'

# jq 1.6 quotes the whole text in a parse error: the token with it
test_expect_success 'exec plugin output cut short: the error never shows the token' '
	PLUGIN_FORCE=truncated PLUGIN_RUNS=$D/runs test_expect_code 1 "$KOP_TEST_TOOL" credentials --kubeconfig exec.yaml 1 >out 2>err &&
	grep "^1 error: getting credentials: decoding stdout: Unfinished JSON term" out &&
	! grep S3cretT0ken out err
'

test_expect_success 'exec plugin not found: the install hint follows' '
	cat >hint.yaml <<-\EOF &&
	current-context: x
	clusters: [{name: c, cluster: {server: "https://h:1"}}]
	users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: kop-no-such-plugin, installHint: "install it with apt"}}}]
	contexts: [{name: x, context: {cluster: c, user: u}}]
	EOF
	test_expect_code 1 "$KOP_TEST_TOOL" credentials --kubeconfig hint.yaml 1 >out &&
	printf "1 error: getting credentials: exec: executable kop-no-such-plugin not found\n\ninstall it with apt\n" >expect &&
	test_cmp expect out
'

# A kubeconfig with one cluster c, one user u and context x; $1 and $2 are the cluster's and user's YAML flow maps.
one () {
	printf "current-context: x\nclusters: [{name: c, cluster: %s}]\nusers: [{name: u, user: %s}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n" "$1" "$2" >one.yaml
}

test_expect_success 'validation errors as kubectl words them' '
	one "{certificate-authority: nope.crt}" "{}" &&
	test_expect_code 1 "$KOP_TEST_TOOL" kubeconfig --kubeconfig one.yaml >out &&
	echo "error: invalid configuration: [no server found for cluster \"c\", unable to read certificate-authority $D/nope.crt for c due to open $D/nope.crt: no such file or directory]" >expect &&
	test_cmp expect out &&
	one "{server: \"https://h\", certificate-authority: sub/ca.crt, certificate-authority-data: eA==}" "{token: t, username: a}" &&
	test_expect_code 1 "$KOP_TEST_TOOL" kubeconfig --kubeconfig one.yaml >out &&
	echo "error: invalid configuration: [more than one authentication method found for u; found [token basicAuth], only one is allowed, certificate-authority-data and certificate-authority are both specified for c. certificate-authority-data will override.]" >expect &&
	test_cmp expect out &&
	one "{server: \"https://h\"}" "{client-certificate-data: eA==}" &&
	test_expect_code 1 "$KOP_TEST_TOOL" kubeconfig --kubeconfig one.yaml >out &&
	echo "error: invalid configuration: client-key-data or client-key must be specified for u to use the clientCert authentication method." >expect &&
	test_cmp expect out &&
	one "{server: \"https://h\"}" "{exec: {apiVersion: client.authentication.k8s.io/v1, command: x}}" &&
	test_expect_code 1 "$KOP_TEST_TOOL" kubeconfig --kubeconfig one.yaml >out &&
	echo "error: invalid configuration: interactiveMode must be specified for u to use exec authentication plugin" >expect &&
	test_cmp expect out &&
	one "{server: \"https://h\"}" "{exec: {command: x, interactiveMode: Sometimes}}" &&
	test_expect_code 1 "$KOP_TEST_TOOL" kubeconfig --kubeconfig one.yaml >out &&
	echo "error: invalid configuration: [apiVersion must be specified for u to use exec authentication plugin, invalid interactiveMode for u: \"Sometimes\"]" >expect &&
	test_cmp expect out
'

test_expect_success 'an unknown context, no context, an empty file' '
	test_expect_code 1 "$KOP_TEST_TOOL" kubeconfig --kubeconfig a.yaml --context nope >out &&
	echo "error: invalid configuration: [context was not found for specified context: nope, cluster has no server defined]" >expect &&
	test_cmp expect out &&
	: >empty.yaml &&
	test_expect_code 1 "$KOP_TEST_TOOL" kubeconfig --kubeconfig empty.yaml >out &&
	echo "error: invalid configuration: no configuration has been provided, try setting KUBERNETES_MASTER environment variable" >expect &&
	test_cmp expect out
'

test_expect_success 'missing and unparsable files' '
	test_expect_code 1 "$KOP_TEST_TOOL" kubeconfig --kubeconfig nope.yaml >out &&
	echo "error: unable to open kubeconfig '\''nope.yaml'\'': No such file or directory" >expect &&
	test_cmp expect out &&
	KUBECONFIG=nope1:nope2 test_expect_code 1 "$KOP_TEST_TOOL" kubeconfig >out &&
	grep "^error: invalid configuration: no configuration has been provided" out &&
	printf "clusters:\n- name: c\n  cluster: {server: x\n" >bad.yaml &&
	KUBECONFIG=a.yaml:bad.yaml test_expect_code 1 "$KOP_TEST_TOOL" kubeconfig >out &&
	grep "^error: unable to parse '\''bad.yaml'\'': line 4, column 1: " out &&
	printf "clusters: {c: 1}\n" >bad2.yaml &&
	test_expect_code 1 "$KOP_TEST_TOOL" kubeconfig --kubeconfig bad2.yaml >out &&
	echo "error: unable to load '\''bad2.yaml'\'': clusters must be a list" >expect &&
	test_cmp expect out &&
	printf "clusters: [{name: c, cluster: {server: a}}, {name: c, cluster: {server: b}}]\n" >dup.yaml &&
	test_expect_code 1 "$KOP_TEST_TOOL" kubeconfig --kubeconfig dup.yaml >out &&
	echo "error: unable to load '\''dup.yaml'\'': duplicate name \"c\" in clusters" >expect &&
	test_cmp expect out &&
	one "{server: \"https://h\", certificate-authority-data: \"not base64!\"}" "{}" &&
	test_expect_code 1 "$KOP_TEST_TOOL" kubeconfig --kubeconfig one.yaml >out &&
	echo "error: unable to load '\''one.yaml'\'': illegal base64 data in certificate-authority-data of \"c\"" >expect &&
	test_cmp expect out
'

test_expect_success 'an integer beyond 2^53 in a kubeconfig is an error naming it, JSON as YAML' '
	printf "{\"current-context\": \"x\", \"preferences\": {\"colors\": 9007199254740993},\n \"clusters\": [{\"name\": \"c\", \"cluster\": {\"server\": \"https://127.0.0.1:47599\"}}],\n \"users\": [{\"name\": \"u\", \"user\": {}}],\n \"contexts\": [{\"name\": \"x\", \"context\": {\"cluster\": \"c\", \"user\": \"u\"}}]}\n" >big.json &&
	test_expect_code 1 "$KOP_TEST_TOOL" kubeconfig --kubeconfig big.json >out &&
	grep -x "error: unable to parse .big\.json.: line 1, column 52: preferences.colors: an integer beyond 2^53 would .*" out &&
	sed s/9007199254740993/9007199254740992/ big.json >exact.json &&
	"$KOP_TEST_TOOL" kubeconfig --kubeconfig exact.json >out &&
	printf "current-context: x\npreferences: {colors: 9007199254740993}\n" >big.yaml &&
	test_expect_code 1 "$KOP_TEST_TOOL" kubeconfig --kubeconfig big.yaml >out &&
	grep "^error: unable to parse .big\.yaml.: line 2, column 23: preferences.colors: an integer beyond 2^53 would" out &&
	printf "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: n}\n" >cm.yaml &&
	test_expect_code 100 timeout 30 kapply --kubeconfig big.json --max-retries 0 --request-timeout 2s -f cm.yaml >out 2>err &&
	test ! -s out &&
	jq -r .msg err >msgs &&
	grep -x "unable to parse .big\.json.: line 1, column 52: preferences.colors: an integer beyond 2^53 would .*" msgs
'

test_expect_success 'in-cluster: service host and port, token, CA and namespace from the service-account dir' '
	mkdir -p sa && printf "sa-token\n" >sa/token && printf "CA\n" >sa/ca.crt && printf "ops\n" >sa/namespace &&
	KUBERNETES_SERVICE_HOST=10.96.0.1 KUBERNETES_SERVICE_PORT=443 KOP_SERVICEACCOUNT_DIR=$D/sa \
		"$KOP_TEST_TOOL" kubeconfig >out &&
	jq -c "[.server,.context,.namespace,.source,.token_file,.ca.len]" out >actual &&
	echo "[\"https://10.96.0.1:443\",null,\"ops\",\"in-cluster\",\"$D/sa/token\",3]" >expect &&
	test_cmp expect actual &&
	test "$(jq -c .token out)" = "$(secret_of sa-token)"
'

test_expect_success 'in-cluster: IPv6 host, POD_NAMESPACE, no namespace file, no CA' '
	mkdir -p sa2 && printf "t2" >sa2/token &&
	KUBERNETES_SERVICE_HOST=fd00::1 KUBERNETES_SERVICE_PORT=6443 KOP_SERVICEACCOUNT_DIR=$D/sa2 \
		"$KOP_TEST_TOOL" kubeconfig >out &&
	test "$(jq -c "[.server,.namespace,.ca]" out)" = "[\"https://[fd00::1]:6443\",\"default\",null]" &&
	KUBERNETES_SERVICE_HOST=h KUBERNETES_SERVICE_PORT=1 KOP_SERVICEACCOUNT_DIR=$D/sa POD_NAMESPACE=mine \
		"$KOP_TEST_TOOL" kubeconfig >out &&
	test "$(jq -r .namespace out)" = mine
'

test_expect_success 'KUBECONFIG and --kubeconfig come before in-cluster; ~/.kube/config after it' '
	KUBERNETES_SERVICE_HOST=10.96.0.1 KUBERNETES_SERVICE_PORT=443 KOP_SERVICEACCOUNT_DIR=$D/sa KUBECONFIG=a.yaml \
		"$KOP_TEST_TOOL" kubeconfig >out &&
	test "$(jq -r .source out)" = a.yaml &&
	KUBERNETES_SERVICE_HOST=10.96.0.1 KUBERNETES_SERVICE_PORT=443 KOP_SERVICEACCOUNT_DIR=$D/sa \
		"$KOP_TEST_TOOL" kubeconfig --kubeconfig b.yaml >out &&
	test "$(jq -r .source out)" = b.yaml &&
	mkdir -p "$HOME/.kube" && cp a.yaml "$HOME/.kube/config" && cp -R sub "$HOME/.kube/" &&
	KUBERNETES_SERVICE_HOST=10.96.0.1 KUBERNETES_SERVICE_PORT=443 KOP_SERVICEACCOUNT_DIR=$D/sa \
		"$KOP_TEST_TOOL" kubeconfig >out &&
	test "$(jq -r .source out)" = in-cluster &&
	"$KOP_TEST_TOOL" kubeconfig >out &&
	test "$(jq -r .source out)" = "$HOME/.kube/config" &&
	rm -rf "$HOME/.kube" &&
	test_expect_code 1 "$KOP_TEST_TOOL" kubeconfig >out &&
	grep "^error: invalid configuration: no configuration has been provided" out
'

test_expect_success 'in-cluster token is re-read after a 401' '
	printf "old\n" >sa/token &&
	KUBERNETES_SERVICE_HOST=10.96.0.1 KUBERNETES_SERVICE_PORT=443 KOP_SERVICEACCOUNT_DIR=$D/sa \
	KOP_TEST_BETWEEN="echo new-\$J >\"$D/sa/token\"" "$KOP_TEST_TOOL" credentials 3 2 >out &&
	{ echo "1 $(secret_of "Bearer old")"; echo "2 $(secret_of "Bearer new-2")"; echo "3 $(secret_of "Bearer new-2")"; } >expect &&
	test_cmp expect out
'

test_expect_success 'a kubeconfig that cannot be read is named as the kubeconfig, by the tools too' '
	mkdir -p adir &&
	KUBECONFIG=a.yaml:adir test_expect_code 1 "$KOP_TEST_TOOL" kubeconfig >out &&
	echo "error: unable to read kubeconfig '\''adir'\'': Is a directory" >expect &&
	test_cmp expect out &&
	test_expect_code 100 kwatch --kubeconfig "$TRASH/nope" pods >out 2>err &&
	echo "unable to open kubeconfig '\''$TRASH/nope'\'': No such file or directory" >expect &&
	jq -r .msg err >msg &&
	test_cmp expect msg &&
	echo "{\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\", \"metadata\": {\"name\": \"c\", \"namespace\": \"d\"}}" >cm.json &&
	KUBECONFIG=nope.yaml test_expect_code 100 kapply -f cm.json >out 2>err &&
	jq -r .msg err >msg &&
	grep "^invalid configuration: no configuration has been provided: none of the files in KUBECONFIG exist ('\''nope.yaml'\'')" msg &&
	echo "{}" | KUBECONFIG=adir test_expect_code 100 kstatus >out 2>err &&
	echo "unable to read kubeconfig '\''adir'\'': Is a directory" >expect &&
	jq -r .msg err >msg &&
	test_cmp expect msg
'

test_done
