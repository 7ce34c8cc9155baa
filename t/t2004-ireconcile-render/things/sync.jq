if has("rendered") | not then error("no .rendered") else . end
| {children: [.rendered.cm],
   status: {configMaps: (.children["ConfigMap.v1"] | length), sawStatus: .rendered.sawStatus,
            sawChildren: .rendered.sawChildren}}
