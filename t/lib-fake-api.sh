# A canned-reply API server on loopback for a test script
# (t3003-kapply-retry/fake-api.py: each request answered as its script says,
# and logged with when it arrived), so that every fault arrives exactly when
# the test wants it.
#
#   . "$TEST_DIRECTORY/lib-fake-api.sh"
#   fake_api_start SCRIPT NAMESPACE   starts it on SCRIPT (a JSON file of replies), its requests
#                                     logged in requests.jsonl, its port in port; writes ./kubeconfig
#                                     naming it, with NAMESPACE the context's namespace
#   fake_api_stop                     stops it (nothing when none runs)

command -v python3 >/dev/null || test_skip_all 'python3 is missing'

fake_api_start () {
	rm -f port requests.jsonl &&
	: >requests.jsonl &&
	python3 "$TEST_DIRECTORY/t3003-kapply-retry/fake-api.py" "$1" port requests.jsonl 2>fake.err &
	echo $! >fake.pid
	test_wait_for 10 test -s port &&
	cat >kubeconfig <<-EOC
	apiVersion: v1
	kind: Config
	clusters:
	- name: fake
	  cluster:
	    server: http://127.0.0.1:$(cat port)
	users:
	- name: u
	  user: {}
	contexts:
	- name: fake
	  context: {cluster: fake, user: u, namespace: $2}
	current-context: fake
	EOC
}

fake_api_stop () {
	test -f fake.pid && kill "$(cat fake.pid)" 2>/dev/null
	rm -f fake.pid
	return 0
}
