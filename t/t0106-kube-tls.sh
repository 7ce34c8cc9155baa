#!/bin/sh
test_description='lib/kube: client certificates and CAs given to curl from memory (openssl s_server on loopback)'
. "${0%/*}/test-lib.sh"

command -v openssl >/dev/null || test_skip_all 'no openssl'

# A CA, a server certificate for 127.0.0.1 and a client certificate, all made here.
newkey () {
	nk_name=$1
	shift
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$nk_name.key" -subj "/CN=$nk_name" "$@" 2>/dev/null
}
newkey ca -x509 -out ca.crt -days 2 &&
newkey server -out server.csr &&
newkey client -out client.csr &&
printf "subjectAltName=IP:127.0.0.1,DNS:localhost\n" >server.ext &&
openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt -days 2 -extfile server.ext 2>/dev/null &&
openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out client.crt -days 2 2>/dev/null ||
	test_skip_all 'cannot make certificates'
newkey other -x509 -out other.crt -days 2 || exit 1

# openssl s_server demanding a client certificate signed by the CA; answers HTTP with -www.
SERVER_PID=
trap 'test -n "$SERVER_PID" && kill "$SERVER_PID" 2>/dev/null' EXIT
for try in 1 2 3 4 5 6 7 8; do
	PORT=$(( 20000 + $(od -An -N2 -tu2 /dev/urandom) % 30000 ))
	timeout 120 openssl s_server -accept "127.0.0.1:$PORT" -cert server.crt -key server.key \
		-CAfile ca.crt -Verify 1 -verify_return_error -www >server.log 2>&1 </dev/null &
	SERVER_PID=$!
	i=0
	while test $i -lt 50 && ! grep -qs ACCEPT server.log && kill -0 $SERVER_PID 2>/dev/null; do
		sleep 0.1
		i=$((i + 1))
	done
	grep -qs ACCEPT server.log && break
	kill $SERVER_PID 2>/dev/null
	SERVER_PID=
done
test -n "$SERVER_PID" || test_skip_all 'openssl s_server did not start'

b64 () {
	base64 -w0 <"$1"
}

# kubeconfig CLUSTER-FIELDS USER-FIELDS (JSON members)
kubeconfig () {
	cat >kc.json <<-EOF
	{"current-context":"x","clusters":[{"name":"c","cluster":{"server":"https://127.0.0.1:$PORT"$1}}],
	 "users":[{"name":"u","user":{$2}}],"contexts":[{"name":"x","context":{"cluster":"c","user":"u"}}]}
	EOF
}

test_expect_success 'inline CA, client certificate and key: the server accepts us' '
	kubeconfig ",\"certificate-authority-data\":\"$(b64 ca.crt)\"" \
		"\"client-certificate-data\":\"$(b64 client.crt)\",\"client-key-data\":\"$(b64 client.key)\"" &&
	"$KOP_TEST_TOOL" request --kubeconfig kc.json GET / >out &&
	test "$(jq .code out)" = 200
'

test_expect_success 'the same from files' '
	kubeconfig ",\"certificate-authority\":\"ca.crt\"" "\"client-certificate\":\"client.crt\",\"client-key\":\"client.key\"" &&
	"$KOP_TEST_TOOL" request --kubeconfig kc.json GET / >out &&
	test "$(jq .code out)" = 200
'

test_expect_success 'without a client certificate the handshake fails' '
	kubeconfig ",\"certificate-authority-data\":\"$(b64 ca.crt)\"" "" &&
	test_expect_code 1 "$KOP_TEST_TOOL" request --kubeconfig kc.json GET / >out &&
	test "$(jq .code out)" = 0
'

test_expect_success 'a certificate the CA did not sign is refused by the server' '
	kubeconfig ",\"certificate-authority-data\":\"$(b64 ca.crt)\"" \
		"\"client-certificate-data\":\"$(b64 other.crt)\",\"client-key-data\":\"$(b64 other.key)\"" &&
	test_expect_code 1 "$KOP_TEST_TOOL" request --kubeconfig kc.json GET / >out &&
	test "$(jq .code out)" = 0
'

test_expect_success 'the wrong CA: the server is not trusted (permanent)' '
	kubeconfig ",\"certificate-authority-data\":\"$(b64 other.crt)\"" \
		"\"client-certificate-data\":\"$(b64 client.crt)\",\"client-key-data\":\"$(b64 client.key)\"" &&
	test_expect_code 1 "$KOP_TEST_TOOL" request --kubeconfig kc.json GET / >out &&
	test "$(jq -c "[.code,.reason,.transient]" out)" = "[0,\"TLSVerificationFailed\",false]"
'

test_expect_success 'a client certificate from an exec plugin' '
	cat >plugin.sh <<-EOF &&
	#!/bin/sh
	jq -n --rawfile c "$(pwd)/client.crt" --rawfile k "$(pwd)/client.key" \
		"{apiVersion:\"client.authentication.k8s.io/v1beta1\",kind:\"ExecCredential\",status:{clientCertificateData:\\\$c,clientKeyData:\\\$k}}"
	EOF
	chmod +x plugin.sh &&
	kubeconfig ",\"certificate-authority-data\":\"$(b64 ca.crt)\"" \
		"\"exec\":{\"apiVersion\":\"client.authentication.k8s.io/v1beta1\",\"command\":\"./plugin.sh\"}" &&
	"$KOP_TEST_TOOL" request --kubeconfig kc.json GET / >out &&
	test "$(jq .code out)" = 200
'

test_done
