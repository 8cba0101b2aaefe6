// HTTP plumbing shared by the scenario's proxies (fault_proxy.js, limits_proxy.js): forward
// one buffered request to an upstream emulator, and answer a buffered response.
'use strict'

const http = require('http')

// Sends `body` to the upstream `up` (a URL) with the request's method, path and headers;
// cb(err) or cb(null, status, headers, bodyBuffer).
function forward(agent, up, req, body, cb) {
  const headers = {...req.headers, host: up.host}
  delete headers.connection
  delete headers['transfer-encoding']
  headers['content-length'] = body.length
  const r = http.request(
    {host: up.hostname, port: up.port, method: req.method, path: req.url, headers, agent},
    (res) => {
      const chunks = []
      res.on('data', (c) => chunks.push(c))
      res.on('end', () => cb(null, res.statusCode, res.headers, Buffer.concat(chunks)))
      res.on('error', (e) => cb(e))
    }
  )
  r.on('error', (e) => cb(e))
  r.end(body)
}

// Answers with a whole body (Content-Length set, no chunking); nothing once the client left.
function reply(res, status, headers, body) {
  if (res.destroyed || res.writableEnded) return
  const h = {...headers}
  delete h['transfer-encoding']
  delete h.connection
  h['content-length'] = body.length
  res.writeHead(status, h)
  res.end(body)
}

// An HTTP server that buffers each request body and calls onRequest(req, res, body); its open
// connections are kept in `sockets` so that closing can cut them.
function bufferingServer(onRequest) {
  const sockets = new Set()
  const server = http.createServer((req, res) => {
    const chunks = []
    req.on('data', (c) => chunks.push(c))
    req.on('end', () => onRequest(req, res, Buffer.concat(chunks)))
    req.on('error', () => {})
  })
  server.keepAliveTimeout = 60000
  server.on('connection', (s) => {
    sockets.add(s)
    s.on('close', () => sockets.delete(s))
  })
  server.on('clientError', (err, socket) => socket.destroy())
  return {server, sockets}
}

module.exports = {forward, reply, bufferingServer}
