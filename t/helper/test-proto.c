/*
 * test-tool commands for lib/kproto (Kubernetes protobuf bodies):
 *   proto-encode            a JSON object on stdin (apiVersion and kind name
 *                           its message) as the "k8s\0" body on stdout
 *   proto-decode            such a body on stdin as the JSON object ksim
 *                           makes of it (apiVersion and kind from the envelope)
 * Errors go to stderr as "test-tool: ...", exit 1.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "kop.h"
#include "kproto.h"
#include "test-tool.h"
#include "banned.h"

static int cmd_proto_encode(int argc, char **argv)
{
	struct kop_buf out = KOP_BUF_INIT;
	char err[KOP_ERRLEN], *in;
	size_t len;
	jv obj;

	if (read_all_fd(0, &in, &len) < 0) {
		perror("test-tool: stdin");
		return 1;
	}
	obj = jv_parse_sized(in, (int)len);
	free(in);
	if (!jv_is_valid(obj)) {
		jv m = jv_invalid_get_msg(obj);

		fprintf(stderr, "test-tool: stdin: %s\n", jv_string_value(m));
		jv_free(m);
		return 1;
	}
	if (kproto_encode(obj, &out, err) < 0) {
		fprintf(stderr, "test-tool: %s\n", err);
		kop_buf_release(&out);
		return 1;
	}
	if (fwrite(out.buf, 1, out.len, stdout) != out.len || fflush(stdout)) {
		perror("test-tool: stdout");
		kop_buf_release(&out);
		return 1;
	}
	kop_buf_release(&out);
	return 0;
}

static int cmd_proto_decode(int argc, char **argv)
{
	char err[KOP_ERRLEN], *in, *av, *kind;
	const unsigned char *raw;
	size_t len, raw_len;
	int mi, rc = 1;
	jv obj, s;

	if (read_all_fd(0, &in, &len) < 0) {
		perror("test-tool: stdin");
		return 1;
	}
	if (kproto_envelope(in, len, &av, &kind, &raw, &raw_len, err) < 0) {
		fprintf(stderr, "test-tool: %s\n", err);
		free(in);
		return 1;
	}
	if ((mi = kproto_kind_msg(av, kind)) < 0) {
		fprintf(stderr, "test-tool: no protobuf message for apiVersion %s kind %s\n", av, kind);
	} else if (kproto_decode((unsigned)mi, raw, raw_len, &obj, err) < 0) {
		fprintf(stderr, "test-tool: %s\n", err);
	} else {
		obj = jv_object_merge(JV_OBJECT(jv_string("kind"), jv_string(kind), jv_string("apiVersion"),
						jv_string(av)), obj);
		s = jv_dump_string(obj, 0);
		printf("%s\n", jv_string_value(s));
		jv_free(s);
		rc = 0;
	}
	free(av);
	free(kind);
	free(in);
	return rc;
}

static const struct test_cmd proto_cmds[] = {
	{ "proto-encode", cmd_proto_encode },
	{ "proto-decode", cmd_proto_decode },
	{ NULL, NULL }
};
TEST_TOOL_REGISTER(proto_cmds)
