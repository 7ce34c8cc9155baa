{children: .rendered.desired, status: {children: (.rendered.desired | length)}}
