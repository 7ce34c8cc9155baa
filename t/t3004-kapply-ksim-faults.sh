#!/bin/sh
test_description='kapply and kstatus against ksim injecting 429, 500 and 503: retried to success'
. "${0%/*}/test-lib.sh"
. "$TEST_DIRECTORY/lib-ksim.sh"

ksim_start
code=$(curl -sS -m 10 -o /dev/null -w "%{http_code}" "$KSIM_URL/ksim/faults")
case "$code" in
404|405) test_skip_all "this ksim has no fault injection (/ksim/faults answered $code)" ;;
esac

# faults JSON: sets ksim's fault injection
faults () {
	curl -sS -f -m 10 -X POST -H "Content-Type: application/json" -d "$1" "$KSIM_URL/ksim/faults" >/dev/null
}

test_expect_success 'setup: a namespace, a CRD with a status subresource and a Widget' '
	printf "apiVersion: v1\nkind: Namespace\nmetadata: {name: ns}\n" >ns.yaml &&
	timeout 60 kapply -f ns.yaml -f "$TEST_DIRECTORY/t3001-kapply-ksim/crd.yaml" >out 2>err &&
	jq -e -s "length == 4 and all(.ok)" out
'

# through CODE COUNT PATH YAML: COUNT faults of CODE on PATH (the others
# reset), then kapply -f of YAML (printf's format): out, err
through () {
	faults "{\"reset\":true}" &&
	faults "{\"rate\":1,\"code\":$1,\"count\":$2,\"path\":\"$3\"}" &&
	printf "$4" >in.yaml &&
	timeout 60 kapply -f in.yaml >out 2>err
}

for code in 429 500 503; do
	test_expect_success "kapply: $code twice, then the apply succeeds" '
		through $code 2 /api/v1/namespaces/ns/configmaps \
			"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: f$code, namespace: ns}\ndata: {k: v}\n" &&
		jq -e ".ok == true and .code == 201" out &&
		test $(grep -c "retrying apply" err) = 2 &&
		grep -q "after '$code'" err &&
		timeout 30 kubectl get cm f'$code' -n ns
	'
done

# cpu CMD...: runs CMD, prints the CPU seconds it used (user + system)
cpu () {
	perl -e 'system(@ARGV) == 0 or exit 1; my @t = times; printf "%.2f\n", $t[2] + $t[3]' "$@"
}

test_expect_success 'kapply: waiting to retry costs no CPU' '
	faults "{\"reset\":true}" &&
	faults "{\"rate\":1,\"code\":503,\"count\":4,\"path\":\"/api/v1/namespaces/ns/configmaps\"}" &&
	printf "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: idle, namespace: ns}\n" >cm.yaml &&
	cpu sh -c "timeout 60 kapply -f cm.yaml >out 2>err" >cpu &&
	jq -e ".ok == true" out &&
	test $(grep -c "retrying apply" err) = 4 &&
	cat cpu && jq -e ". < 1" cpu
'

test_expect_success 'kapply: a 503 on the discovery of a kind is retried, not "no such kind"' '
	through 503 2 /apis/test.example.org/v1 \
		"apiVersion: test.example.org/v1\nkind: Widget\nmetadata: {name: w9, namespace: ns}\nspec: {color: red}\n" &&
	jq -e ".ok == true and .code == 201" out &&
	grep -q "retrying apply.*503" err
'

test_expect_success 'kapply: a 429 on /api (core discovery) is retried' '
	through 429 2 /api/v1 "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: disc, namespace: ns}\n" &&
	jq -e ".ok == true" out
'

test_expect_success 'kapply: an unknown kind is still reported at once (404)' '
	faults "{\"reset\":true}" &&
	printf "apiVersion: test.example.org/v1\nkind: Gadget\nmetadata: {name: g, namespace: ns}\n" >g.yaml &&
	test_expect_code 100 timeout 60 kapply -f g.yaml >out 2>err &&
	jq -e ".ok == false and .code == 404" out &&
	grep -q "no matches for kind" out
'

test_expect_success 'kstatus: a 503 on the discovery of a kind is retried' '
	faults "{\"reset\":true}" &&
	uid=$(timeout 30 kubectl get widgets.test.example.org w1 -n ns -o jsonpath="{.metadata.uid}") &&
	faults "{\"rate\":1,\"code\":503,\"count\":1,\"path\":\"/apis/test.example.org/v1\"}" &&
	echo "{\"op\":\"status\",\"primary\":\"ns/w1\",\"object\":{\"apiVersion\":\"test.example.org/v1\",\"kind\":\"Widget\",\"metadata\":{\"name\":\"w1\",\"namespace\":\"ns\",\"uid\":\"$uid\"},\"status\":{\"phase\":\"Discovered\"}}}" >in &&
	timeout 60 kstatus <in >out 2>err &&
	jq -e ".ok == true" out
'

test_expect_success 'kstatus: a status write through three 503s reaches the object' '
	faults "{\"reset\":true}" &&
	uid=$(timeout 30 kubectl get widgets.test.example.org w1 -n ns -o jsonpath="{.metadata.uid}") &&
	faults "{\"rate\":1,\"code\":503,\"count\":3,\"path\":\"/apis/test.example.org/v1/namespaces\"}" &&
	echo "{\"op\":\"status\",\"primary\":\"ns/w1\",\"object\":{\"apiVersion\":\"test.example.org/v1\",\"kind\":\"Widget\",\"metadata\":{\"name\":\"w1\",\"namespace\":\"ns\",\"uid\":\"$uid\"},\"status\":{\"phase\":\"Available\"}}}" >in &&
	timeout 60 kstatus <in >out 2>err &&
	jq -e ".ok == true and .for == \"status\" and (.unchanged | not)" out &&
	test $(grep -c "retrying" err) -ge 3 &&
	timeout 30 kubectl get widgets.test.example.org w1 -n ns -o json >w1.json &&
	jq -e ".status.phase == \"Available\"" w1.json
'

test_expect_success 'kstatus: an event through 429s is recorded once' '
	faults "{\"reset\":true}" &&
	faults "{\"rate\":1,\"code\":429,\"count\":2,\"path\":\"/api/v1/namespaces/ns/events\"}" &&
	echo "{\"op\":\"event\",\"event\":{\"involvedObject\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"namespace\":\"ns\",\"name\":\"f429\"},\"type\":\"Normal\",\"reason\":\"Faulty\",\"message\":\"through 429s\"}}" >in &&
	timeout 60 kstatus <in >out 2>err &&
	jq -e ".ok == true and .count == 1" out &&
	timeout 30 kubectl get events -n ns -o json >ev.json &&
	jq -e "[.items[] | select(.reason == \"Faulty\")] | length == 1" ev.json
'

test_expect_success 'cleanup' '
	faults "{\"reset\":true}" &&
	ksim_stop
'

test_done
