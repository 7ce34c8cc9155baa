#!/bin/sh
test_description='lib/kube: responses decoded (Status, plain text, curl errors) and classified in one place'
. "${0%/*}/test-lib.sh"

# The body of a recorded HTTP exchange (everything after the first blank line) into FILE.
body_of () {
	sed "1,/^\r\{0,1\}$/d" "$TEST_DATA/recordings/errors/$1" >"$2"
}

# response CODE BODY [RETRY-AFTER [CURLCODE]] as one line of JSON, compared with $expect
check () {
	"$KOP_TEST_TOOL" response "$@" >out &&
	echo "$expect" | jq -S -c . >expect.json &&
	jq -S -c "del(.why)" out >actual.json &&
	test_cmp expect.json actual.json
}

test_expect_success 'a recorded 404 Status: reason and message from the body, permanent' '
	body_of 404-not-found.http.txt b &&
	expect="{\"code\":404,\"reason\":\"NotFound\",\"message\":\"configmaps \\\"nope\\\" not found\",\"retry_after\":-1,\"transient\":false,\"exit\":100}" &&
	check 404 b
'

test_expect_success 'recorded 403, 409, 415, 422: reasons from the body, only a 409 Conflict transient (AlreadyExists is not)' '
	for f in 403-forbidden:403:Forbidden:false 403-namespace-terminating:403:Forbidden:false \
		 409-already-exists:409:AlreadyExists:false 409-conflict-stale:409:Conflict:true \
		 409-apply-conflict:409:Conflict:true 415-or-404-smp-on-cr:415:UnsupportedMediaType:false \
		 422-invalid:422:Invalid:false; do
		IFS=: read name code reason tr <<-EOF
		$f
		EOF
		body_of $name.http.txt b &&
		"$KOP_TEST_TOOL" response $code b >out &&
		test "$(jq -r .reason out)" = "$reason" &&
		test "$(jq -r .transient out)" = "$tr" &&
		test "$(jq -r .message out)" = "$(jq -r .message b)" || { echo "$f: $(cat out)"; return 1; }
	done
'

test_expect_success 'plain-text 404 page not found becomes NotFound with client-go message' '
	printf "404 page not found\n" >b &&
	expect="{\"code\":404,\"reason\":\"NotFound\",\"message\":\"the server could not find the requested resource\",\"retry_after\":-1,\"transient\":false,\"exit\":100}" &&
	check 404 b
'

test_expect_success 'plain-text 429 with Retry-After: TooManyRequests, transient, the text kept' '
	printf "Too many requests, please try again later.\n" >b &&
	expect="{\"code\":429,\"reason\":\"TooManyRequests\",\"message\":\"Too many requests, please try again later.\",\"retry_after\":1,\"transient\":true,\"exit\":111}" &&
	check 429 b " 1 "
'

test_expect_success 'details.retryAfterSeconds when there is no header; the header wins when both' '
	echo "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"message\":\"the request has been made before all known HTTP paths have been installed, please try again\",\"reason\":\"ServiceUnavailable\",\"details\":{\"retryAfterSeconds\":5},\"code\":503}" >b &&
	"$KOP_TEST_TOOL" response 503 b >out &&
	test "$(jq -c "[.reason,.retry_after,.transient,.exit]" out)" = "[\"ServiceUnavailable\",5,true,111]" &&
	"$KOP_TEST_TOOL" response 503 b 7 >out &&
	test "$(jq .retry_after out)" = 7 &&
	"$KOP_TEST_TOOL" response 503 b "Wed, 21 Oct 2015 07:28:00 GMT" >out &&
	test "$(jq .retry_after out)" = 5
'

# What messages say: "Reason: message", the reason once when the message only repeats it.
test_expect_success 'the why of a response: reason and message, a message repeating the reason left out' '
	echo "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"message\":\"Unauthorized\",\"reason\":\"Unauthorized\",\"code\":401}" >b &&
	"$KOP_TEST_TOOL" response 401 b >out &&
	test "$(jq -r .why out)" = "Unauthorized" &&
	echo "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"message\":\"too many requests\",\"reason\":\"TooManyRequests\",\"code\":429}" >b &&
	"$KOP_TEST_TOOL" response 429 b >out &&
	test "$(jq -r .why out)" = "TooManyRequests" &&
	printf "Too many requests, please try again later.\n" >b &&
	"$KOP_TEST_TOOL" response 429 b >out &&
	test "$(jq -r .why out)" = "TooManyRequests: Too many requests, please try again later." &&
	body_of 404-not-found.http.txt b &&
	"$KOP_TEST_TOOL" response 404 b >out &&
	test "$(jq -r .why out)" = "NotFound: configmaps \"nope\" not found" &&
	"$KOP_TEST_TOOL" response 401 "" >out &&
	test "$(jq -r .why out)" = "Unauthorized: the server has asked for the client to provide credentials"
'

test_expect_success 'codes without a body: reason from the code; 408 and 5xx transient, 400 and 401 permanent' '
	for c in 400:BadRequest:false 401:Unauthorized:false 408:Timeout:true 500:InternalError:true \
		 502:InternalError:true 503:ServiceUnavailable:true 504:Timeout:true 418:Unknown:false; do
		IFS=: read code reason tr <<-EOF
		$c
		EOF
		"$KOP_TEST_TOOL" response $code "" >out &&
		test "$(jq -c "[.reason,.transient]" out)" = "[\"$reason\",$tr]" || { echo "$c: $(cat out)"; return 1; }
	done
'

test_expect_success 'no response: connection errors transient, TLS verification permanent' '
	"$KOP_TEST_TOOL" response 0 "" "" 7 >out &&
	test "$(jq -c "[.code,.reason,.transient,.exit]" out)" = "[0,\"CouldNotConnect\",true,111]" &&
	test "$(jq -r .message out)" = "Couldn'\''t connect to server" &&
	"$KOP_TEST_TOOL" response 0 "" "" 28 >out &&
	test "$(jq -c "[.reason,.transient]" out)" = "[\"Timeout\",true]" &&
	"$KOP_TEST_TOOL" response 0 "" "" 60 >out &&
	test "$(jq -c "[.reason,.transient,.exit]" out)" = "[\"TLSVerificationFailed\",false,100]"
'

test_expect_success 'a 200 cut short is a transient failure' '
	echo "{\"kind\":\"List\"" >b &&
	"$KOP_TEST_TOOL" response 200 b "" 18 >out &&
	test "$(jq -c "[.reason,.transient]" out)" = "[\"PartialResponse\",true]"
'

test_expect_success 'a 200 with a JSON body is no error' '
	body_of 200-apply-forced.http.txt b &&
	"$KOP_TEST_TOOL" response 200 b >out &&
	test "$(jq -c "[.reason,.message,.transient]" out)" = "[null,null,false]"
'

test_done
