#!/bin/sh
# A fake exec credential plugin. Counts its runs in $PLUGIN_RUNS and answers
# according to $PLUGIN_FORCE, else $PLUGIN_MODE (set by the kubeconfig): token
# (a new token per run, expiry $PLUGIN_EXPIRY if set), cert, onlycert,
# nostatus, empty, fail, garbage, truncated (a token, cut short), wrongversion.
n=$(( $(cat "$PLUGIN_RUNS" 2>/dev/null || echo 0) + 1 ))
echo $n >"$PLUGIN_RUNS"
# What the plugin was given, for the test to check.
printf '%s\n' "$KUBERNETES_EXEC_INFO" >"$PLUGIN_RUNS.info"
printf '%s\n' "$*" >"$PLUGIN_RUNS.args"
printf '%s\n' "$PLUGIN_MODE" >"$PLUGIN_RUNS.mode"
env | grep -E '^(GNUTLS_NO_IMPLICIT_INIT|KOP_GNUTLS_OURS)=' | sort >"$PLUGIN_RUNS.gnutls" || :
av=client.authentication.k8s.io/v1
case "${PLUGIN_FORCE:-$PLUGIN_MODE}" in
token)
	exp=
	test -n "$PLUGIN_EXPIRY" && exp=",\"expirationTimestamp\":\"$PLUGIN_EXPIRY\""
	echo "{\"apiVersion\":\"$av\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"token-$n\"$exp}}" ;;
cert)
	echo "{\"apiVersion\":\"$av\",\"kind\":\"ExecCredential\",\"status\":{\"clientCertificateData\":\"C\",\"clientKeyData\":\"K\"}}" ;;
onlycert)
	echo "{\"apiVersion\":\"$av\",\"kind\":\"ExecCredential\",\"status\":{\"clientCertificateData\":\"C\"}}" ;;
nostatus)
	echo "{\"apiVersion\":\"$av\",\"kind\":\"ExecCredential\"}" ;;
empty)
	echo "{\"apiVersion\":\"$av\",\"kind\":\"ExecCredential\",\"status\":{}}" ;;
wrongversion)
	echo "{\"apiVersion\":\"client.authentication.k8s.io/v1beta1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"t\"}}" ;;
garbage)
	echo "not json" ;;
truncated)
	echo "{\"apiVersion\":\"$av\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"S3cretT0ken\"" ;;
fail)
	echo "plugin: no credentials" >&2
	exit 3 ;;
esac
