# rolling: a service of three copies updated one at a time. Change VERSION
# and run it again: each new copy must run for min_healthy_time before the
# next old one is replaced; a version whose copies fail is rolled back.
#
#   gpulayer job run examples/rolling.hcl
#   gpulayer job plan examples/rolling.hcl   # after editing: the diff and the rollout
#   gpulayer deployment list
#   gpulayer job history -p rolling          # versions and what each changed
#   gpulayer job revert rolling 0
#
# More in website/docs/deployments.md.
job "rolling" {
  type = "service"

  update {
    max_parallel     = 1
    health_check     = "task_states"
    min_healthy_time = "5s"
    healthy_deadline = "1m"
    auto_revert      = true
    max_unavailable  = 0 # start each new copy before its old one stops
  }

  group "serve" {
    count = 3

    task "main" {
      driver       = "native"
      kill_signal  = "SIGTERM"
      kill_timeout = "5s"

      env {
        VERSION = "1"
      }

      config {
        command = "/bin/sh"
        args    = ["-c", "trap 'exit 0' TERM; echo \"serving version $VERSION\"; while true; do sleep 1; done"]
      }

      resources {
        cpu    = 100
        memory = 64
      }
    }
  }
}
