# model-server: a GPU inference service behind a health check. Two
# instances, each on one GPU and a dynamic host port; each instance is
# registered in GPUlayer's service catalogue only while GET /health answers
# 2xx, so clients that look it up (`gpulayer service info model`, GET
# /v1/service/model) reach only healthy ones.
#
#   gpulayer agent -dev &
#   gpulayer job run examples/model-server.hcl
#   gpulayer service info model
#
# The task is a stand-in for a real model server (vLLM, TGI, Triton...): a
# few lines of Python 3 that answer /health and /v1/models on
# $NOMAD_PORT_http. Replace the command with your server, binding the same
# port.
#
# A new version rolls out one instance at a time, each new instance started
# and passing its check before an old one stops (so two stay serving), and
# a version whose check does not pass is reverted to the last good one.
job "model-server" {
  type = "service"

  group "model" {
    count = 2

    update {
      max_parallel      = 1
      health_check      = "checks" # healthy = every check of the instance passes
      min_healthy_time  = "5s"
      healthy_deadline  = "2m"
      progress_deadline = "10m"
      auto_revert       = true
      max_unavailable   = 0 # start the new instance before stopping an old one
    }

    network {
      port "http" {
        to = 8000
      }
    }

    service {
      name     = "model"
      port     = "http"
      tags     = ["inference", "v1"]
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
          gpus = os.environ.get("CUDA_VISIBLE_DEVICES", "")
          class H(http.server.BaseHTTPRequestHandler):
              def do_GET(self):
                  if self.path == "/health":
                      body = b"ok\n"
                  elif self.path == "/v1/models":
                      body = json.dumps({"data": [{"id": "stand-in", "gpus": gpus}]}).encode()
                  else:
                      self.send_error(404)
                      return
                  self.send_response(200)
                  self.send_header("Content-Length", str(len(body)))
                  self.end_headers()
                  self.wfile.write(body)
              def log_message(self, *args):
                  pass
          print("serving on", port, "gpus", gpus, flush=True)
          http.server.ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()
          PY
        ]
      }

      resources {
        cpu    = 200 # MHz
        memory = 128 # MiB

        device "nvidia/gpu" {
          count = 1
        }
      }
    }
  }
}
