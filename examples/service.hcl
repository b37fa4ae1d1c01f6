# service: a long-running job on one GPU. It prints a heartbeat every second
# until it is stopped (gpulayer job stop service) and exits cleanly on SIGTERM.
job "service" {
  type     = "service"
  priority = 60

  constraint {
    attribute = "${attr.kernel.name}"
    value     = "linux"
  }

  group "web" {
    count = 1

    restart {
      attempts = 3
      delay    = "5s"
      interval = "5m"
      mode     = "delay"
    }

    task "heartbeat" {
      driver       = "native"
      kill_signal  = "SIGTERM"
      kill_timeout = "5s"

      config {
        command = "/bin/sh"
        args = [
          "-c",
          "trap 'echo stopping; exit 0' TERM INT; n=0; while true; do n=$((n+1)); echo \"heartbeat $n gpus=$CUDA_VISIBLE_DEVICES\"; sleep 1; done",
        ]
      }

      resources {
        cpu    = 100
        memory = 64

        device "nvidia/gpu" {
          count = 1

          affinity {
            attribute = "${device.attr.memory}"
            operator  = ">="
            value     = "16 GiB"
            weight    = 50
          }
        }
      }
    }
  }
}
