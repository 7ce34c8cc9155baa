# render.jq: ireconcile's render program for iotservice (program.yml:
# render): the desired children, kept by ireconcile until the spec, the
# related pull secret or a setting changes. See desired.jq.

include "desired";

iot_render
