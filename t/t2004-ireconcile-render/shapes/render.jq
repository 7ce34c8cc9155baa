.parent as $p
| {hold: ($p.spec.hold // false), plain: ($p.spec.plain // false),
   desired: [range(2) as $i
     | {apiVersion: "v1", kind: "ConfigMap",
        metadata: {name: "\($p.metadata.name)-\($i)", namespace: $p.metadata.namespace,
                   labels: {shape: $p.metadata.name}},
        data: {color: $p.spec.color, size: "\($p.spec.size)", big: ([range(50)] | map(tostring) | join(",")),
               # base64 of text, long enough to be kept packed (kop_fn_pack)
               b64: ("\($p.spec.color) " * 40 | @base64)}}]}
