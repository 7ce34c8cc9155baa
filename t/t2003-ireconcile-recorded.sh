#!/bin/sh
test_description='ireconcile: real recorded watch streams (t/data/recordings/deployment)'
. "${0%/*}/test-lib.sh"

for in in "$FIXTURES"/*.in.jsonl
do
	name=$(basename "$in" .in.jsonl)
	test_expect_success "golden: $name" '
		ireconcile -v "$FIXTURES/rollout" <"$in" >$name.out 2>$name.err &&
		test_no_sanitizer_report $name.err &&
		test_cmp_json "$FIXTURES/$name.expect.jsonl" $name.out &&
		if test $name = 06-stray
		then
			grep "desired ConfigMap .elsewhere/stray. would not map back" $name.err
		else
			! grep -E "\"level\":\"(warn|error)\"" $name.err
		fi
	'
done

test_expect_success 'a desired child that would not map back: logged, retried, nothing pruned' '
	{
		sed "\$d" "$FIXTURES/06-stray.in.jsonl" &&
		echo "{\"type\":\"ADDED\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"old\",\"namespace\":\"rec-deploy\",\"uid\":\"uid-old\",\"resourceVersion\":\"906\",\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"name\":\"web\",\"uid\":\"9c6e1345-a864-4311-b448-d2b282a32dc3\",\"controller\":true}]}}}" &&
		tail -n 1 "$FIXTURES/06-stray.in.jsonl"
	} >stray-old.in &&
	ireconcile "$FIXTURES/rollout" <stray-old.in >stray-old.out 2>stray-old.err &&
	test_no_sanitizer_report stray-old.err &&
	jq -r .op stray-old.out >ops && echo apply >expect && test_cmp expect ops &&
	jq -e "select(.level == \"error\") | .retryInMs > 0 and (.msg | endswith(\"; not applied, nothing pruned\"))" stray-old.err &&
	jq -c "if .object.kind == \"Deployment\" then del(.object.metadata.annotations[\"test.example.org/stray\"]) else . end" \
		<stray-old.in >no-stray.in &&
	ireconcile "$FIXTURES/rollout" <no-stray.in >no-stray.out 2>no-stray.err &&
	jq -r "select(.op == \"delete\") | .object.metadata.name" no-stray.out >deleted &&
	echo old >expect && test_cmp expect deleted
'

test_expect_success 'a whole rollout read at once is one reconcile' '
	jq -r "select(.msg | startswith(\"reconciled \")) | .primary" <03-rolled.err >reconciled &&
	echo rec-deploy/web >expect &&
	test_cmp expect reconciled
'

test_expect_success 'children map back by owner reference (ReplicaSets) and by label (pods)' '
	jq -r ".object.data | .replicaSets, .running" <03-rolled.out >seen &&
	cat >expect <<-\EOF &&
	web-5c6d6746f4,web-5d77888775
	web-5d77888775-fkj2x,web-5d77888775-hkjcj,web-5d77888775-m7q5r
	EOF
	test_cmp expect seen
'

test_expect_success 'the desired child gets the controller owner reference' '
	jq -c ".object.metadata.ownerReferences" <01-initial.out >refs &&
	echo "[{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"name\":\"web\",\"uid\":\"9c6e1345-a864-4311-b448-d2b282a32dc3\",\"controller\":true,\"blockOwnerDeletion\":true}]" >expect &&
	test_cmp expect refs
'

test_expect_success 'the same streams fed live, event by event, end in the same state' '
	mkfifo in &&
	{ timeout 30 ireconcile -v "$FIXTURES/rollout" <in >live.out 2>live.err & } &&
	pid=$! &&
	exec 5>in &&
	while read -r line
	do
		printf "%s\n" "$line" >&5 && sleep 0.02 || return 1
	done <"$FIXTURES/03-rolled.in.jsonl" &&
	exec 5>&- &&
	wait $pid &&
	test $(jq -r "select(.msg | startswith(\"reconciled \")) | .primary" <live.err | wc -l) -gt 1 &&
	tail -n 1 live.out >last &&
	test_cmp_json "$FIXTURES/03-rolled.expect.jsonl" last
'

test_done
