# dispatch: a parameterized batch job. Each `job dispatch` creates a child
# render/dispatch-<unix>-<hex> with its own payload and meta; at most two
# children run at once, the others wait as held.
#
#   gpulayer job run examples/dispatch.hcl
#   echo '{"scene": "a"}' | gpulayer job dispatch -meta frame=1 render -
#   gpulayer job status render            # held, pending, running, dead children
#
# More in website/docs/periodic.md.
job "render" {
  type                 = "batch"
  max_running_children = 2

  parameterized {
    payload       = "required"
    meta_required = ["frame"]
    meta_optional = ["quality"]
  }

  group "frame" {
    task "main" {
      driver = "native"

      # The payload is written to local/in/payload.json in the task directory.
      dispatch_payload {
        file = "in/payload.json"
      }

      config {
        command = "/bin/sh"
        args = [
          "-c",
          "echo \"frame $NOMAD_META_frame quality $${NOMAD_META_quality:-default}\"; cat \"$GPULAYER_TASK_DIR/local/in/payload.json\"",
        ]
      }

      resources {
        cpu    = 100
        memory = 64

        device "nvidia/gpu" {
          count = 1
        }
      }
    }
  }
}
