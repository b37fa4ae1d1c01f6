# endpoint-native: three identical native members of one model tier on one
# node, served behind one endpoint. The scheduler places all three members
# on the same node (or none, saying why); the client agent of that node
# runs the endpoint's router on port 9000, and admits a member once its
# check passes and its GET /v1/models lists the declared model.
#
#   gpulayer agent -dev &
#   gpulayer job validate examples/endpoint-native.hcl
#   gpulayer job run examples/endpoint-native.hcl
#   curl -s localhost:9000/v1/models
#
# Each member is a stand-in for a real OpenAI-compatible server (vLLM,
# llama.cpp server...): a few lines of Python 3 that answer /health and
# /v1/models on its own dynamic port, $NOMAD_PORT_http.
job "endpoint-native" {
  type = "service"

  group "llm" {
    count = 3 # 2-16 members, all on one node

    network {
      port "http" {} # each member's own dynamic host port
    }

    endpoint {
      name        = "llm-small"
      port        = 9000 # the router's host port on the members' node
      model       = "stand-in-1b"
      revision    = "2026-01"
      policy      = "round_robin"
      models_path = "/v1/models"
      member_port = "http"
    }

    service {
      name     = "llm-small-member"
      port     = "http"
      provider = "gpulayer"

      check {
        type     = "http"
        path     = "/health"
        interval = "2s"
        timeout  = "1s"
      }
    }

    task "server" {
      driver = "native"

      config {
        command = "/usr/bin/env"
        args = [
          "python3", "-c",
          <<-PY
          import http.server, json, os
          port = int(os.environ["NOMAD_PORT_http"])
          class H(http.server.BaseHTTPRequestHandler):
              def do_GET(self):
                  if self.path == "/health":
                      body = b"ok\n"
                  elif self.path == "/v1/models":
                      body = json.dumps({"object": "list", "data": [{"id": "stand-in-1b", "object": "model"}]}).encode()
                  else:
                      self.send_error(404)
                      return
                  self.send_response(200)
                  self.send_header("Content-Type", "application/json")
                  self.send_header("Content-Length", str(len(body)))
                  self.end_headers()
                  self.wfile.write(body)
              def log_message(self, *args):
                  pass
          http.server.ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()
          PY
        ]
      }

      resources {
        cpu    = 100 # MHz
        memory = 64  # MiB
      }
    }
  }
}
