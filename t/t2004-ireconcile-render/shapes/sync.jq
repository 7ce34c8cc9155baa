# Holding: every observed child given back as it came (kept as it is).
# Otherwise the first rendered child as sync saw it (applied whole) and the
# second with one more key (merged into the whole one).
{children: (if .rendered.hold then [.children["ConfigMap.v1"][]]
            else [.rendered.desired[0], (.rendered.desired[1] | .data.extra = "x")] end),
 status: {sawSpec: (.parent | has("spec")), seen: [.rendered.desired[].data | keys],
          observed: [.children["ConfigMap.v1"][] | .data | keys]}}
