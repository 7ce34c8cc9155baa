# config.jq: the content of config.yml (docs/iotservice-api.md, "config.yml"), as a
# JSON value whose key order is the YAML's; `iot_config(...) | yaml` is the
# text, byte for byte the original's (spec/vectors).

include "spec";
include "specgen";

# Drops the manifest-only fields ("-" types) of $schema from a typed value
# (the reference for specgen.jq's iot_config_strip_spec, which iot_config uses).
def iot_config_strip($schema):
  if ($schema | type) == "object" then
    . as $v
    | reduce ($schema | keys_unsorted[]) as $k ({};
        ($schema[$k]) as $t
        | if ($t | type) == "string" and ($t | endswith("-")) then .
          else . + {($k): ($v[$k] | iot_config_strip($t))} end)
  elif ($schema | type) == "array" then map(iot_config_strip($schema[0]))
  else . end;

# $spec: the typed spec (iot_spec); $name: X; $ns: the instance namespace I.
def iot_config($spec; $name; $ns):
  ($spec | iot_config_strip_spec | del(.postgresql, .instance_namespace)) as $c
  | {name: $name,
     iotservices: ({instance_namespace: $ns, instance_id: $name} + $c
       | if .certificate.tcs.certificate_authority_url == "" then del(.certificate.tcs) else . end
       | .processing_services |= map(
           (.properties
            | with_entries(select(.value != "" and .value != []))) as $p
           | if ($p | length) == 0 then del(.properties) else .properties = $p end))};
