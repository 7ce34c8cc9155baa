# spec.jq: the IoTService spec as the original operator decoded it
# (docs/iotservice-api.md), its defaults and its validation.
#
# iot_spec: .spec (any JSON) -> the typed, defaulted spec, every field
# present in the original's struct order; or error({field, value, message})
# naming the first bad field. iot_decode_collect and iot_validate_all name
# every bad field (desired.jq reports them all); iot_invalid_text is the
# status reason's text.

include "kop";

# The field set in struct order, which is also config.yml's key order.
# Leaf types: "s" string, "i" int, "i32" int32, "b" bool, "r" resources.
# A leaf type ending in "-" is used by the manifests only, never written to
# config.yml.
def iot_spec_schema:
  def common: {image: "s-", size: "i32-", resources: "r-"};
  def db: {hostname: "s", port: "s", dbadminuser: "s", dbadminpassword: "s"};
  {
    instance_namespace: "s",
    instance_owner_pwd: "s",
    client_auth_cert: ["s"],
    server_cert: "s",
    domain_name: "s",
    mms: ({listening_address: "s", max_heap_size: "s", amq_store_size_mb: "i"} + common
          + {container_port_jms: "s", container_port_jms_tls: "s", container_port_hazelcast: "s",
             persistent_volume_claim_size: "s"}),
    core: ({listening_address: "s", max_heap_size: "s"} + common
           + {container_port_http: "s", container_port_hazelcast: "s"}),
    core_spring: ({enabled: "b", max_heap_size: "s", database: db} + common
                  + {container_port: "s", persistent_volume_claim_size: "s"}),
    data_migration: {enabled: "b"},
    measure_migration: {enabled: "b"},
    processing: ({max_heap_size: "s", database: (db + {dbname: "s"}),
                  types: {kafka: {enabled: "b"},
                          iotae: {enabled: "b", user: "s", password: "s", brokers: "s", token_url: "s",
                                  subaccount_id: "s"},
                          sql: {enabled: "b"}, internalsql: {enabled: "b"}, http: {enabled: "b"}}}
                 + common
                 + {container_port: "s",
                    kafkaProducer: {acks: "s", maxBlockInMs: "s", requestTimeoutInMs: "s", retries: "s",
                                    retryBackoffInMs: "s", maxRequestSize: "s"},
                    throughputConfiguration: {sqlQueueCapacity: "s", httpQueueCapacity: "s",
                                              kafkaQueueCapacity: "s", leonardoIotQueueCapacity: "s",
                                              internalSqlQueueCapacity: "s",
                                              batching: {batchSize: "s", forceTimeoutMilliseconds: "s",
                                                         checkPeriodForCommitTimeoutMilliseconds: "s",
                                                         numberOfThreads: "s", maxSizeMbytes: "s",
                                                         maxThreadsWaitingForMeasures: "s",
                                                         maxThreadsProcessingMeasures: "s"}}}),
    cockpit: ({listening_address: "s", max_heap_size: "s",
               iot_connect_365: {enabled: "b", host: "s", application_token: "s"}} + common
              + {container_port: "s"}),
    gateway: {enable_device_vitality: "b", enable_measure_validation: "b",
              mqtt: ({listening_address: "s", max_heap_size: "s", amq_store_size_mb: "i"} + common
                     + {amq_temp_size_mb: "i", tenant_exposed: "b", container_port: "s",
                        persistent_volume_claim_size: "s"}),
              rest: ({listening_address: "s", max_heap_size: "s"} + common
                     + {commands_ttl: "i", container_port: "s"})},
    haproxy: (common + {container_port_http: "s", container_port_https: "s", container_port_mqtt: "s",
                        container_port_jms: "s"}),
    postgresql: (common + {container_port: "s-"}),
    certificate: {provider: "s", registration_authority_certificate_password: "s",
                  tcs: {certificate_authority_url: "s"}},
    metering: {maas: {enabled: "b", organization_id: "s", space_id: "s", instance_id: "s", domain: "s",
                      region: "s", client_id: "s", client_secret: "s"},
               enabled: "b", organization_id: "s", space_id: "s", domain: "s", instance_id: "s",
               resource_id: "s", user: "s", password: "s"},
    processing_services: [{name: "s",
                           properties: {"processing.kafka.brokers": "s", "processing.kafka.topic.metadata": "s",
                                        "processing.kafka.topic.measures": "s", "processing.kafka.user": "s",
                                        "processing.kafka.password": "s", "processing.kafka.tokenurl": "s",
                                        "processing.http.url": "s",
                                        "processing.http.headers": [{name: "s", value: "s"}]}}],
    packetdb: db,
    last_alive: {enabled: "b", period_seconds: "i"},
    enable_multi_protocol_support: "b",
    jwt_validation_url: "s",
    imagePullPolicy: "s-",
    imagePullSecrets: "s-",
    enableNetworkPolicies: "b-",
    auditlog: {enabled: "b", domain: "s", user: "s", password: "s", subAccountId: "s",
               auditLogLastEventCache: {expireAfterWriteSec: "i", maxSize: "i"}},
    on_boarding: "s",
    enable_monitoring: "b-"
  };

# THE defaults table (docs/iotservice-api.md, the spec fields): a string is defaulted when
# it is "", an int when it is 0. Nothing else is defaulted. deploy/'s CRD
# carries the same values as schema defaults.
def iot_defaults:
  [
    [["auditlog", "auditLogLastEventCache", "expireAfterWriteSec"], 60],
    [["mms", "container_port_hazelcast"], "5701"],
    [["mms", "container_port_jms"], "61619"],
    [["mms", "container_port_jms_tls"], "61620"],
    [["mms", "persistent_volume_claim_size"], "10Gi"],
    [["core", "container_port_http"], "8161"],
    [["core", "container_port_hazelcast"], "5801"],
    [["core_spring", "container_port"], "8081"],
    [["core_spring", "persistent_volume_claim_size"], "2Gi"],
    [["processing", "container_port"], "8082"],
    [["processing", "kafkaProducer", "acks"], "1"],
    [["processing", "kafkaProducer", "maxBlockInMs"], "3000"],
    [["processing", "kafkaProducer", "requestTimeoutInMs"], "30000"],
    [["processing", "kafkaProducer", "retries"], "20"],
    [["processing", "kafkaProducer", "retryBackoffInMs"], "5000"],
    [["processing", "kafkaProducer", "maxRequestSize"], "1048576"],
    [["processing", "throughputConfiguration", "sqlQueueCapacity"], "200"],
    [["processing", "throughputConfiguration", "httpQueueCapacity"], "200"],
    [["processing", "throughputConfiguration", "kafkaQueueCapacity"], "200"],
    [["processing", "throughputConfiguration", "leonardoIotQueueCapacity"], "200"],
    [["processing", "throughputConfiguration", "internalSqlQueueCapacity"], "200"],
    [["processing", "throughputConfiguration", "batching", "batchSize"], "5000"],
    [["processing", "throughputConfiguration", "batching", "forceTimeoutMilliseconds"], "2000"],
    [["processing", "throughputConfiguration", "batching", "checkPeriodForCommitTimeoutMilliseconds"], "1000"],
    [["processing", "throughputConfiguration", "batching", "numberOfThreads"], "8"],
    [["processing", "throughputConfiguration", "batching", "maxSizeMbytes"], "128"],
    [["processing", "throughputConfiguration", "batching", "maxThreadsWaitingForMeasures"], "100"],
    [["processing", "throughputConfiguration", "batching", "maxThreadsProcessingMeasures"], "8"],
    [["cockpit", "container_port"], "8080"],
    [["gateway", "mqtt", "container_port"], "61628"],
    [["gateway", "mqtt", "amq_temp_size_mb"], 1000],
    [["gateway", "mqtt", "persistent_volume_claim_size"], "20Gi"],
    [["gateway", "rest", "container_port"], "8699"],
    [["gateway", "rest", "commands_ttl"], 21600000],
    [["haproxy", "container_port_http"], "80"],
    [["haproxy", "container_port_https"], "443"],
    [["haproxy", "container_port_mqtt"], "8883"],
    [["haproxy", "container_port_jms"], "61616"],
    [["postgresql", "container_port"], "5432"],
    [["on_boarding"], "oneproduct"]
  ];

# "spec.a.b[0].c" for an error message.
def iot_field($path):
  reduce $path[] as $p ("spec"; if ($p | type) == "number" then . + "[\($p)]" else . + "." + $p end);

def iot_fail($path; $value; $message): error({field: iot_field($path), value: $value, message: $message});

# An invalid field as the status reason and the Warning event name it:
# "spec.F V: message". V, the value, is shown only when it is a scalar and
# the field holds no secret (the reason is readable by whoever may read the
# IoTService, the event by whoever may read events): a password, token or
# secret, or an HTTP header's value, is never shown; an object or a list is
# named by its type (it may hold secrets); a long scalar is cut.
def iot_secret_field: test("(?i)(password|passwd|pwd|secret|token)$|\\.headers\\[[0-9]+\\]\\.value$");
# An entry without a value (a problem of the spec as a whole) shows none.
def _iot_invalid_one:
  .field
  + (if (has("value") | not) or (.field | iot_secret_field) then ""
     elif (.value | type) == "object" then " (an object)"
     elif (.value | type) == "array" then " (a list)"
     else .value | tojson | " " + (if length > 64 then .[:61] + "..." else . end) end)
  + ": " + .message;
# Several invalid fields ({field, value, message} of the first, .more the
# others, as iot_spec_invalid gives them): each so, "; " between them, at
# most iot_invalid_listed of them, then how many more there are (a status and
# an Event stay readable, and small, whatever the spec holds).
def iot_invalid_listed: 25;
def iot_invalid_text:
  ([del(.more)] + (.more // [])) as $all
  | [$all[:iot_invalid_listed][] | _iot_invalid_one]
    + (if ($all | length) > iot_invalid_listed then ["and \(($all | length) - iot_invalid_listed) more invalid fields"]
       else [] end)
  | join("; ");

# The list of problems [{field, value, message}, ...] (stable order) as the
# render answer's .invalid: null when empty, else the first with .more, the
# others (so a reader of .field, .value and .message sees the first).
def iot_invalid_of($errors):
  if ($errors | length) == 0 then null
  elif ($errors | length) == 1 then $errors[0]
  else $errors[0] + {more: $errors[1:]} end;

# One decoder per schema type, as Go's JSON decoder did: null is the zero
# value, a type mismatch is an error naming the field (p: its path, only
# evaluated then). iot_decode walks the schema with them; specgen.jq, made
# from the schema by scripts/iotservice-specgen.jq, calls them in a straight
# line (a schema walk costs jq 1.6 several times as much). The commonest
# case, a value of the right type, is asked first: a comparison less.
def iot_decode_object(p):
  if type == "object" then . elif . == null then {} else iot_fail(p; .; "must be an object") end;
def iot_decode_list(p):
  if type == "array" then . elif . == null then [] else iot_fail(p; .; "must be a list") end;
def iot_decode_string(p):
  if type == "string" then . elif . == null then "" else iot_fail(p; .; "must be a string") end;
def iot_decode_bool(p):
  if type == "boolean" then . elif . == null then false else iot_fail(p; .; "must be a boolean") end;
def iot_decode_int(p):
  if type == "number" and . == floor and (. >= -9007199254740991 and . <= 9007199254740991) then .
  elif . == null then 0
  else iot_fail(p; .; "must be an integer") end;
def iot_decode_int32(p):
  if type == "number" and . == floor and (. >= -2147483648 and . <= 2147483647) then .
  elif . == null then 0
  else iot_fail(p; .; "must be a 32-bit integer") end;
def _iot_canonical_map: . == null or (type == "object" and all(.[]; type == "string" and _kop_quantity_fast));
def iot_decode_resources(p):
  if type == "object" and (.limits | _iot_canonical_map) and (.requests | _iot_canonical_map) then
    # the commonest case, every quantity already canonical: the maps as they
    # are (a third of a render's jq operations went to rebuilding them)
    (if (.limits | length) > 0 then {limits} else {} end)
    + (if (.requests | length) > 0 then {requests} else {} end)
  else
    p as $path
    | if . == null then {}
      elif type == "object" then .
      else iot_fail($path; .; "must be an object with limits and requests") end
    | . as $r
    | reduce (["limits", "requests"][] | select($r[.] != null)) as $k ({};
        if ($r[$k] | type) != "object" then iot_fail($path + [$k]; $r[$k]; "must be a map of quantities")
        else
          ($r[$k] | to_entries | map(
             .key as $name
             | (.value | if type == "number" then tostring else . end | kop_quantity) as $q
             | if $q == null or ($q | startswith("-")) then
                 iot_fail($path + [$k, $name]; .value; "is not a valid quantity")
               else {key: $name, value: $q} end)
           | from_entries) as $map
          # an empty map is stored as absent (B11)
          | if ($map | length) > 0 then . + {($k): $map} else . end
        end)
  end;

# Decodes . against $schema (unknown fields dropped, the schema's order).
def iot_decode($schema; $path):
  if ($schema | type) == "object" then
    iot_decode_object($path)
    | . as $in
    | reduce ($schema | keys_unsorted[]) as $k ({}; . + {($k): ($in[$k] | iot_decode($schema[$k]; $path + [$k]))})
  elif ($schema | type) == "array" then
    iot_decode_list($path) | [to_entries[] | .key as $i | .value | iot_decode($schema[0]; $path + [$i])]
  else
    ($schema | rtrimstr("-")) as $t
    | if $t == "s" then iot_decode_string($path)
      elif $t == "b" then iot_decode_bool($path)
      elif $t == "i" then iot_decode_int($path)
      elif $t == "i32" then iot_decode_int32($path)
      elif $t == "r" then iot_decode_resources($path)
      else . end
  end;

# As iot_decode, but every bad field is reported: {v: the decoded value, each
# bad field given its zero value (as if absent), e: [{field, value, message},
# ...] in the schema's order}, the same wording as iot_decode's first error.
# (Run only when iot_spec_fast failed: an invalid spec, rare and small.)
def _iot_catch(f; zero):
  try {v: f, e: []}
  catch (if type == "object" and has("field") then {v: zero, e: [.]} else error(.) end);
def _iot_resources_errors($path):
  if . == null then []
  elif type != "object" then [try iot_decode_resources($path) catch .]
  else
    . as $r
    | [["limits", "requests"][] as $k | select($r[$k] != null)
       | if ($r[$k] | type) != "object" then
           {field: iot_field($path + [$k]), value: $r[$k], message: "must be a map of quantities"}
         else
           $r[$k] | to_entries[]
           | (.value | if type == "number" then tostring else . end | kop_quantity) as $q
           | select($q == null or ($q | startswith("-")))
           | {field: iot_field($path + [$k, .key]), value: .value, message: "is not a valid quantity"}
         end]
  end;
def iot_decode_collect($schema; $path):
  if ($schema | type) == "object" then
    _iot_catch(iot_decode_object($path); {}) as $o
    | reduce ($schema | keys_unsorted[]) as $k ({v: {}, e: $o.e};
        ($o.v[$k] | iot_decode_collect($schema[$k]; $path + [$k])) as $r
        | .v[$k] = $r.v | .e += $r.e)
  elif ($schema | type) == "array" then
    _iot_catch(iot_decode_list($path); []) as $l
    | reduce ($l.v | to_entries[]) as $item ({v: [], e: $l.e};
        ($item.value | iot_decode_collect($schema[0]; $path + [$item.key])) as $r
        | .v += [$r.v] | .e += $r.e)
  else
    ($schema | rtrimstr("-")) as $t
    | if $t == "s" then _iot_catch(iot_decode_string($path); "")
      elif $t == "b" then _iot_catch(iot_decode_bool($path); false)
      elif $t == "i" then _iot_catch(iot_decode_int($path); 0)
      elif $t == "i32" then _iot_catch(iot_decode_int32($path); 0)
      elif $t == "r" then
        _iot_resources_errors($path) as $e
        | if $e == [] then {v: iot_decode_resources($path), e: []} else {v: {}, e: $e} end
      else {v: ., e: []} end
  end;

# What the spec may not choose (docs/iotservice-api.md): tenant_exposed is forced false.
def iot_spec_forced: .gateway.mqtt.tenant_exposed = false;

# The defaults of §1.5 (a field left "" or 0 takes its default), then the
# forced values, on a decoded spec.
def iot_spec_defaults:
  reduce iot_defaults[] as [$path, $value] (.;
    if getpath($path) == "" or getpath($path) == 0 then setpath($path; $value) else . end)
  | iot_spec_forced;

# The typed spec with its defaults (the schema walked: the reference that
# specgen.jq's iot_spec_fast is checked against, t2106).
def iot_spec: iot_decode(iot_spec_schema; []) | iot_spec_defaults;

# A port as the spec writes it: 1 to 5 digits, 1-65535 ("0080" too).
def _iot_port_text_full:
  (length >= 1 and length <= 5 and (explode | all(. >= 48 and . <= 57)))
  and tonumber >= 1 and tonumber <= 65535;
# The same answer, the commonest text first: a number as tostring writes it
# (a fifth of the jq operations; ~25 ports a render).
def iot_port_text:
  (kop_int_text as $n | $n != null and $n >= 1 and $n <= 65535)
  or _iot_port_text_full;

# The spec blocks of the components, in struct order: each has a size, an
# image and container ports, whether or not it is rendered.
def iot_component_paths:
  [["mms"], ["core"], ["core_spring"], ["processing"], ["cockpit"], ["gateway", "mqtt"], ["gateway", "rest"],
   ["haproxy"], ["postgresql"]];

# What the manifests and config.yml need, checked on a decoded spec: each
# problem as {field, value, message}, in a stable order (the components in
# struct order, each its size, image and ports; then imagePullPolicy,
# imagePullSecrets and the volume sizes). Sizes, ports and volume sizes are
# checked in every component (a negative postgresql.size is an error, not
# "not rendered"; config.yml carries the ports of all); an image only where
# it is used. $rendered: the spec paths of the components rendered.
def iot_validate_all($rendered):
  . as $s
  | def bad($path; $v; $message): {field: iot_field($path), value: $v, message: $message};
    def port($path):
      ($s | getpath($path)) as $v
      | if $v | iot_port_text then empty
        else bad($path; $v; "is not a port number (1-65535)") end;
    (iot_component_paths[] as $path
      | ($s | getpath($path)) as $b
      | (if $b.size < 0 then bad($path + ["size"]; $b.size; "must not be negative") else empty end),
        (if $b.image == "" and any($rendered[]; . == $path) then bad($path + ["image"]; ""; "must not be empty")
         else empty end),
        (($b | keys_unsorted[] | select(startswith("container_port"))) as $k | port($path + [$k])))
    # (no array index(): it leaks in jq 1.6)
    , (if any(("", "Always", "IfNotPresent", "Never"); . == $s.imagePullPolicy) then empty
       else bad(["imagePullPolicy"]; $s.imagePullPolicy; "must be Always, IfNotPresent or Never") end)
    , (if $s.imagePullSecrets == "" or ($s.imagePullSecrets | kop_dns1123_label) or
          ($s.imagePullSecrets | test("^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$") and length <= 253) then empty
       else bad(["imagePullSecrets"]; $s.imagePullSecrets; "is not a valid secret name") end)
    , ([["mms", "persistent_volume_claim_size"], ["core_spring", "persistent_volume_claim_size"],
        ["gateway", "mqtt", "persistent_volume_claim_size"]][] as $path
       | ($s | getpath($path)) as $v
       | if ($v | kop_quantity) == null or ($v | kop_quantity | startswith("-")) then
           bad($path; $v; "is not a valid quantity")
         else empty end);
