#!/bin/sh
test_description='kwatch: refused credentials at setup (ksim --token): 403 is permanent (100), 401 temporary (111)'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"
ksim_start --token s3cret || exit 1
# --token implies --tls: the hand-written kubeconfigs trust ksim's CA
ksim_ca=$(jq -r '.clusters[0].cluster["certificate-authority-data"]' "$KSIM_CONFIG")

# kubeconfig_as USER-STANZA NAME: a kubeconfig for ksim as another user, in $TRASH/kc.NAME
kubeconfig_as () {
	cat >"$TRASH/kc.$2" <<-EOF
	apiVersion: v1
	kind: Config
	clusters:
	- name: c
	  cluster: {server: "$KSIM_URL", certificate-authority-data: "$ksim_ca"}
	users:
	- name: u
	  user: $1
	contexts:
	- name: x
	  context: {cluster: c, user: u, namespace: default}
	current-context: x
	EOF
}

test_expect_success 'the right token works' '
	timeout 20 kwatch --once namespaces >out 2>err &&
	tail -n 1 out | jq -e ".type == \"BOOKMARK\""
'

test_expect_success 'anonymous (403 from discovery): exit 100, said loudly' '
	kubeconfig_as "{}" anon &&
	test_expect_code 100 env KUBECONFIG="$TRASH/kc.anon" timeout 20 kwatch namespaces >out 2>err &&
	! test -s out &&
	grep "\"level\":\"error\"" err | grep -i forbidden
'

# The Status says "Unauthorized" as its reason and as its message: said once.
test_expect_success 'a wrong token (401 at setup): exit 111, so the supervisor retries' '
	kubeconfig_as "{token: wrong}" wrong &&
	test_expect_code 111 env KUBECONFIG="$TRASH/kc.wrong" timeout 20 kwatch namespaces >out 2>err &&
	! test -s out &&
	jq -r "select(.level == \"error\") | .msg" err >msgs &&
	echo "unable to get /api: Unauthorized" >expect &&
	tr -d "\047" <msgs >msgs.noquote &&
	test_cmp expect msgs.noquote
'

test_expect_success 'the token is never logged' '
	timeout 20 kwatch -v -v --once namespaces >out 2>err &&
	! grep s3cret err
'

test_expect_success 'stop ksim' '
	ksim_stop
'

test_done
