// An HTTP/2 front over TLS to an HTTP/1.1 API server (ksim) on loopback, as kube-apiserver
// speaks HTTP/2 over TLS, for t1011:
//   node h2front.js BACKEND_PORT KEY CERT PORTFILE STATSFILE
// Each HTTP/2 stream is one request to the backend, its answer streamed back as it comes.
// STATSFILE holds {"sessions":N,"streams":N,"open":N,"maxOpen":N} (sessions: HTTP/2
// connections; streams: requests; open, maxOpen: streams open now, at most), written on
// each change. The chosen port is written to PORTFILE when ready.
'use strict';
const http2 = require('http2'), http = require('http'), fs = require('fs');
const [backend, keyFile, certFile, portFile, statsFile] = process.argv.slice(2);
const stats = { sessions: 0, streams: 0, open: 0, maxOpen: 0 };
const save = () => {
  fs.writeFileSync(statsFile + '.tmp', JSON.stringify(stats));
  fs.renameSync(statsFile + '.tmp', statsFile);
};
const hop = new Set(['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'proxy-connection', 'host']);
const server = http2.createSecureServer({ key: fs.readFileSync(keyFile), cert: fs.readFileSync(certFile) });
server.on('session', () => { stats.sessions++; save(); });
server.on('stream', (stream, headers) => {
  stats.streams++; stats.open++; stats.maxOpen = Math.max(stats.maxOpen, stats.open); save();
  let closed = false;
  const done = () => { if (!closed) { closed = true; stats.open--; save(); } };
  stream.on('close', done);
  const out = {};
  for (const [k, v] of Object.entries(headers)) if (!k.startsWith(':') && !hop.has(k)) out[k] = v;
  const req = http.request({ host: '127.0.0.1', port: +backend, method: headers[':method'], path: headers[':path'], headers: out }, (res) => {
    const h = { ':status': res.statusCode };
    for (const [k, v] of Object.entries(res.headers)) if (!hop.has(k)) h[k] = v;
    if (stream.destroyed) return res.destroy();
    stream.respond(h);
    res.pipe(stream);
  });
  req.on('error', () => { if (!stream.destroyed) stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR); });
  stream.on('close', () => req.destroy());
  stream.pipe(req);
});
server.listen(0, '127.0.0.1', () => {
  fs.writeFileSync(portFile + '.tmp', String(server.address().port));
  fs.renameSync(portFile + '.tmp', portFile);
  save();
});
